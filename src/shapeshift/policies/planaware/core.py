"""The shared skeleton of the plan-aware policies (Rubick's Algorithm 1 and its relatives).

One decision, per partition:

1. **Guaranteed jobs** of a tenant with a GPU quota are placed first, in queue order, on
   the fewest nodes (packed), with ``minRes`` resources: the fewest GPUs (and the best
   plan for them) predicted to reach the throughput of the job's requested plan on its
   requested resources, never more than requested in any dimension (Rubick, Sec. 4.2).
   Their quota use is their GPUs; a job that does not fit the remaining quota waits.
   Best-effort jobs in the way are shrunk (least sensitive first) or preempted.
   A running guaranteed job observed below its promised rate (the SLO guard; the model
   was wrong) is moved to its requested plan and resources.
2. **Best-effort and running jobs** are visited in descending GPU-sensitivity slope (ties
   by CPU slope; Rubick) or in queue order (FIFO baselines). A visiting job takes free
   GPUs, and when ``steal`` is on, shrinks the least sensitive job on a node, one unit at
   a time, when that job is above its own minimum and loses less (normalised throughput
   per GPU, times ``1 + steal_margin``) than the visitor gains. A job shrunk below the
   minimum it can run with is preempted. A job that cannot reach its minimum gives back
   what it took.
3. For every placement found, the **best plan** of the job's plan space is chosen from the
   (cached) performance model and **host memory** is allocated for that plan; CPUs follow
   the policy's CPU rule.

Throughput is normalised by each job's predicted throughput at its requested resources,
so slopes of different models compare. Changing a running job costs a checkpoint-restart
pause (``restore_penalty``, 78 s by default): a running job is only grown when its
predicted finish time improves by more than the pause and ``min_gain``.
"""

from __future__ import annotations

import math

import numpy as np

from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, Schedule
from shapeshift.policies.base import ARRIVAL, COMPLETION, ROUND
from shapeshift.policies.planaware.jobs import DEFAULT_CPUS_PER_GPU, CpuMode, PlanJob, Variant
from shapeshift.policies.planaware.knowledge import Choice, Knowledge, job_space
from shapeshift.policies.planaware.materialise import Materialise
from shapeshift.wording import count

__all__ = ["DEFAULT_CPUS_PER_GPU", "CpuMode", "PlanAwareScheduler", "PlanJob", "Variant", "_Job"]

#: The working record's former name (kept for callers that build one directly).
_Job = PlanJob


class PlanAwareScheduler(Materialise):
    """Policy object shared by rubick, rubick-e/-r/-n, antman and synergy (see module doc).

    The three steps live in mixins, one module each: ``guarantee`` (step 1), ``growth``
    (step 2) and ``materialise`` (step 3), over the undoable moves of ``ledger``."""

    triggers = frozenset({ARRIVAL, COMPLETION})
    default_round: float | None = None

    def __init__(self, variant: Variant, knowledge: Knowledge) -> None:
        self.variant = variant
        self.name = variant.name
        self.knowledge = knowledge
        if variant.guard_round is not None:
            self.triggers = frozenset({ARRIVAL, COMPLETION, ROUND})
            self.default_round = variant.guard_round
        self._min_res: dict[str, tuple[int, Choice | None]] = {}
        self._pinned: set[str] = set()
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
        return Schedule.replace(view.allocations, desired, reasons)

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
        cpu_per_gpu = spec.num_cpus / req if spec.num_cpus > 0 else DEFAULT_CPUS_PER_GPU
        kn = self.knowledge
        curve = kn.curve(spec.model, space, total_gpus, gpn, cpu_per_gpu) if kn.knowledge(spec.model) else None
        if curve is None:  # a job the model does not know: linear speed-up, fixed size
            curve = np.arange(total_gpus + 1, dtype=float)
        req_thr = self._requested_thr(spec, gpn, curve)
        tenants = view.cluster.tenants
        protected = spec.guaranteed and tenants.get(spec.tenant, 0) > 0
        fixed = not v.elastic or kn.knowledge(spec.model) is None
        if protected:
            g_min, _ = self.min_res(spec, gpn, curve)
            g_max = g_min
        elif fixed:
            g_min = g_max = spec.num_gpus
        else:
            feasible = np.flatnonzero(curve > 0)
            g_min = int(feasible[0]) if feasible.size else spec.num_gpus
            g_min = max(unit, math.ceil(g_min / unit) * unit)
            g_max = max(g_min, min(total_gpus, int(v.max_scale * spec.num_gpus)))
        job = PlanJob(jid, spec, status, space, unit, curve, req_thr, g_min, g_max, protected, order, cpu_per_gpu)
        if status.allocation is not None:
            job.running = True
            for n, r in status.allocation.placement:
                if r.gpus:
                    job.nodes[n] = r.gpus
        return job

    # ============================================================ partition
    def _decide_partition(
        self, view: ClusterView, part: str, desired: dict[str, Allocation], reasons: dict[str, str]
    ) -> None:
        v = self.variant
        self.now = view.now
        nodes = [int(n) for n in view.partitions[part]]
        cluster = view.cluster
        gpn = self._gpn(view, nodes)
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
        for j in jobs.values():
            for n, g in j.nodes.items():
                self.free[n] -= g
                self.on_node[n][j.id] = None

        # -- 1. guaranteed jobs: SLO guard, then queued ones within quota
        used: dict[str, int] = {}
        for j in jobs.values():
            if j.protected and j.running:
                st = j.status
                if st.target_rate is not None and st.rate < st.target_rate * (1 - 1e-6) and j.id not in self._pinned:
                    self._pinned.add(j.id)
                    self._release(j)
                    j.g_min = j.g_max = j.spec.num_gpus
                    j.pinned = True
                else:
                    used[j.spec.tenant] = used.get(j.spec.tenant, 0) + j.g
        queue = [j for j in jobs.values() if j.pinned] + [jobs[i] for i in pending if jobs[i].protected]
        for j in queue:
            quota = cluster.tenants.get(j.spec.tenant, 0)
            if used.get(j.spec.tenant, 0) + j.g_min > quota:
                reasons[j.id] = f"tenant {j.spec.tenant} quota: {used.get(j.spec.tenant, 0)} of {quota} GPUs in use"
                continue
            if self._place_packed(j, nodes, gpn):
                used[j.spec.tenant] = used.get(j.spec.tenant, 0) + j.g
            else:
                reasons[j.id] = f"no {j.g_min}-GPU packed placement free of guaranteed jobs"

        # -- 2. visit best-effort (and running) jobs
        visitors = [j for j in jobs.values() if not j.protected]
        if v.order == "slope":
            visitors.sort(key=lambda j: (-self._gain(j)[0], j.order))
        else:
            visitors.sort(key=lambda j: (not j.running, j.order))
        for j in visitors:
            if j.running and j.g == 0:
                continue  # preempted earlier in this decision
            mark = len(self.log)
            if not j.running:
                if not self._grow(j, nodes, gpn, steal=v.steal):
                    reasons.setdefault(j.id, f"needs {count(j.g_min, 'GPU')}; {sum(self.free.values())} free")
                elif not self._settle(j, mark):
                    reasons[j.id] = "no plan fits the GPUs found"
            elif v.elastic and j.g < j.g_max:
                self._grow_running(j, nodes, gpn)
                if len(self.log) > mark:
                    self._settle(j, mark)

        # -- 3. plans, CPUs and host memory
        self._materialise(view, nodes, jobs, desired, reasons)

