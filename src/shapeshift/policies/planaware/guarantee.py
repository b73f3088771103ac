"""Step 1 of a plan-aware decision: guaranteed jobs and their ``minRes``.

Guaranteed jobs of a tenant with a GPU quota are placed first, packed on the fewest
nodes, at ``minRes``: the fewest GPUs whose best plan is predicted to reach the
throughput of the requested plan on the requested resources (Rubick, Sec. 4.2).
Best-effort jobs in the way are shrunk, least sensitive first, or preempted.
"""

from __future__ import annotations

import numpy as np

from shapeshift.model import JobSpec
from shapeshift.perf.plans import packed_placement
from shapeshift.policies.planaware.jobs import DEFAULT_CPUS_PER_GPU, PlanJob, Variant
from shapeshift.policies.planaware.knowledge import Choice, Knowledge, fixed_space, job_space
from shapeshift.policies.planaware.ledger import Ledger


class Guarantee(Ledger):
    """Mixin of ``PlanAwareScheduler``: throughput targets, ``minRes`` and packed placement."""

    variant: Variant
    knowledge: Knowledge
    _min_res: dict[str, tuple[int, Choice | None]]
    _pinned: set[str]

    def _requested_thr(self, spec: JobSpec, gpn: int, curve: np.ndarray) -> float:
        if spec.plan is None or spec.num_gpus < 1:
            return float(curve[min(max(spec.num_gpus, 1), len(curve) - 1)]) or 1.0
        c = self.knowledge.best(
            spec.model, packed_placement(spec.num_gpus, gpn), self._cpus(spec, spec.num_gpus), fixed_space(spec.plan)
        )
        return c.throughput if c else (float(curve[min(spec.num_gpus, len(curve) - 1)]) or 1.0)

    def _cpus(self, spec: JobSpec, gpus: int) -> float:
        per = spec.num_cpus / spec.num_gpus if spec.num_cpus > 0 and spec.num_gpus else DEFAULT_CPUS_PER_GPU
        return per * gpus

    def min_res(self, spec: JobSpec, gpn: int, curve: np.ndarray | None = None) -> tuple[int, Choice | None]:
        """Fewest GPUs (packed, CPUs pro rata, never above the request) whose best plan is
        predicted to reach the requested configuration's throughput (+ ``slo_margin``)."""
        if spec.job_id in self._pinned:
            return spec.num_gpus, None
        hit = self._min_res.get(spec.job_id)
        if hit is not None:
            return hit
        v = self.variant
        result: tuple[int, Choice | None] = (spec.num_gpus, None)
        if v.min_res and spec.plan is not None and self.knowledge.knowledge(spec.model) is not None:
            target = self._requested_thr(spec, gpn, np.zeros(1))
            space = job_space(spec, v.replan, v.elastic)
            start = 1 if v.elastic else spec.num_gpus
            for g in range(start, spec.num_gpus + 1):
                c = self.knowledge.best(spec.model, packed_placement(g, gpn), self._cpus(spec, g), space)
                if c is None:
                    continue
                seen = self.knowledge.is_observed(spec.model, c.plan, packed_placement(g, gpn), self._cpus(spec, g))
                margin = v.slo_margin if seen else v.trust_margin
                if g == spec.num_gpus or c.throughput >= target * (1 + margin):
                    if g == spec.num_gpus and c.throughput < target:
                        c = None  # keep the requested plan at the requested size
                    result = (g, c)
                    break
        self._min_res[spec.job_id] = result
        return result

    # ------------------------------------------------------------ guaranteed
    def _place_packed(self, j: PlanJob, nodes: list[int], gpn: int) -> bool:
        shape = packed_placement(j.g_min, gpn)
        reclaim = {
            n: self.free[n] + sum(self.jobs[i].nodes[n] for i in self.on_node[n] if not self.jobs[i].protected)
            for n in nodes
        }
        chosen: list[tuple[int, int]] = []
        taken: set[int] = set()
        for want in shape:
            cands = [n for n in nodes if n not in taken and reclaim[n] >= want]
            if not cands:
                return False
            n = min(cands, key=lambda n: (max(0, want - self.free[n]), self.free[n] - want, n))
            chosen.append((n, want))
            taken.add(n)
        for n, want in chosen:
            while self.free[n] < want:
                victims = [self.jobs[i] for i in self.on_node[n] if not self.jobs[i].protected]
                w = min(victims, key=lambda w: (self._loss(w), -w.order))
                self._shrink(w, n)
            self._move(j, n, want)
        return True

