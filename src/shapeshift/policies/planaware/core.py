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
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from shapeshift.engine.state import JobStatus
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, JobSpec, Resources, Schedule, ZeroMode
from shapeshift.perf.arch import get_arch
from shapeshift.perf.ground_truth import host_memory_gb
from shapeshift.perf.plans import packed_placement
from shapeshift.policies.base import ARRIVAL, COMPLETION, ROUND
from shapeshift.policies.planaware.knowledge import Choice, Knowledge, PlanSpace, fixed_space, job_space

CpuMode = Literal["requested", "elastic", "tune", "proportional"]
DEFAULT_CPUS_PER_GPU = 4.0


@dataclass(frozen=True)
class Variant:
    """Which knobs of the skeleton a policy turns."""

    name: str
    replan: bool  # choose plans (else keep the requested plan / its DP scaling)
    elastic: bool  # resize resources (else exactly the requested GPUs)
    order: Literal["slope", "fifo"] = "slope"
    steal: bool = True  # shrink less sensitive jobs for a visitor
    min_res: bool = True  # guaranteed jobs at minRes (else at their request)
    cpu_mode: CpuMode = "requested"
    max_scale: float = 2.0  # elastic jobs grow to at most this times their request
    steal_margin: float = 0.5
    min_gain: float = 0.10
    slo_margin: float = 0.02  # minRes margin for a configuration already observed
    trust_margin: float = 0.25  # ... and for one only predicted (few-shot errors reach 40%+)
    guard_round: float | None = None  # decide also every this many seconds (SLO guard reaction)
    restore_penalty: float = 78.0


@dataclass
class _Job:
    id: str
    spec: JobSpec
    status: JobStatus
    space: PlanSpace
    unit: int
    curve: np.ndarray
    req_thr: float
    g_min: int
    g_max: int
    protected: bool  # a covered guaranteed job: never a victim, never grown
    order: int
    cpu_per_gpu: float
    nodes: dict[int, int] = field(default_factory=dict)
    running: bool = False
    pinned: bool = False

    @property
    def g(self) -> int:
        return sum(self.nodes.values())


class PlanAwareScheduler:
    """Policy object shared by rubick, rubick-e/-r/-n, antman and synergy (see module doc)."""

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

    def _job(self, view: ClusterView, jid: str, order: int, total_gpus: int, gpn: int) -> _Job:
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
        job = _Job(jid, spec, status, space, unit, curve, req_thr, g_min, g_max, protected, order, cpu_per_gpu)
        if status.allocation is not None:
            job.running = True
            for n, r in status.allocation.placement:
                if r.gpus:
                    job.nodes[n] = r.gpus
        return job

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

    # ------------------------------------------------------------ slopes
    def _gain(self, j: _Job) -> tuple[float, int]:
        """(normalised throughput gain per GPU, target GPU count) of growing ``j``."""
        g, c = j.g, j.curve
        if g < j.g_min:
            # Below its minimum a job cannot run: it gains all of c[g_min], not the step from
            # c[g] (the monotone curve may already plateau below g_min, which read as "no
            # gain" stranded such jobs part-grown forever).
            h = j.g_min
            return c[h] / (h - g) / j.req_thr, h
        best, target = 0.0, g
        h = g + j.unit
        while h <= min(j.g_max, g + 8 * j.unit) and h < len(c):
            s = (c[h] - c[g]) / (h - g)
            if s > best * (1 + 1e-9):
                best, target = s, h
            h += j.unit
        return best / j.req_thr, target

    def _loss(self, j: _Job) -> float:
        """Normalised throughput lost per GPU when ``j`` gives up one unit."""
        g, c = j.g, j.curve
        if j.protected or g - j.unit < j.g_min:
            return c[g] / j.req_thr  # the whole job (it would be preempted)
        return (c[g] - c[g - j.unit]) / j.unit / j.req_thr

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
        self.log: list[tuple[_Job, int, int]] = []
        jobs: dict[str, _Job] = {}
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
                    reasons.setdefault(j.id, f"needs {j.g_min} GPUs; {sum(self.free.values())} free")
                elif not self._settle(j, mark):
                    reasons[j.id] = "no plan fits the GPUs found"
            elif v.elastic and j.g < j.g_max:
                self._grow_running(j, nodes, gpn)
                if len(self.log) > mark:
                    self._settle(j, mark)

        # -- 3. plans, CPUs and host memory
        self._materialise(view, nodes, jobs, desired, reasons)

    # ------------------------------------------------------------ moves
    def _move(self, j: _Job, node: int, delta: int) -> None:
        """Give ``j`` ``delta`` more GPUs on ``node`` (negative: take them), undoably."""
        self._apply(j, node, delta)
        self.log.append((j, node, delta))

    def _apply(self, j: _Job, node: int, delta: int) -> None:
        new = j.nodes.get(node, 0) + delta
        if new:
            j.nodes[node] = new
            self.on_node[node][j.id] = None
        else:
            j.nodes.pop(node, None)
            self.on_node[node].pop(j.id, None)
        self.free[node] -= delta

    def _release(self, j: _Job) -> None:
        for n, g in sorted(j.nodes.items()):
            self._move(j, n, -g)

    def _rollback(self, mark: int) -> None:
        while len(self.log) > mark:
            j, node, delta = self.log.pop()
            self._apply(j, node, -delta)

    def _shrink(self, w: _Job, node: int) -> None:
        """Take one unit of ``w`` on ``node``; below its minimum, ``w`` is preempted."""
        if w.g - w.unit < w.g_min:
            self._release(w)
        else:
            self._move(w, node, -min(w.unit, w.nodes[node]))

    # ------------------------------------------------------------ guaranteed
    def _place_packed(self, j: _Job, nodes: list[int], gpn: int) -> bool:
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

    # ------------------------------------------------------------ best effort
    def _node_order(self, j: _Job, nodes: list[int], need: int) -> list[int]:
        mine = sorted(j.nodes, key=lambda n: (-j.nodes[n], n))
        rest = [n for n in nodes if n not in j.nodes]
        if not mine and need <= max(self.free[n] for n in nodes):
            # best fit for a job that fits on one node: keep emptier nodes whole
            fit = [n for n in rest if self.free[n] >= need]
            fit.sort(key=lambda n: (self.free[n], n))
            return fit + sorted((n for n in rest if self.free[n] < need), key=lambda n: (-self.free[n], n))
        return mine + sorted(rest, key=lambda n: (-self.free[n], n))

    def _take_unit(self, j: _Job, nodes: list[int], gain: float, steal: bool, need: int) -> bool:
        order = self._node_order(j, nodes, need)
        for n in order:
            if self.free[n] >= j.unit:
                self._move(j, n, j.unit)
                return True
        if not steal:
            return False
        margin = 1 + self.variant.steal_margin
        for n in order:
            mark = len(self.log)
            lost = 0.0
            while self.free[n] < j.unit:
                victims = [self.jobs[i] for i in self.on_node[n] if i != j.id and not self.jobs[i].protected]
                if not victims:
                    break
                w = min(victims, key=lambda w: (self._loss(w), -w.order))
                loss = self._loss(w) * (w.g if w.g - w.unit < w.g_min else w.unit)
                if (lost + loss) * margin >= gain * j.unit:
                    break
                lost += loss
                self._shrink(w, n)
            if self.free[n] >= j.unit:
                self._move(j, n, j.unit)
                return True
            self._rollback(mark)
        return False

    def _grow(self, j: _Job, nodes: list[int], gpn: int, steal: bool) -> bool:
        """Grow a waiting job to at least its minimum; roll back when it cannot get there."""
        mark = len(self.log)
        while j.g < j.g_max:
            gain, target = self._gain(j)
            if gain <= 0 or target <= j.g:
                break
            if not self._take_unit(j, nodes, gain, steal and (self.variant.elastic or j.g < j.g_min), target - j.g):
                break
        if j.g < j.g_min or j.g == 0:
            self._rollback(mark)
            return False
        return True

    def _settle(self, j: _Job, mark: int) -> bool:
        """Keep only the GPUs ``j``'s best plan can use, or undo its growth when no plan fits.

        Growth follows the packed-placement curve, but the GPUs a job actually gets may be
        spread so that no plan fits (host memory, TP inside a node) or the best plan uses
        fewer of them. Settling here, not when plans are materialised, returns those GPUs
        while later visitors can still take them; otherwise they sat idle until the next
        decision while jobs behind were told nothing was free.
        """
        if not j.nodes or self.knowledge.knowledge(j.spec.model) is None:
            return True
        choice, place = self._choose_plan(j)
        if choice is None:
            self._rollback(mark)
            return False
        for n in sorted(j.nodes):
            extra = j.nodes[n] - place.get(n, 0)
            if extra > 0:
                self._move(j, n, -extra)
        return True

    def _grow_running(self, j: _Job, nodes: list[int], gpn: int) -> None:
        """Grow a running elastic job when its predicted finish time improves enough."""
        mark = len(self.log)
        before = j.curve[j.g]
        self._grow(j, nodes, gpn, steal=self.variant.steal)
        after = j.curve[j.g]
        if j.g != sum(r.gpus for _, r in j.status.allocation.placement) and not self._worth(j, before, after):
            self._rollback(mark)

    def _worth(self, j: _Job, before: float, after: float) -> bool:
        if before <= 0 or after <= before:
            return False
        remaining = j.status.remaining_at(self.now)
        arch_batch = self._batch(j)
        t_old = remaining * arch_batch / before
        t_new = self.variant.restore_penalty + remaining * arch_batch / after
        return t_new < t_old * (1 - self.variant.min_gain)

    def _batch(self, j: _Job) -> float:
        try:
            return float(get_arch(j.spec.model).global_batch)
        except KeyError:
            return 1.0

    # ------------------------------------------------------------ materialise
    def _materialise(
        self,
        view: ClusterView,
        nodes: list[int],
        jobs: dict[str, _Job],
        desired: dict[str, Allocation],
        reasons: dict[str, str],
    ) -> None:
        cluster = view.cluster
        cpu_free = {n: float(cluster.nodes[n].cpus) for n in nodes}
        mem_free = {n: float(cluster.nodes[n].mem_gb) for n in nodes}
        keep: list[_Job] = []
        change: list[_Job] = []
        for j in jobs.values():
            if not j.nodes:
                continue
            cur = j.status.allocation
            same = cur is not None and {n: r.gpus for n, r in cur.placement if r.gpus} == j.nodes
            if same and not (j.pinned and cur is not None and cur.plan != j.spec.plan):
                keep.append(j)
            else:
                change.append(j)
        for j in keep:
            alloc = j.status.allocation
            assert alloc is not None
            for n, r in alloc.placement:
                cpu_free[n] -= r.cpus
                mem_free[n] -= r.mem_gb
            desired[j.id] = alloc
        change.sort(key=lambda j: (not j.protected, -self._gain(j)[0] if self.variant.order == "slope" else 0, j.order))
        for j in change:
            alloc = self._allocation(j, cpu_free, mem_free)
            if alloc is None:
                reasons[j.id] = "no plan fits the GPUs, CPUs and host memory found"
                continue
            for n, r in alloc.placement:
                cpu_free[n] -= r.cpus
                mem_free[n] -= r.mem_gb
            desired[j.id] = alloc

    def _choose_plan(self, j: _Job) -> tuple[Choice | None, dict[int, int]]:
        """Best plan on the found GPUs; drop GPUs that the best plan cannot use."""
        place = dict(j.nodes)
        spec = j.spec
        kn = self.knowledge
        if kn.knowledge(spec.model) is None:
            return None, place

        def best(p: dict[int, int]) -> Choice | None:
            g = sum(p.values())
            if j.protected:
                chosen = None if j.id in self._pinned else self._min_res.get(j.id, (0, None))[1]
                if chosen is not None and chosen.plan.gpus == g:
                    return chosen
                if spec.plan is not None:
                    return kn.best(spec.model, list(p.values()), self._cpus(spec, g), fixed_space(spec.plan))
            return kn.best(spec.model, list(p.values()), self._cpus(spec, g), j.space)

        choice = best(place)
        if j.protected or not self.variant.elastic:
            return choice, place
        while sum(place.values()) - j.unit >= max(j.g_min, 1):
            trials = []
            for n in sorted(place, key=lambda n: (place[n], n)):
                p = dict(place)
                p[n] -= j.unit
                if not p[n]:
                    del p[n]
                c = best(p)
                if c is not None:
                    trials.append((c.throughput, -len(p), -n, p, c))
            if not trials:
                break
            thr, _, _, p, c = max(trials, key=lambda t: t[:3])
            if choice is not None and thr < choice.throughput * (1 - 1e-6):
                break
            place, choice = p, c
        return choice, place

    def _allocation(self, j: _Job, cpu_free: dict[int, float], mem_free: dict[int, float]) -> Allocation | None:
        choice, place = self._choose_plan(j)
        spec = j.spec
        if choice is None:
            if self.knowledge.knowledge(spec.model) is not None:
                return None
            plan = spec.plan if spec.plan is not None and spec.plan.gpus == sum(place.values()) else None
            mem_total = spec.mem_gb
        else:
            plan = choice.plan
            mem_total = host_memory_gb(get_arch(spec.model), plan)
            if j.protected:
                mem_total = max(mem_total, spec.mem_gb)
        g = sum(place.values())
        cpus_total = self._cpu_amount(j, plan, g)
        shares = []
        for n in sorted(place):
            frac = place[n] / g
            cpus = cpus_total * frac
            mem = mem_total * frac
            offload = plan is not None and plan.zero is ZeroMode.OFFLOAD
            if self.variant.cpu_mode == "elastic" and offload and not j.protected:
                # Offload jobs also get spare CPUs of their nodes (CPU-sensitive optimizer step)
                cpus = max(cpus, min(cpu_free[n], 2 * cpus))
            if cpus > cpu_free[n] + 1e-9 or mem > mem_free[n] + 1e-9:
                return None
            shares.append((n, Resources(place[n], cpus, mem)))
        return Allocation(tuple(shares), plan)

    def _cpu_amount(self, j: _Job, plan: object, g: int) -> float:
        mode = self.variant.cpu_mode
        spec = j.spec
        if mode == "tune" and not (plan is not None and getattr(plan, "zero", None) is ZeroMode.OFFLOAD):
            # Synergy-Tune: jobs insensitive to CPUs get a small share, freeing CPUs for others
            return min(self._cpus(spec, g), 2.0 * g)
        return self._cpus(spec, g)
