"""Step 1 of a plan-aware decision: guaranteed jobs, their ``minRes``, and starved jobs.

Guaranteed jobs of a tenant with a GPU quota are placed first at ``minRes``: the smallest
allocation, GPUs first and then CPUs, whose best plan is predicted to reach the
throughput of the requested plan on the requested resources (Rubick, Sec. 5 and
Algorithm 1 lines 2-7; no margin by default). Best-effort jobs in the way are shrunk,
least sensitive first, or preempted; guaranteed jobs above their own ``minRes`` give back
what they hold beyond it. A best-effort job queued longer than the anti-starvation
threshold (Rubick arXiv v2, Sec. 5.2) is placed the same way, without quota.
"""

from __future__ import annotations

import numpy as np

from shapeshift.model import JobSpec
from shapeshift.perf.plans import packed_placement
from shapeshift.policies.planaware.jobs import DEFAULT_CPUS_PER_GPU, PlanJob, Variant
from shapeshift.policies.planaware.knowledge import Choice, Knowledge, fixed_space, job_space
from shapeshift.policies.planaware.ledger import Ledger

#: minRes per job: (GPUs, the plan chosen for them or None = the requested plan, CPUs in all)
MinRes = tuple[int, Choice | None, float]


class Guarantee(Ledger):
    """Mixin of ``PlanAwareScheduler``: throughput targets, ``minRes`` and guaranteed placement."""

    variant: Variant
    knowledge: Knowledge
    _min_res: dict[str, MinRes]
    _pinned: set[str]
    #: CPUs per GPU of the widest node of the partition being decided (set per decision).
    _cpn_now: float = DEFAULT_CPUS_PER_GPU

    def _requested_thr(self, spec: JobSpec, gpn: int, curve: np.ndarray) -> float:
        if spec.plan is None or spec.num_gpus < 1:
            return float(curve[min(max(spec.num_gpus, 1), len(curve) - 1)]) or 1.0
        c = self.knowledge.best(
            spec.model, packed_placement(spec.num_gpus, gpn), self._cpus(spec, spec.num_gpus), fixed_space(spec.plan)
        )
        return c.throughput if c else (float(curve[min(spec.num_gpus, len(curve) - 1)]) or 1.0)

    def _cpus(self, spec: JobSpec, gpus: int) -> float:
        """The job's CPUs pro rata to ``gpus``: its request per GPU, or, when it asked for
        none, the node's proportional share (CPUs per GPU of the partition's widest node)."""
        per = spec.num_cpus / spec.num_gpus if spec.num_cpus > 0 and spec.num_gpus else self._cpn_now
        return per * gpus

    def _job_cpus(self, j: PlanJob, gpus: int) -> float:
        """CPUs of ``j`` on ``gpus`` GPUs: minRes's CPUs at minRes, pro rata otherwise."""
        if j.min_cpus is not None and gpus == j.g_min:
            return j.min_cpus
        return self._cpus(j.spec, gpus)

    def min_res(self, spec: JobSpec, gpn: int, curve: np.ndarray | None = None) -> tuple[int, Choice | None]:
        """(GPUs, plan) of ``minRes``; see :meth:`min_res_full`."""
        g, choice, _ = self.min_res_full(spec, gpn)
        return g, choice

    def min_res_full(self, spec: JobSpec, gpn: int) -> MinRes:
        """The smallest allocation, never above the request in any dimension, whose best plan
        is predicted to reach the requested configuration's throughput.

        GPUs first: the fewest GPUs (packed) that reach the target with all the requested
        CPUs (``min_cpus``) or CPUs pro rata; then, with ``min_cpus``, the fewest CPU threads
        per GPU that still reach it. The same margin applies at every size, the requested
        one included (``slo_margin`` for a configuration already observed, ``trust_margin``
        for one only predicted; both 0 in the paper); at the requested size a plan that
        misses the target leaves the requested plan."""
        if spec.job_id in self._pinned:
            return spec.num_gpus, None, self._cpus(spec, spec.num_gpus)
        hit = self._min_res.get(spec.job_id)
        if hit is not None:
            return hit
        v = self.variant
        kn = self.knowledge
        req_cpus = self._cpus(spec, spec.num_gpus)
        result: MinRes = (spec.num_gpus, None, req_cpus)
        if v.min_res and spec.plan is not None and kn.knowledge(spec.model) is not None:
            target = self._requested_thr(spec, gpn, np.zeros(1))
            space = job_space(spec, v.replan, v.elastic)

            def meets(c: Choice | None, place: list[int], cpus: float) -> bool:
                if c is None:
                    return False
                seen = kn.is_observed(spec.model, c.plan, place, cpus)
                return c.throughput >= target * (1 + (v.slo_margin if seen else v.trust_margin)) * (1 - 1e-9)

            start = 1 if v.elastic else spec.num_gpus
            for g in range(start, spec.num_gpus + 1):
                place = packed_placement(g, gpn)
                cpus = req_cpus if v.min_cpus else self._cpus(spec, g)
                c = kn.best(spec.model, place, cpus, space)
                if meets(c, place, cpus):
                    result = (g, c, cpus)
                    break
            g, c, cpus = result
            if v.min_cpus and c is not None:
                place = packed_placement(g, gpn)
                for per in range(1, int(cpus // g) + 1):  # whole threads per GPU, fewest first
                    c2 = kn.best(spec.model, place, float(per * g), space)
                    if meets(c2, place, float(per * g)):
                        result = (g, c2, float(per * g))
                        break
        self._min_res[spec.job_id] = result
        return result

    # ------------------------------------------------------------ placement
    def _shrinkable(self, w: PlanJob) -> bool:
        """A job may give up a unit: best-effort always; a protected job only above its minRes
        (and only when guaranteed jobs are elastic, Algorithm 1 line 12)."""
        if not w.protected:
            return True
        return not self.variant.fixed_guaranteed and w.running and w.g - w.unit >= w.g_min

    #: GPUs per node set aside for guaranteed jobs that could not start (``Variant.reserve``).
    reserved: dict[int, int]

    def _reserve(self, j: PlanJob, nodes: list[int], gpn: int) -> None:
        """Set aside for ``j`` what it could get of its packed placement: for each part of
        the shape, the node with the most reclaimable GPUs left (AntMan Sec. 3.3, Algorithm
        1 lines 7-8: reserved GPUs go to no other guaranteed job; best-effort jobs may use
        them meanwhile)."""
        taken: set[int] = set()
        for want in packed_placement(j.g_min, gpn):
            cands = [n for n in nodes if n not in taken]
            if not cands:
                return
            n = max(cands, key=lambda n: (self._reclaimable(n), -n))
            taken.add(n)
            self.reserved[n] = self.reserved.get(n, 0) + min(want, self._reclaimable(n))

    def _reclaimable(self, n: int) -> int:
        total = self.free[n] - self.reserved.get(n, 0)
        for i in self.on_node[n]:
            w = self.jobs[i]
            if not w.protected:
                total += w.nodes[n]
            elif self._shrinkable(w):
                total += min(w.nodes[n], (w.g - w.g_min) // w.unit * w.unit)
        return total

    def _place_guaranteed(self, j: PlanJob, nodes: list[int], gpn: int) -> bool:
        """Give ``j`` its ``g_min`` GPUs: on free GPUs anywhere when a plan there reaches
        the target (unless ``pack_guaranteed``), else packed, shrinking others."""
        open_ = {n: max(0, self.free[n] - self.reserved.get(n, 0)) for n in nodes}
        if not self.variant.pack_guaranteed and sum(open_.values()) >= j.g_min:
            mark = len(self.log)
            for n in sorted(nodes, key=lambda n: (-open_[n], n)):
                take = min(open_[n], j.g_min - j.g)
                if take > 0:
                    self._move(j, n, take)
            c = self.knowledge.best(j.spec.model, list(j.nodes.values()), self._job_cpus(j, j.g), j.space)
            target = self._requested_thr(j.spec, gpn, j.curve)
            if c is not None and c.throughput >= target * (1 - 1e-9) and self._fits_memory(j, mark):
                return True
            self._rollback(mark)
        mark = len(self.log)
        if self._place_packed(j, nodes, gpn) and self._fits_memory(j, mark):
            return True
        self._rollback(mark)
        return False

    def _place_packed(self, j: PlanJob, nodes: list[int], gpn: int) -> bool:
        shape = packed_placement(j.g_min, gpn)
        reclaim = {n: self._reclaimable(n) for n in nodes}
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
                victims = [self.jobs[i] for i in self.on_node[n] if i != j.id and self._shrinkable(self.jobs[i])]
                if not victims:  # a victim's unit did not divide what was counted: give up
                    return False  # (the caller rolls back)
                w = min(victims, key=lambda w: (self._loss(w), -w.order))
                self._shrink(w, n)
            self._move(j, n, want)
        return True

    def _fits_memory(self, j: PlanJob, mark: int, choice: Choice | None = None) -> bool:  # in Materialise
        raise NotImplementedError
