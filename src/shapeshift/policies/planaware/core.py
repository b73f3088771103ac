"""The shared skeleton of the plan-aware policies (Rubick's Algorithm 1 and its relatives).

One decision, per partition, on every arrival and completion (Rubick, Algorithm 1):

1. **Guaranteed jobs** of a tenant with a GPU quota: queued ones are placed first, in
   queue order, at ``minRes`` (the smallest allocation, GPUs then CPUs, whose best plan is
   predicted to reach the throughput of the job's requested plan on its requested
   resources; never above the request), when ``minRes`` fits the tenant's remaining
   quota; quota is charged at ``minRes``. Others are shrunk for them (least sensitive
   first) or, below their minimum, preempted; every placement passes AllocMem (host
   memory) before anything is committed. A best-effort job queued longer than
   ``Variant.starvation`` is placed the same way, without quota (Rubick arXiv v2, Sec. 5.2).
   AntMan's variant (Sec. 3.3) adds ``Variant.reserve`` (a guaranteed job that cannot start
   keeps the GPUs and quota it could get from later guaranteed jobs) and
   ``Variant.opportunistic_after`` (a guaranteed job queued that long runs as a
   best-effort one until its tenant's quota has room for it again).
2. **Best-effort and running jobs**, guaranteed running jobs included (they are shrinkable
   to their ``minRes`` and growable), are visited in descending GPU slope of their
   sensitivity curves, ties by CPU slope (Rubick) or in queue order (FIFO baselines). A
   visiting job takes free GPUs and, when ``steal`` is on, shrinks the least sensitive
   shrinkable job on a node, one unit at a time, when that job loses less than the
   visitor gains. A job shrunk below the minimum it can run with is preempted. A job
   that cannot reach its minimum gives back what it took.
3. For every placement found, the **best plan** of the job's plan space is chosen from the
   (cached) performance model and **host memory** is allocated for that plan; CPUs follow
   the policy's CPU rule.

Slopes are throughput per GPU divided by a per-job scale (``Variant.slope``). Changing a
running job costs a checkpoint-restart pause (``restore_penalty``, 78 s by default): a
running job is only grown when its predicted finish time improves by more than the pause
(and ``min_gain``). The older behaviours (slopes scaled by the job's own requested
throughput, guaranteed jobs fixed at minRes and packed, the SLO guard) are Variant knobs.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from shapeshift.engine.contract import PolicyTraits
from shapeshift.engine.fractions import allowed_nodes
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, Schedule
from shapeshift.policies.framework.base import ARRIVAL, COMPLETION, ROUND
from shapeshift.policies.planaware.jobs import DEFAULT_CPUS_PER_GPU, CpuMode, PlanJob, Variant
from shapeshift.policies.planaware.knowledge import Choice, Knowledge, job_space
from shapeshift.policies.planaware.materialise import Materialise
from shapeshift.wording import count

__all__ = ["DEFAULT_CPUS_PER_GPU", "CpuMode", "PlanAwareScheduler", "PlanJob", "Variant", "_Job"]

#: The fixed baseline that ``slope="baseline"`` scales throughput by (Rubick Sec. 7.2).
BASELINE_GPUS = 4

#: The working record's former name (kept for callers that build one directly).
_Job = PlanJob


class PlanAwareScheduler(Materialise):
    """Policy object shared by rubick, rubick-e/-r/-n, antman and synergy (see module doc).

    The three steps live in mixins, one module each: ``guarantee`` (step 1), ``growth``
    (step 2) and ``materialise`` (step 3), over the undoable moves of ``ledger``."""

    triggers = frozenset({ARRIVAL, COMPLETION})
    default_round: float | None = None
    #: Rubick, AntMan and Synergy count whole GPUs per node (a plan's GPUs, AntMan's GPU
    #: requests): a job asking for a fraction of one gets a whole GPU (ours).
    traits = PolicyTraits(whole_gpus=True)

    def __init__(self, variant: Variant, knowledge: Knowledge) -> None:
        self.variant = variant
        self.reserved = {}
        self.name = variant.name
        self.knowledge = knowledge
        rounds = [r for r in (variant.guard_round, variant.retune_round) if r is not None]
        if rounds:
            self.triggers = frozenset({ARRIVAL, COMPLETION, ROUND})
            self.default_round = min(rounds)
        self._min_res: dict[str, tuple[int, Choice | None, float]] = {}
        self._pinned: set[str] = set()
        self._starved: set[str] = set()  # best-effort jobs started by the anti-starvation rule
        self._converted: set[str] = set()  # guaranteed jobs running as best-effort (``opportunistic_after``)
        self.decide_calls = 0

    # ================================================================ decide
    def decide(self, view: ClusterView) -> Schedule:
        self.decide_calls += 1
        self.knowledge.observe(view)
        desired: dict[str, Allocation] = dict(view.allocations)
        reasons: dict[str, str] = {}
        for part in sorted(view.dirty_partitions):
            if part not in view.partitions:
                continue
            for jid in list(view.running(part)):
                desired.pop(jid, None)
            self._decide_partition(view, part, desired, reasons)
        schedule = Schedule.replace(view.allocations, desired, reasons)
        wake = [t for t in (self._next_starvation(view), self._next_conversion(view)) if t is not None]
        return dataclasses.replace(schedule, wake_at=min(wake)) if wake else schedule

    def _next_starvation(self, view: ClusterView) -> float | None:
        """The instant the next waiting best-effort job crosses the starvation threshold, so
        the rule acts then, not at the next arrival or completion."""
        return self._next_due(view, self.variant.starvation, guaranteed=False)

    def _next_conversion(self, view: ClusterView) -> float | None:
        """The instant the next queued guaranteed job turns opportunistic."""
        return self._next_due(view, self.variant.opportunistic_after, guaranteed=True)

    def _next_due(self, view: ClusterView, limit: float | None, guaranteed: bool) -> float | None:
        if limit is None:
            return None
        due = [
            view.job(jid).spec.submit_time + limit
            for part in view.partitions
            for jid in view.pending(part)
            if view.job(jid).spec.guaranteed == guaranteed and jid not in self._converted
        ]
        due = [t for t in due if t > view.now + 1e-6]
        return min(due) if due else None

    def _convert_waiting(self, view: ClusterView, part: str) -> None:
        """AntMan Sec. 3.3: a guaranteed job queued longer than ``opportunistic_after`` runs
        as an opportunistic (best-effort) job until it is upgraded (``_upgrade``)."""
        limit = self.variant.opportunistic_after
        if limit is None:
            return
        self._converted &= {j for p in view.partitions for j in (*view.running(p), *view.pending(p))}
        for jid in view.pending(part):
            spec = view.job(jid).spec
            if spec.guaranteed and view.now - spec.submit_time >= limit - 1e-6:
                self._converted.add(jid)

    def _upgrade(self, jobs: dict[str, PlanJob], used: dict[str, int], quotas: dict[str, int]) -> None:
        """AntMan Sec. 3.3: an opportunistic job that was guaranteed is guaranteed again, at
        what it holds, as soon as its tenant's quota has room for it."""
        for j in sorted((j for j in jobs.values() if j.id in self._converted and j.running), key=lambda j: j.order):
            if used.get(j.spec.tenant, 0) + j.g <= quotas.get(j.spec.tenant, 0):
                self._converted.discard(j.id)
                j.protected = True
                j.g_min = j.g_max = j.g
                used[j.spec.tenant] = used.get(j.spec.tenant, 0) + j.g

    # ------------------------------------------------------------ job info
    def _gpn(self, view: ClusterView, nodes: list[int]) -> int:
        return max(view.cluster.nodes[n].gpus for n in nodes)

    def _job(self, view: ClusterView, jid: str, order: int, total_gpus: int, gpn: int) -> PlanJob:
        status = view.job(jid)
        spec = status.spec
        v = self.variant
        space = job_space(spec, v.replan, v.elastic)
        unit = 1 if space[0] == "all" or spec.plan is None else spec.plan.tp
        req = max(spec.num_gpus, 1)
        cpu_per_gpu = spec.num_cpus / req if spec.num_cpus > 0 else self._cpn_now
        kn = self.knowledge
        curve = kn.curve(spec.model, space, total_gpus, gpn, cpu_per_gpu) if kn.knowledge(spec.model) else None
        if curve is None:  # a job the model does not know: linear speed-up, fixed size
            curve = np.arange(total_gpus + 1, dtype=float)
        scale = self._slope_scale(spec, gpn, curve)
        tenants = view.cluster.tenants
        protected = (spec.guaranteed and tenants.get(spec.tenant, 0) > 0 and jid not in self._converted) or (
            jid in self._starved
        )
        fixed = not v.elastic or kn.knowledge(spec.model) is None
        cap = total_gpus if v.max_scale is None else min(total_gpus, int(v.max_scale * spec.num_gpus))
        min_cpus = None
        if protected:
            g_min, _, cpus = self.min_res_full(spec, gpn)
            min_cpus = cpus if v.min_cpus else None
            g_max = g_min if v.fixed_guaranteed or fixed else max(g_min, cap)
        elif fixed:
            g_min = g_max = spec.num_gpus
        else:
            feasible = np.flatnonzero(curve > 0)
            g_min = int(feasible[0]) if feasible.size else spec.num_gpus
            g_min = max(unit, math.ceil(g_min / unit) * unit)
            g_max = max(g_min, cap)
        job = PlanJob(jid, spec, status, space, unit, curve, scale, g_min, g_max, protected, order, cpu_per_gpu)
        job.min_cpus = min_cpus
        if status.allocation is not None:
            job.running = True
            for n, r in status.allocation.placement:
                if r.gpus:
                    job.nodes[n] = r.gpus
        return job

    def _rescue_starved(
        self, jobs: dict[str, PlanJob], pending: list[str], nodes: list[int], gpn: int, reasons: dict[str, str]
    ) -> None:
        """Rubick arXiv v2, Sec. 5.2: a best-effort job whose queueing delay exceeds the
        threshold is scheduled now, like a guaranteed job (at its minRes, shrinking or
        preempting best-effort jobs), and keeps that minimum while it runs."""
        limit = self.variant.starvation
        assert limit is not None
        for jid in sorted(pending, key=lambda i: (jobs[i].spec.submit_time, jobs[i].order)):
            j = jobs[jid]
            if j.protected or self.now - j.spec.submit_time < limit - 1e-6:
                continue
            before = (j.g_min, j.g_max, j.min_cpus)
            j.protected = True
            g_min, _, cpus = self.min_res_full(j.spec, self._gpn_now)
            j.g_min, j.min_cpus = g_min, (cpus if self.variant.min_cpus else None)
            j.g_max = max(j.g_min, j.g_max) if not self.variant.fixed_guaranteed else j.g_min
            if self._place_guaranteed(j, self._allowed(j, nodes), gpn):
                self._starved.add(jid)
            else:
                j.protected = False
                j.g_min, j.g_max, j.min_cpus = before
                reasons[jid] = f"waiting over {limit:g} s; no {j.g_min}-GPU placement free of protected jobs"

    def _slope_scale(self, spec, gpn: int, curve: np.ndarray) -> float:
        """What a job's throughput is divided by before slopes compare (``Variant.slope``)."""
        if self.variant.slope == "request":
            return self._requested_thr(spec, gpn, curve)
        # Rubick Sec. 7.2: throughput relative to a fixed 4-GPU baseline of the model (or the
        # fewest GPUs it runs on when 4 cannot hold it): the same for every job of a model.
        feasible = np.flatnonzero(curve[BASELINE_GPUS:] > 0) if len(curve) > BASELINE_GPUS else np.array([])
        return float(curve[BASELINE_GPUS + int(feasible[0])]) if feasible.size else (float(curve.max()) or 1.0)

    # ============================================================ partition
    def _allowed(self, j: PlanJob, nodes: list[int]) -> list[int]:
        """The nodes of ``nodes`` whose GPU type ``j`` allows (``engine.fractions``)."""
        return allowed_nodes(j.spec, nodes, self._node_types)

    def _decide_partition(
        self, view: ClusterView, part: str, desired: dict[str, Allocation], reasons: dict[str, str]
    ) -> None:
        v = self.variant
        self.now = view.now
        nodes = [int(n) for n in view.partitions[part]]
        cluster = view.cluster
        self._node_types = view.free().node_types
        gpn = self._gpn(view, nodes)
        self._convert_waiting(view, part)
        widest = max(nodes, key=lambda n: (cluster.nodes[n].gpus, -n))
        self._cpn_now = cluster.nodes[widest].cpus / max(cluster.nodes[widest].gpus, 1)
        total = sum(cluster.nodes[n].gpus for n in nodes)
        self.free = {n: cluster.nodes[n].gpus for n in nodes}
        self.on_node: dict[int, dict[str, None]] = {n: {} for n in nodes}
        self.log: list[tuple[PlanJob, int, int]] = []
        jobs: dict[str, PlanJob] = {}
        order = 0
        for jid in view.running(part):
            jobs[jid] = self._job(view, jid, order, total, gpn)
            order += 1
        pending = list(view.pending(part))
        for jid in pending:
            jobs[jid] = self._job(view, jid, order, total, gpn)
            order += 1
        self.jobs = jobs
        self._gpn_now = gpn
        self._view = view
        self.mem_free = {n: float(cluster.nodes[n].mem_gb) for n in nodes}
        self.mem_held = {}
        for j in jobs.values():
            for n, g in j.nodes.items():
                self.free[n] -= g
                self.on_node[n][j.id] = None
            if j.running and j.status.allocation is not None:
                held = {n: r.mem_gb for n, r in j.status.allocation.placement if n in self.mem_free}
                for n, gb in held.items():
                    self.mem_free[n] -= gb
                self.mem_held[j.id] = held

        # -- 1. guaranteed jobs: SLO guard, then queued ones within quota (charged at minRes)
        used: dict[str, int] = {}
        for j in jobs.values():
            if j.protected and j.running:
                st = j.status
                guard = v.slo_guard and st.target_rate is not None and j.id not in self._pinned
                if guard and st.rate < st.target_rate * (1 - 1e-6):
                    self._pinned.add(j.id)
                    self._release(j)
                    j.g_min = j.g_max = j.spec.num_gpus
                    j.min_cpus = None
                    j.pinned = True
                elif j.spec.guaranteed:
                    used[j.spec.tenant] = used.get(j.spec.tenant, 0) + min(j.g, j.g_min)
        self._upgrade(jobs, used, cluster.tenants)
        queue = [j for j in jobs.values() if j.pinned] + [jobs[i] for i in pending if jobs[i].protected]
        # ``Variant.reserve`` (AntMan Sec. 3.3): a guaranteed job that cannot start keeps
        # what it could get: the GPUs of its placement (``_reserve``), and its tenant's
        # quota, so later guaranteed jobs of that tenant wait. Best-effort jobs may use
        # the reserved GPUs (step 2 ignores the reservation).
        self.reserved = {}
        tenant_held: dict[str, str] = {}
        for j in queue:
            head = tenant_held.get(j.spec.tenant)
            if head is not None and not j.pinned:
                reasons[j.id] = f"tenant {j.spec.tenant}'s quota reserved for guaranteed job {head}, queued before it"
                continue
            quota = cluster.tenants.get(j.spec.tenant, 0)
            if j.spec.guaranteed and used.get(j.spec.tenant, 0) + j.g_min > quota:
                reasons[j.id] = f"tenant {j.spec.tenant} quota: {used.get(j.spec.tenant, 0)} of {quota} GPUs in use"
                if v.reserve:
                    tenant_held[j.spec.tenant] = j.id
                continue
            if self._place_guaranteed(j, self._allowed(j, nodes), gpn):
                if j.spec.guaranteed:
                    used[j.spec.tenant] = used.get(j.spec.tenant, 0) + j.g_min
            else:
                reasons[j.id] = f"no {j.g_min}-GPU placement free of guaranteed jobs"
                if v.reserve:
                    self._reserve(j, self._allowed(j, nodes), gpn)
        if v.starvation is not None:
            self._rescue_starved(jobs, pending, nodes, gpn, reasons)
        self.reserved = {}

        # -- 2. visit best-effort and running jobs (guaranteed ones too, unless fixed)
        visitors = [j for j in jobs.values() if not j.protected or (j.running and not v.fixed_guaranteed)]
        if v.order == "slope":
            visitors.sort(key=lambda j: (-self._gain(j)[0], -self._cpu_gain(j), j.order))
        else:
            visitors.sort(key=lambda j: (not j.running, j.order))
        for j in visitors:
            if j.running and j.g == 0:
                continue  # preempted earlier in this decision
            mark = len(self.log)
            if not j.running:
                if j.g >= j.g_min and j.g:
                    continue  # placed by the anti-starvation rule in step 1
                if not self._grow(j, self._allowed(j, nodes), gpn, steal=v.steal):
                    reasons.setdefault(j.id, f"needs {count(j.g_min, 'GPU')}; {sum(self.free.values())} free")
                elif not self._settle(j, mark):
                    reasons[j.id] = "no plan fits the GPUs, CPUs and host memory found"
            elif v.elastic and j.g < j.g_max:
                self._grow_running(j, self._allowed(j, nodes), gpn)
                if len(self.log) > mark:
                    self._settle(j, mark)

        # -- 3. plans, CPUs and host memory
        self._materialise(view, nodes, jobs, desired, reasons)

