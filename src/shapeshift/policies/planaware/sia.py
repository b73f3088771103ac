"""``sia``: goodput-optimised elastic GPU allocation that scales only data parallelism.

Sia (Jayaram Subramanya et al., "Sia: Heterogeneity-aware, goodput-optimized ML-cluster
scheduling", SOSP 2023), as the elastic baseline of the Rubick paper. Every round (and on
arrivals and completions) it solves one integer program over the GPU count of every
active job:

* candidates per job: GPU counts at which its requested plan scales data parallelism with
  TP, PP, ZeRO mode and checkpointing fixed (the global batch must split over DP), up to
  ``max_scale`` times the request, each adding at least 5% throughput over the previous
  candidate (keeps the program small); a job that cannot scale keeps its request only;
* utility of a candidate: the job's predicted throughput there, normalised by its
  throughput at its smallest candidate (Sia's normalised goodput; the global batch is
  fixed, so statistical efficiency is 1), discounted for a running job that would change
  by ``remaining / (remaining + restore_penalty)`` (the re-allocation penalty);
* constraints: at most one candidate per job, total GPUs within the partition.

Solved with ``scipy.optimize.milp`` (HiGHS). Its throughput model knows DP only: the
performance model restricted to that plan space (fitted on the 7-row sample, refit
online). Placement is packed (fewest nodes, best fit), running jobs whose count does not
change stay where they are. CPUs follow the request pro rata; host memory is what the
plan needs.
"""

from __future__ import annotations

import itertools

import numpy as np
from pydantic import Field

from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, JobSpec, Resources, Schedule
from shapeshift.perf.arch import get_arch
from shapeshift.perf.ground_truth import host_memory_gb
from shapeshift.perf.plans import packed_placement
from shapeshift.policies.base import ARRIVAL, COMPLETION, ROUND
from shapeshift.policies.planaware.common import PlanAwareParams
from shapeshift.policies.planaware.core import DEFAULT_CPUS_PER_GPU
from shapeshift.policies.planaware.knowledge import Knowledge, dp_space, fixed_space
from shapeshift.policies.registry import register
from shapeshift.wording import count


class SiaParams(PlanAwareParams):
    round: float = Field(60.0, gt=0)
    max_scale: float = Field(4.0, ge=1.0)
    time_limit: float = Field(2.0, gt=0)


class SiaPolicy:
    triggers = frozenset({ARRIVAL, COMPLETION, ROUND})

    def __init__(self, params: SiaParams, knowledge: Knowledge) -> None:
        self.name = "sia"
        self.params = params
        self.default_round = params.round
        self.knowledge = knowledge
        self._cands: dict[tuple[object, ...], tuple[list[int], np.ndarray]] = {}

    # ------------------------------------------------------------ candidates
    def _cpus(self, spec: JobSpec, g: int) -> float:
        per = spec.num_cpus / spec.num_gpus if spec.num_cpus > 0 and spec.num_gpus else DEFAULT_CPUS_PER_GPU
        return per * g

    def _space(self, spec: JobSpec):
        return dp_space(spec.plan) if spec.plan is not None else None

    def candidates(self, spec: JobSpec, total: int, gpn: int) -> tuple[list[int], np.ndarray]:
        """GPU counts the job may get and its predicted throughput at each (packed)."""
        kn = self.knowledge
        mk = kn.knowledge(spec.model)
        if mk is None or spec.plan is None:
            return [spec.num_gpus], np.array([1.0])
        key = (spec.job_id, total, gpn, getattr(mk, "version", 0))
        hit = self._cands.get(key)
        if hit is None:
            hit = self._cands[key] = self._candidates(spec, total, gpn)
        return hit

    def _candidates(self, spec: JobSpec, total: int, gpn: int) -> tuple[list[int], np.ndarray]:
        kn = self.knowledge
        counts: list[int] = []
        thr: list[float] = []
        space = self._space(spec)
        limit = min(total, max(spec.num_gpus, int(self.params.max_scale * spec.num_gpus)))
        for g in range(1, limit + 1):
            c = kn.best(spec.model, packed_placement(g, gpn), self._cpus(spec, g), space)
            # keep counts that add >= 5% throughput (and the request): a small, useful program
            if c is not None and (not thr or c.throughput > thr[-1] * 1.05 or g == spec.num_gpus):
                counts.append(g)
                thr.append(c.throughput)
        if spec.num_gpus not in counts:  # cannot run as DP: requested plan, scaling disabled
            c = kn.best(
                spec.model,
                packed_placement(spec.num_gpus, gpn),
                self._cpus(spec, spec.num_gpus),
                fixed_space(spec.plan),
            )
            return [spec.num_gpus], np.array([c.throughput if c else 1.0])
        return counts, np.array(thr)

    # ------------------------------------------------------------ decide
    def decide(self, view: ClusterView) -> Schedule:
        self.knowledge.observe(view)
        desired = dict(view.allocations)
        reasons: dict[str, str] = {}
        for part in sorted(view.dirty_partitions):
            if part in view.partitions:
                self._decide_partition(view, part, desired, reasons)
        return Schedule.replace(view.allocations, desired, reasons)

    def _decide_partition(
        self, view: ClusterView, part: str, desired: dict[str, Allocation], reasons: dict[str, str]
    ) -> None:
        # Imported here: scipy.optimize costs ~0.5 s at start-up and only this step needs it.
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_array

        nodes = [int(n) for n in view.partitions[part]]
        cluster = view.cluster
        gpn = max(cluster.nodes[n].gpus for n in nodes)
        total = sum(cluster.nodes[n].gpus for n in nodes)
        running = list(view.running(part))
        # at most one job per GPU can run: the program sees the running jobs and the first
        # ``2 x GPUs`` waiting ones (queue order), which keeps it small on long queues
        waiting = list(itertools.islice(view.pending(part), 2 * total))
        ids = running + waiting
        if not ids:
            return
        var_job: list[int] = []
        var_g: list[int] = []
        util: list[float] = []
        for i, jid in enumerate(ids):
            status = view.job(jid)
            counts, thr = self.candidates(status.spec, total, gpn)
            cur = status.allocation.gpus if status.allocation is not None else 0
            remaining_t = self._remaining_seconds(view, jid, thr[counts.index(cur)] if cur in counts else thr[0])
            for g, t in zip(counts, thr, strict=True):
                # tiny tie-break towards earlier jobs: deterministic, first come first served
                u = float(t / thr[0]) + 1e-4 * (1.0 - i / len(ids))
                if cur and g != cur:
                    u *= remaining_t / (remaining_t + self.params.restore_penalty)
                var_job.append(i)
                var_g.append(g)
                util.append(u)
        n_var = len(util)
        a_job = coo_array((np.ones(n_var), (var_job, np.arange(n_var))), shape=(len(ids), n_var)).tocsr()
        a_gpu = np.array([var_g], dtype=float)
        cons = [LinearConstraint(a_job, 0, 1), LinearConstraint(a_gpu, 0, total)]
        res = milp(
            -np.array(util),
            constraints=cons,
            integrality=np.ones(n_var),
            bounds=Bounds(0, 1),
            options={"time_limit": self.params.time_limit, "mip_rel_gap": 1e-3},
        )
        chosen: dict[str, int] = {}
        if res.x is not None:
            for k in np.flatnonzero(res.x > 0.5):
                chosen[ids[var_job[k]]] = var_g[k]
        self._place(view, ids, chosen, nodes, gpn, desired, reasons)

    def _remaining_seconds(self, view: ClusterView, jid: str, thr: float) -> float:
        spec = view.job(jid).spec
        try:
            batch = get_arch(spec.model).global_batch
        except KeyError:
            return view.remaining(jid)
        return view.remaining(jid) * batch / max(thr, 1e-9)

    def _place(
        self,
        view: ClusterView,
        ids: list[str],
        chosen: dict[str, int],
        nodes: list[int],
        gpn: int,
        desired: dict[str, Allocation],
        reasons: dict[str, str],
    ) -> None:
        cluster = view.cluster
        free_g = {n: cluster.nodes[n].gpus for n in nodes}
        free_c = {n: float(cluster.nodes[n].cpus) for n in nodes}
        free_m = {n: float(cluster.nodes[n].mem_gb) for n in nodes}
        for jid in ids:
            desired.pop(jid, None)
        todo: list[str] = []
        for jid in ids:  # running jobs keeping their count stay in place
            alloc = view.job(jid).allocation
            if jid in chosen and alloc is not None and alloc.gpus == chosen[jid]:
                desired[jid] = alloc
                for n, r in alloc.placement:
                    free_g[n] -= r.gpus
                    free_c[n] -= r.cpus
                    free_m[n] -= r.mem_gb
            elif jid in chosen:
                todo.append(jid)
            else:
                reasons[jid] = "not chosen by the goodput optimisation this round"
        todo.sort(key=lambda j: (-chosen[j], ids.index(j)))
        for jid in todo:
            spec = view.job(jid).spec
            g = chosen[jid]
            unit = spec.plan.tp if spec.plan is not None else 1
            place = self._packed(g, unit, nodes, free_g, gpn)
            if place is None:
                reasons[jid] = f"no placement for {count(g, 'GPU')}"
                continue
            shape = [place[n] for n in sorted(place)]
            plan = None
            if spec.plan is not None and self.knowledge.knowledge(spec.model) is not None:
                space = self._space(spec) if g != spec.num_gpus else fixed_space(spec.plan)
                c = self.knowledge.best(spec.model, shape, self._cpus(spec, g), space)
                if c is None:
                    reasons[jid] = f"no data-parallel plan for {count(g, 'GPU')} on this placement"
                    continue
                plan = c.plan
            elif spec.plan is not None and spec.plan.gpus == g:
                plan = spec.plan
            mem_total = host_memory_gb(get_arch(spec.model), plan) if plan is not None and spec.model else spec.mem_gb
            cpus_total = self._cpus(spec, g)
            shares = []
            ok = True
            for n in sorted(place):
                frac = place[n] / g
                r = Resources(place[n], cpus_total * frac, mem_total * frac)
                if r.cpus > free_c[n] + 1e-9 or r.mem_gb > free_m[n] + 1e-9:
                    ok = False
                    break
                shares.append((n, r))
            if not ok:
                reasons[jid] = "not enough CPUs or host memory on the chosen nodes"
                continue
            for n, r in shares:
                free_g[n] -= r.gpus
                free_c[n] -= r.cpus
                free_m[n] -= r.mem_gb
            desired[jid] = Allocation(tuple(shares), plan)

    @staticmethod
    def _packed(g: int, unit: int, nodes: list[int], free: dict[int, int], gpn: int) -> dict[int, int] | None:
        """Fewest nodes: best fit on one node, else fullest-free nodes first (units of ``unit``)."""
        if g <= gpn:
            fit = [n for n in nodes if free[n] >= g]
            if fit:
                n = min(fit, key=lambda n: (free[n], n))
                return {n: g}
        place: dict[int, int] = {}
        need = g
        for n in sorted(nodes, key=lambda n: (-free[n], n)):
            take = min(free[n] - free[n] % unit, need)
            if take > 0:
                place[n] = take
                need -= take
            if need == 0:
                return place
        return None


@register("sia", "Goodput-optimised elastic GPU allocation (DP scaling only), an integer program per round.", SiaParams)
def make_sia(params: SiaParams) -> SiaPolicy:
    return SiaPolicy(params, params.knowledge())
