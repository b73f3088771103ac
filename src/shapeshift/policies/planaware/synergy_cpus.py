"""Synergy's CPU rule: GPU-proportional shares, and more for CPU-sensitive jobs (``tune``).

Synergy (Mohan et al., OSDI 2022, Sec. 4; simulator ``resources/cluster.py``,
``allocate_synergy_tune`` and ``_tune``): every job is guaranteed the GPU-proportional
share of its servers' CPUs (``proportional`` mode gives exactly that); under ``tune`` a
job first asks for its best demand from its sensitivity profile, more than proportional
when it is CPU-sensitive, and when a newcomer's share does not fit, jobs holding more
than proportional are brought back to proportional ("peer adjustment"). Throughput is
never below what the proportional share gives.

Here the sensitivity profile of a transformer job is the performance model's throughput
over CPU threads per GPU (only ZeRO-Offload plans depend on CPUs); the demand is the
fewest threads per GPU reaching :data:`KNEE` of the best throughput up to
:data:`MAX_SHARE` times the proportional share. Extra CPUs come from any CPUs left on the
job's nodes (the shares of idle GPUs included); a later job that needs its share there
brings the holder back to proportional, which, like any change, costs the restore pause.
"""

from __future__ import annotations

from dataclasses import replace

from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, ExecutionPlan, Resources
from shapeshift.policies.planaware.jobs import PlanJob
from shapeshift.policies.planaware.knowledge import Knowledge

#: A job's CPU demand reaches this share of its best throughput (Synergy's profiles stop
#: at the knee of the curve: e.g. ResNet-18 at 9 CPUs per GPU for 2.4x).
KNEE = 0.95
#: The most CPUs per GPU a demand may ask, in proportional shares (Synergy's profiles go
#: up to 24 CPUs per GPU on 3-CPU-per-GPU servers: 8x; 4x keeps the search short).
MAX_SHARE = 4


class SynergyCpus:
    """Mixin of ``PlanAwareScheduler`` for ``cpu_mode`` ``tune`` / ``proportional``."""

    _view: ClusterView
    free: dict[int, int]
    knowledge: Knowledge

    def _proportional(self, n: int, gpus: int) -> float:
        node = self._view.cluster.nodes[n]
        return node.cpus * gpus / node.gpus

    def _reclaim_for_proportional(
        self, view: ClusterView, keep: list[PlanJob], change: list[PlanJob]
    ) -> tuple[list[PlanJob], list[PlanJob]]:
        """Peer adjustment: a kept job holding more than its proportional share on a node
        where new or changed jobs need theirs is brought back to proportional."""
        need: dict[int, float] = {}
        for j in change:
            for n, g in j.nodes.items():
                need[n] = need.get(n, 0.0) + self._proportional(n, g)
        if not need:
            return keep, change
        free = {n: float(view.cluster.nodes[n].cpus) for n in need}
        for j in keep:
            alloc = j.status.allocation
            assert alloc is not None
            for n, r in alloc.placement:
                if n in free:
                    free[n] -= r.cpus
        still: list[PlanJob] = []
        for j in keep:
            alloc = j.status.allocation
            assert alloc is not None
            short = [n for n, r in alloc.placement if n in need and free[n] + 1e-9 < need[n]]
            extra = [n for n, r in alloc.placement if r.cpus > self._proportional(n, r.gpus) + 1e-9]
            if short and set(short) & set(extra):
                for n, r in alloc.placement:
                    if n in free:
                        free[n] += r.cpus - self._proportional(n, r.gpus)
                change.append(j)
            else:
                still.append(j)
        return still, change

    def _tune_cpus(
        self, view: ClusterView, changed: list[PlanJob], desired: dict[str, Allocation], cpu_free: dict[int, float]
    ) -> None:
        """Give CPU-sensitive jobs CPUs beyond their share, up to their demand, from the CPUs
        left on their nodes."""
        spare = dict(cpu_free)
        for j in changed:
            alloc = desired[j.id]
            if alloc.plan is None or self.knowledge.knowledge(j.spec.model) is None:
                continue
            place = [r.gpus for _, r in alloc.placement]
            g = sum(place)
            base = alloc.total.cpus
            demand = self._cpu_demand(j, alloc.plan, place, base)
            want = demand - base
            if want <= 1e-9:
                continue
            shares = []
            for n, r in alloc.placement:
                extra = max(0.0, min(want * r.gpus / g, spare.get(n, 0.0)))
                spare[n] = spare.get(n, 0.0) - extra
                cpu_free[n] -= extra
                shares.append((n, Resources(r.gpus, r.cpus + extra, r.mem_gb)))
            desired[j.id] = replace(alloc, placement=tuple(shares))

    def _cpu_demand(self, j: PlanJob, plan: ExecutionPlan, place: list[int], base: float) -> float:
        """The fewest CPUs (whole threads per GPU) reaching ``KNEE`` of the job's best
        throughput with up to ``MAX_SHARE`` x its proportional CPUs, under its plan."""
        g = sum(place)
        kn = self.knowledge
        per_max = int(MAX_SHARE * base / g)
        space = ("fixed", plan)
        top = kn.best(j.spec.model, place, float(per_max * g), space)
        if top is None:
            return base
        for per in range(max(1, int(base / g)), per_max + 1):
            c = kn.best(j.spec.model, place, float(per * g), space)
            if c is not None and c.throughput >= KNEE * top.throughput:
                return max(base, float(per * g))
        return base
