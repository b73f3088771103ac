"""Synergy's CPU and memory rule: GPU-proportional shares, demand vectors under ``tune``.

Synergy (Mohan et al., OSDI 2022, Sec. 4; simulator ``resources/cluster.py``,
``allocate_synergy_tune``, ``_tune``, ``allocate_synergy_placement``): ``proportional``
gives every job exactly the GPU-proportional share of its servers' CPUs and memory.
Under ``tune`` a job asks for its demand vector from its sensitivity profile, is placed
on a server where that fits, and gets it whole; if it does not fit it gets the
proportional share; when a newcomer's share does not fit, jobs holding more than their
share are brought back to it ("peer adjustment"). No job runs slower than at its
proportional share: an insensitive job's demand is below the share only where its
profile loses nothing by it. Every round, all running jobs are allocated again in
arrival order (:meth:`SynergyCpus._retune_round`).

Profiles: Synergy's published ones for its models (``shapeshift.perf.synergy_profiles``);
for a transformer job the performance model's throughput over CPU threads per GPU (only
ZeRO-Offload plans depend on CPUs), whose demand is the fewest threads per GPU reaching
:data:`KNEE` of the best throughput up to :data:`MAX_SHARE` times the proportional share,
never below it, taken in part when only part is free. Extra CPUs come from any CPUs
left on the job's nodes (the shares of idle GPUs included). Any change of a running
job's allocation costs the run's restore pause; at a round a running job is re-tuned only
when that pays (:meth:`SynergyCpus._retune_pays`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, ExecutionPlan, Resources
from shapeshift.perf.synergy_profiles import SynergyProfile, synergy_profile
from shapeshift.policies.planaware.jobs import PlanJob, Variant
from shapeshift.policies.planaware.knowledge import Knowledge, fixed_space

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
    on_node: dict[int, dict[str, None]]
    jobs: dict[str, PlanJob]
    _batch: Callable[[PlanJob], float]  # Growth's: a job's samples per iteration
    knowledge: Knowledge
    variant: Variant

    def _profile(self, j: PlanJob) -> SynergyProfile | None:
        """Synergy's published profile of ``j``'s model when the performance model does not
        know it (Synergy's CNN/RNN models)."""
        if self.knowledge.knowledge(j.spec.model) is not None:
            return None
        return synergy_profile(j.spec.model)

    def _floor(self, j: PlanJob, n: int, gpus: int) -> tuple[float, float | None]:
        """(CPUs, GB or ``None`` = what the plan needs) that ``j`` gets at least on node
        ``n``: the GPU-proportional share; under ``tune``, a profiled job whose demand is
        below it gets its demand there when its profile loses nothing by it (Synergy's
        demand vector, e.g. gnmt's 1 CPU and 20 GB per GPU)."""
        node = self._view.cluster.nodes[n]
        share = gpus / node.gpus
        cpus, mem = node.cpus * share, node.mem_gb * share
        p = self._profile(j)
        if p is None:
            return cpus, None
        if self.variant.cpu_mode == "tune" and gpus:
            c, m = min(cpus / gpus, p.cpus_per_gpu), min(mem / gpus, p.gb_per_gpu)
            if p.speed(c, m) >= p.speed(cpus / gpus, mem / gpus) - 1e-9:
                return c * gpus, m * gpus
        return cpus, mem

    def _host_misfit(self, j: PlanJob, n: int, gpus: int) -> bool:
        """Synergy places a job on a server where its whole demand vector fits, the fullest
        such server first (``cluster.py`` ``allocate_synergy_placement``): under ``tune``, a
        profiled job's demand on ``gpus`` GPUs of ``n`` must fit the CPUs and memory that
        the jobs there hold (their allocation if unchanged, else their floor)."""
        p = self._profile(j) if self.variant.cpu_mode == "tune" else None
        if p is None:
            return False
        node = self._view.cluster.nodes[n]
        cpus, mem = float(node.cpus), float(node.mem_gb)
        for jid in self.on_node[n]:
            other = self.jobs[jid]
            alloc = other.status.allocation
            held = [r for m, r in alloc.placement if m == n] if alloc is not None else []
            if held and held[0].gpus == other.nodes.get(n, 0):
                cpus, mem = cpus - held[0].cpus, mem - held[0].mem_gb
            elif other.nodes.get(n, 0):
                floor_cpus, floor_mem = self._floor(other, n, other.nodes[n])
                cpus, mem = cpus - floor_cpus, mem - (floor_mem or 0.0)
        return cpus + 1e-9 < p.cpus_per_gpu * gpus or mem + 1e-9 < p.gb_per_gpu * gpus

    def _reclaim_for_proportional(
        self, view: ClusterView, keep: list[PlanJob], change: list[PlanJob]
    ) -> tuple[list[PlanJob], list[PlanJob]]:
        """Peer adjustment: a kept job holding more than its floor on a node where new or
        changed jobs need theirs (CPUs or, for profiled jobs, memory) is brought back to
        its floor."""
        need: dict[int, list[float]] = {}
        for j in change:
            for n, g in j.nodes.items():
                cpus, mem = self._floor(j, n, g)
                acc = need.setdefault(n, [0.0, 0.0])
                acc[0] += cpus
                acc[1] += mem or 0.0
        if not need:
            return keep, change
        free = {n: [float(view.cluster.nodes[n].cpus), float(view.cluster.nodes[n].mem_gb)] for n in need}
        for j in keep:
            alloc = j.status.allocation
            assert alloc is not None
            for n, r in alloc.placement:
                if n in free:
                    free[n][0] -= r.cpus
                    free[n][1] -= r.mem_gb
        still: list[PlanJob] = []
        for j in keep:
            alloc = j.status.allocation
            assert alloc is not None
            short = {n for n, _ in alloc.placement if n in need and any(free[n][k] + 1e-9 < need[n][k] for k in (0, 1))}
            floors = {n: self._floor(j, n, r.gpus) for n, r in alloc.placement}
            extra = {
                n for n, r in alloc.placement
                if r.cpus > floors[n][0] + 1e-9 or (floors[n][1] is not None and r.mem_gb > floors[n][1] + 1e-9)
            }  # fmt: skip
            if short & extra:
                for n, r in alloc.placement:
                    if n in free:
                        free[n][0] += r.cpus - floors[n][0]
                        free[n][1] += r.mem_gb - (r.mem_gb if floors[n][1] is None else floors[n][1])
                change.append(j)
            else:
                still.append(j)
        return still, change

    def _tune_cpus(
        self,
        changed: list[PlanJob],
        desired: dict[str, Allocation],
        cpu_free: dict[int, float],
        mem_free: dict[int, float],
        whole: bool = False,
    ) -> None:
        """Give jobs CPUs (and, profiled ones, memory) beyond their floor, up to their
        demand, from what is left on their nodes. A profiled job gets its whole demand or
        nothing more (Synergy's ``_tune`` tries the demand vector, else the fair share);
        with ``whole``, so does every job (a running job is not restarted for part of it)."""
        for j in changed:
            alloc = desired[j.id]
            place = [r.gpus for _, r in alloc.placement]
            g = sum(place)
            profile = self._profile(j)
            if profile is not None:
                want_cpus, want_mem = profile.cpus_per_gpu * g, profile.gb_per_gpu * g
            elif alloc.plan is not None and self.knowledge.knowledge(j.spec.model) is not None:
                want_cpus, want_mem = self._cpu_demand(j, alloc.plan, place, alloc.total.cpus), alloc.total.mem_gb
            else:
                continue
            extra_cpus = want_cpus - alloc.total.cpus
            extra_mem = max(0.0, want_mem - alloc.total.mem_gb)
            if extra_cpus <= 1e-9 and extra_mem <= 1e-9:
                continue
            extra_cpus = max(0.0, extra_cpus)
            shares = []
            fits = True
            for n, r in alloc.placement:
                c = min(extra_cpus * r.gpus / g, max(0.0, cpu_free.get(n, 0.0)))
                m = min(extra_mem * r.gpus / g, max(0.0, mem_free.get(n, 0.0)))
                fits = fits and c >= extra_cpus * r.gpus / g - 1e-9 and m >= extra_mem * r.gpus / g - 1e-9
                shares.append((n, r, c, m))
            if (whole or profile is not None) and not fits:
                continue
            if profile is None and all(c <= 1e-9 for _, _, c, _ in shares):
                continue
            for n, _, c, m in shares:
                cpu_free[n] -= c
                mem_free[n] -= m
            placement = tuple((n, Resources(r.gpus, r.cpus + c, r.mem_gb + m)) for n, r, c, m in shares)
            desired[j.id] = replace(alloc, placement=placement)

    def _retune_round(
        self,
        keep: list[PlanJob],
        change: list[PlanJob],
        desired: dict[str, Allocation],
        cpu_free: dict[int, float],
        mem_free: dict[int, float],
    ) -> None:
        """Synergy's round (``schedulers/fifo_synergy_new.py``: every lease ends and jobs are
        allocated again in arrival order): every job goes back to its floor, then each, in
        queue order, gets its whole demand if it fits, else a running job keeps what it
        holds if that is still free. A running job whose CPUs and memory come out the same
        keeps its allocation (no restart)."""
        for j in keep:
            cur = desired[j.id]
            placement = []
            for n, r in cur.placement:
                cpus, mem = self._floor(j, n, r.gpus)
                mem = r.mem_gb if mem is None else mem
                cpu_free[n] += r.cpus - cpus
                mem_free[n] += r.mem_gb - mem
                placement.append((n, Resources(r.gpus, cpus, mem)))
            desired[j.id] = replace(cur, placement=tuple(placement))
        kept = {j.id for j in keep}
        for j in sorted(keep + change, key=lambda j: j.order):
            floor = desired[j.id]
            self._tune_cpus([j], desired, cpu_free, mem_free, whole=True)
            cur, new = j.status.allocation, desired[j.id]
            if j.id not in kept or cur is None:
                continue
            if new is not floor and new != cur and not self._retune_pays(j, cur, new):
                for (n, r), (_, f) in zip(new.placement, floor.placement, strict=True):
                    cpu_free[n] += r.cpus - f.cpus
                    mem_free[n] += r.mem_gb - f.mem_gb
                desired[j.id] = new = floor
            if new is not floor:
                continue
            # Not its whole demand: a running job keeps the part it holds while that is
            # still free (the performance model's jobs may hold part of theirs).
            pairs = zip(cur.placement, floor.placement, strict=True)
            extra = [(n, r.cpus - f.cpus, r.mem_gb - f.mem_gb) for (n, r), (_, f) in pairs]
            if all(c <= cpu_free[n] + 1e-9 and m <= mem_free[n] + 1e-9 for n, c, m in extra):
                for n, c, m in extra:
                    cpu_free[n] -= c
                    mem_free[n] -= m
                desired[j.id] = cur
        for j in keep:
            if desired[j.id] == j.status.allocation:
                desired[j.id] = j.status.allocation

    def _retune_pays(self, j: PlanJob, cur: Allocation, new: Allocation) -> bool:
        """Whether moving running job ``j`` from ``cur`` to ``new`` at a round finishes it
        sooner, the restart pause (``restore_penalty``) included. Synergy's simulator
        charges no pause, so with ``restore_penalty=0`` every gain pays."""
        p = self._profile(j)
        if p is not None:
            before, after = (p.speed(*self._per_gpu(a)) for a in (cur, new))
        elif cur.plan is not None and self.knowledge.knowledge(j.spec.model) is not None:
            space, place = fixed_space(cur.plan), [r.gpus for _, r in cur.placement]
            choices = [self.knowledge.best(j.spec.model, place, a.total.cpus, space) for a in (cur, new)]
            if choices[0] is None or choices[1] is None:
                return False
            batch = self._batch(j)  # throughput is in samples/s; the work left in iterations
            before, after = choices[0].throughput / batch, choices[1].throughput / batch
        else:
            return False
        if before <= 0 or after <= before:
            return False
        left = j.status.remaining_at(self._view.now)
        return self.variant.restore_penalty + left / after < left / before

    @staticmethod
    def _per_gpu(alloc: Allocation) -> tuple[float, float]:
        total = alloc.total
        return total.cpus / max(total.gpus, 1), total.mem_gb / max(total.gpus, 1)

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
