"""``sia``: heterogeneity-aware, goodput-optimised scheduling, one integer program per round.

Sia (Jayaram Subramanya et al., "Sia: Heterogeneity-aware, goodput-optimized ML-cluster
scheduling", SOSP 2023), as its artifact's simulator runs it (siasosp23/artifacts,
``sia-simulator/sia.py``, ``SiaPolicy.optimize_mip`` and ``__solve_mip_rescaled``; defaults
in ``sia-simulator/simulator_config.py``). Every round (``round``, 60 s):

* **configurations** per GPU type (§3; ``CONFIGS_4GPU``/``CONFIGS_8GPU``): 1, 2, 4, ...
  GPUs up to one node, then whole nodes (2 x, 3 x, ... GPUs per node);
* **goodput** of every job in every configuration (§3): Pollux jobs from the job's own
  throughput model on each GPU type it has run on, fitted on the step times of what it
  ran there (:mod:`shapeshift.perf.pollux.online`; ``job.py`` ``Job.update_params``),
  with the type's per-GPU batch limit and the job's reported gradient noise, at the best
  batch up to its submitted one (``Job.get_speedup_fn``, ``goodput_batch``), a candidate
  counting when only its per-GPU batch is within limits (``goodput.py``
  ``GoodputFunction.optimize``; ``batch_overshoot``); on a type
  it has not run on, the model of the first type (cluster order) it has run on at the
  same GPU count, times the ratio of the two types' 1-GPU throughputs
  (``_compute_goodputs_v2`` with ``--project_throughputs``); before its first
  run, its 1-GPU configuration on every type, each worth 1 (the artifact has no model
  yet); ``goodput_model=offline`` (ours) uses one model per application and type fitted
  on the type's whole profile (``placements-<type>.csv``) instead;
  plan-aware (Rubick) jobs from the performance model
  restricted to data-parallel scaling of their requested plan: their global batch is
  fixed, so statistical efficiency is 1 and goodput is throughput; any other job is
  rigid (its requested GPU count only, goodput = that count, ``_get_rigid_goodputs``);
* **limits**: an elastic job gets at most twice the most replicas it has run on, on any
  type (``explore``; the artifact's ``max_profiled_replicas`` with ``--share_max_replicas``;
  with ``goodput_model=offline``, twice the most it was given), at most ``max_replicas``
  (64) and ``max_batch / min_local`` (``get_sia_multi_job_info``); a job run at a
  fixed batch its request (``pin_fixed_batch``);
* **normalised goodput** (§3): divided by the job's smallest goodput over its
  configurations (1 GPU), values at most 1e-4 raised to 1e-4 (``ZERO_ALLOC_GAIN``);
* **restart factor** (§3): for a job holding GPUs, every configuration but its current
  one is multiplied by ``max(age - restarts x penalty, 0) / (age + penalty)``, 1 while
  ``age < penalty``; a job without GPUs (waiting, or preempted) is not scaled;
  the penalty per application as measured in the artifact (``get_restart_penalty``:
  cifar10 30 s, imagenet 250, bert 120, deepspeech2 25, yolov3 45, other Pollux
  applications 30), for jobs of other sources ``restore_penalty``;
* **objective** (§3): minimise ``sum x_jc round(g_jc^p, 2)`` (capped at 3000) plus
  ``lambda_n`` for every job left without GPUs, with ``p = -0.5`` and ``lambda_n = 1.1``;
  one configuration per job, GPUs of each type within the type's total; a job in the
  middle of a checkpoint-restore keeps its configuration (``preserve_ckpt_allocs``);
* **batch** (``job.py``, ``Job.update_local_bsz``): a Pollux job runs at the best batch
  for its own model on its GPUs, re-chosen after every epoch it completes, not only
  each round (``Job.step``; ``batch_retune``, :mod:`.epochs`); on typed profiles each
  GPU's batch stays within what its placement measured (``get_max_local_bsz``;
  ``batch_cap``), the type's limit bounding only the goodputs above; NCF's too, which
  the ``pollux`` reader fixes as the Pollux simulator does (``cluster.py``,
  ``Cluster.__init__`` tunes every job under Sia; ``fixed_batch``).

Solved as the artifact solves it, by CBC on the artifact's own layout of the program, so
that equal optima are decided as there (``solver``, :mod:`.sia_mip`; needs cylp); with
``solver=highs``, or without cylp, by HiGHS, and on one GPU type by the exact knapsack of
``pollux`` taking the optimum with the most GPUs. Placement as the artifact's (``alloc_to_placement_fast``,
``smart_placement`` off; :mod:`.sia_placement`): every round anew, per type widest job
first from a forward cursor over the nodes, so a job may be split across nodes or moved,
restarting only when its GPUs per node change (``Job.reallocate``); ``placement=keep``
(ours) keeps a job whose GPU count did not change where it is and packs the others on
the fewest nodes (:func:`shapeshift.policies.goodput.common.keep_or_pack`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from shapeshift.engine.contract import PolicyTraits
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, JobSpec, Resources, Schedule
from shapeshift.perf.arch import get_arch
from shapeshift.perf.ground_truth import host_memory_gb
from shapeshift.perf.plans import packed_placement
from shapeshift.perf.pollux.knowledge import GoodputKnowledge, JobGoodput
from shapeshift.perf.pollux.online import OnlineFits
from shapeshift.perf.pollux.profiles import NAMESPACE, app_name
from shapeshift.policies.framework.base import ROUND, PolicyError
from shapeshift.policies.framework.registry import register
from shapeshift.policies.goodput.common import decide_partitions, keep_or_pack
from shapeshift.policies.goodput.epochs import (
    EpochRetuner,
    Shape,
    decide_between_epochs,
    own_batch,
    round_batch,
    tuned,
)
from shapeshift.policies.goodput.sia_mip import (
    NO_CBC,
    cbc_available,
    configurations,
    solve_artifact,
    solve_highs,
    solve_knapsack,
)
from shapeshift.policies.goodput.sia_params import (
    ARTIFACT_DEFAULT_PENALTY,
    CLIP,
    RESTART_PENALTIES,
    ZERO_ALLOC_GAIN,
    SiaParams,
)
from shapeshift.policies.goodput.sia_placement import cursor_place, same_shape_move
from shapeshift.policies.planaware.core import DEFAULT_CPUS_PER_GPU
from shapeshift.policies.planaware.knowledge import Knowledge, dp_space, fixed_space


@dataclass
class _Option:
    gpu_type: str
    nodes: int
    gpus: int
    goodput: float


@dataclass
class _Job:
    job_id: str
    spec: JobSpec
    kind: str  # "pollux", "plan" or "rigid"
    options: list[_Option] = field(default_factory=list)
    current: int | None = None  # index of the current configuration in options
    pinned: bool = False


class SiaPolicy:
    name = "sia"
    triggers = frozenset({ROUND})
    #: Sia's configurations are whole GPUs of one type: a job asking for a fraction of
    #: one gets a whole GPU (ours; Sia has no fractions).
    traits = PolicyTraits(whole_gpus=True)

    def __init__(self, params: SiaParams, knowledge: Knowledge) -> None:
        self.params = params
        self.default_round = params.round
        self.knowledge = knowledge
        self.goodput = GoodputKnowledge(params.profiles)
        self.online = OnlineFits(self.goodput.root) if params.goodput_model == "online" and self.goodput.root else None
        self._seen: dict[str, int] = {}
        self.retuner = EpochRetuner(self.goodput, self.online, self._batch)
        self._ran: dict[str, list[str]] = {}  # GPU types each job has run on, in order
        self._plan_cache: dict[tuple[object, ...], float] = {}
        # Moves to other nodes with the same GPUs per node, per job: no restart in the
        # artifact's count (``Job.reallocate`` compares only that tuple).
        self._same_shape_moves: dict[str, int] = {}
        self._cbc: bool | None = None  # whether CBC is reachable, once asked

    # ------------------------------------------------------------ goodput
    def _cpus(self, spec: JobSpec, g: int) -> float:
        per = spec.num_cpus / spec.num_gpus if spec.num_cpus > 0 and spec.num_gpus else DEFAULT_CPUS_PER_GPU
        return per * g

    def _job(self, view: ClusterView, job_id: str, types: dict[str, tuple[int, int]]) -> _Job:
        status = view.job(job_id)
        spec = self._as_run(status.spec)
        alloc = status.allocation
        batch_now, progress = (alloc.batch_size if alloc else None), status.progress_at(view.now)
        current_type = view.cluster.nodes[alloc.placement[0][0]].gpu_type if alloc is not None else None
        ran = self._ran.setdefault(job_id, [])
        if current_type is not None and current_type not in ran:
            ran.append(current_type)
        tables = {t: self._table(spec, batch_now, progress, t) for t in types}
        table = tables[current_type] if current_type in tables else next(iter(tables.values()))
        plan_model = spec.plan is not None and self.knowledge.knowledge(spec.model) is not None
        kind = "pollux" if table.params is not None else "plan" if plan_model else "rigid"
        job = _Job(job_id, spec, kind)
        seen = self._seen.get(job_id, 0)
        if kind == "pollux" and self.online is not None:
            if alloc is not None and current_type is not None and status.stall_until < view.now:
                self.online.observe(spec, alloc, current_type)  # it has run there since its pause
            ran[:] = self.online.types(job_id)
            # The job's own model on each type it ran on (unused elsewhere but for its current one).
            fits = {t: self.online.params(job_id, t) for t in tables}
            tables = {t: table if fits[t] is None else replace(table, params=fits[t]) for t, table in tables.items()}
            seen = self.online.max_replicas(job_id)
        cap = self.params.max_replicas
        if self.params.explore and kind != "rigid":
            # A plan-aware job is known to run on its request (its plan's smallest DP
            # scale unit may already need several GPUs): explore from there.
            floor = spec.num_gpus if kind == "plan" else 1
            cap = min(cap, max(2 * seen, floor))
        if kind == "pollux" and spec.batch is not None:
            scalable = spec.batch.adaptive or not self.params.pin_fixed_batch
            cap = min(cap, spec.batch.max_size // spec.batch.min_local if scalable else spec.num_gpus)
        # The artifact's goodput for a type a job has not run on: the model of the first
        # type (in cluster order) it has run on, at the same replica count on that type's
        # nodes, times the ratio of the two types' 1-GPU throughputs (``_compute_goodputs_v2``).
        source = next((t for t in types if t in ran), None)
        for gpu_type, (gpn, count) in types.items():
            if not spec.allows(gpu_type):  # a type constraint: no configuration there
                continue
            sizes = configurations(gpn, count)
            if kind == "rigid":
                sizes = [(math.ceil(spec.num_gpus / gpn), spec.num_gpus)] if spec.num_gpus <= gpn * count else []
            sizes = [(k, r) for k, r in sizes if kind == "rigid" or r <= cap]
            if kind == "plan" and spec.num_gpus <= gpn * count and all(r != spec.num_gpus for _, r in sizes):
                sizes.append((math.ceil(spec.num_gpus / gpn), spec.num_gpus))  # its request always counts
            if kind == "pollux" and sizes:  # one vectorised evaluation per GPU type
                if self.params.explore and source is None:
                    # No model yet on any type: its 1-GPU configuration on every type, all
                    # equal (the artifact's ``nnz_speedups`` before a job's first run).
                    job.options += [_Option(gpu_type, k, r, 1.0) for k, r in sizes if r == 1]
                    continue
                if source is None or gpu_type in ran:
                    good = tables[gpu_type].best([k for k, _ in sizes], [r for _, r in sizes])[0]
                else:
                    src_gpn = types[source][0]
                    good = tables[source].best([math.ceil(r / src_gpn) for _, r in sizes], [r for _, r in sizes])[0]
                    good = good * self.goodput.type_ratio(spec, gpu_type, source)
                job.options += [_Option(gpu_type, k, r, float(v)) for (k, r), v in zip(sizes, good, strict=True)]
                continue
            for k, r in sizes:
                job.options.append(_Option(gpu_type, k, r, self._goodput(spec, kind, tables[gpu_type], k, r, gpn)))
        if alloc is not None:  # the previous configuration is always an option
            assert current_type is not None
            k = len(alloc.placement)
            found = [i for i, o in enumerate(job.options) if (o.gpu_type, o.gpus) == (current_type, alloc.gpus)]
            if not found:
                gpn = types[current_type][0]
                good = self._goodput(spec, kind, tables[current_type], k, alloc.gpus, gpn)
                job.options.append(_Option(current_type, k, alloc.gpus, good))
                found = [len(job.options) - 1]
            job.current = found[0]
            job.pinned = status.stall_until > view.now  # checkpoint-restore under way
        return job

    def _table(self, spec: JobSpec, batch_now: int | None, progress: float, gpu_type: str) -> JobGoodput:
        """``spec``'s table on ``gpu_type``, batches up to its submitted one (``goodput_batch``)."""
        table = self.goodput.job(spec, batch_now, progress, gpu_type)
        table = replace(table, cap_total=not self.params.batch_overshoot)
        if self.params.goodput_batch == "submitted" and spec.batch is not None and table.adaptive:
            top = max(min(table.limits.max_size, spec.batch.size), table.limits.init)
            table = replace(table, limits=replace(table.limits, max_size=top))
        return table

    def _goodput(self, spec: JobSpec, kind: str, table, k: int, r: int, gpn: int) -> float:  # type: ignore[no-untyped-def]
        if kind == "pollux":
            return float(table.best(k, r)[0][0])
        if kind == "plan":
            # Throughput per packed shape changes only when the model is refit: cached.
            model = self.knowledge.knowledge(spec.model)
            version = model.version if model is not None else 0
            key = (spec.job_id, r, gpn, version)
            if key not in self._plan_cache:
                self._plan_cache[key] = self._plan_goodput(spec, r, gpn)
            return self._plan_cache[key]
        return float(r)

    def _plan_goodput(self, spec: JobSpec, r: int, gpn: int) -> float:
        """DP scaling of the requested plan (its own plan at its own size) on a packed shape."""
        place, cpus = packed_placement(r, gpn), self._cpus(spec, r)
        c = self.knowledge.best(spec.model, place, cpus, dp_space(spec.plan))
        if c is None and r == spec.num_gpus and spec.plan is not None:
            c = self.knowledge.best(spec.model, place, cpus, fixed_space(spec.plan))
        return c.throughput if c is not None else 0.0

    def _factor(self, view: ClusterView, spec: JobSpec) -> float:
        status = view.job(spec.job_id)
        # The artifact's default for its other applications (NCF) is 30 s; jobs of other
        # sources (Rubick's) pay the run's restore penalty.
        other = ARTIFACT_DEFAULT_PENALTY if spec.model.startswith(NAMESPACE) else self.params.restore_penalty
        penalty = RESTART_PENALTIES.get(app_name(spec.model), other)
        age = view.now - spec.submit_time
        if age < penalty:
            return 1.0
        restarts = status.reconfigurations + status.preemptions - self._same_shape_moves.get(spec.job_id, 0)
        return max(age - restarts * penalty, 0.0) / (age + penalty)

    def costs(
        self,
        view: ClusterView,
        job: _Job,
        good: np.ndarray | None = None,
        current: int | None = None,
        dtype: type[np.floating] = np.float64,
    ) -> np.ndarray:
        """Per option (or per entry of ``good``, the job's goodputs with ``current`` its
        configuration's index there): ``round(normalised goodput^p, 2)`` (restart factor
        applied) minus ``lambda_n``, the rounding done in ``dtype`` (the artifact's matrix is
        float32, and CBC's choice among equal optima depends on those last bits)."""
        if good is None:
            good, current = np.array([o.goodput for o in job.options], dtype=float), job.current
        positive = good[good > 0]
        norm = (good / positive.min() if positive.size else np.zeros_like(good)).astype(dtype)
        norm = np.maximum(norm, dtype(ZERO_ALLOC_GAIN))
        # Only a job holding GPUs pays the restart factor, on every configuration but its
        # own (``__solve_mip_rescaled`` scales rows with a previous allocation only): a
        # waiting job's 1-GPU option keeps cost 1 - lambda_n < 0 however long it waited.
        factor = self._factor(view, job.spec) if current is not None else 1.0
        scaled = np.where(np.arange(len(good)) == current, norm, norm * dtype(factor))
        with np.errstate(divide="ignore"):
            powered = np.minimum(np.round(scaled ** dtype(self.params.p), 2), dtype(CLIP))
        return powered.astype(float) - self.params.lambda_n

    # ------------------------------------------------------------ decide
    def decide(self, view: ClusterView) -> Schedule:
        self.knowledge.observe(view)
        if self.params.batch_retune == "round" or self.goodput.root is None:
            return decide_partitions(view, self._decide_partition, self._seen)
        return decide_between_epochs(
            view, self.retuner, lambda v: decide_partitions(v, self._decide_partition, self._seen)
        )

    def _decide_partition(
        self, view: ClusterView, part: str, desired: dict[str, Allocation], reasons: dict[str, str]
    ) -> None:
        nodes = [int(n) for n in view.partitions[part]]
        by_type: dict[str, list[int]] = {}
        for n in nodes:
            by_type.setdefault(view.cluster.nodes[n].gpu_type, []).append(n)
        types = {t: (max(view.cluster.nodes[n].gpus for n in ns), len(ns)) for t, ns in sorted(by_type.items())}
        ids = sorted([*view.running(part), *view.pending(part)], key=lambda j: (view.job(j).spec.submit_time, j))
        if not ids:
            return
        jobs = [self._job(view, j, types) for j in ids]
        chosen = self._solve(view, jobs, by_type, types)
        for job in jobs:
            desired.pop(job.job_id, None)
        for gpu_type, members in sorted(by_type.items()):
            self._place(view, jobs, chosen, gpu_type, members, desired, reasons)

    def _solve(
        self, view: ClusterView, jobs: list[_Job], by_type: dict[str, list[int]], types: dict[str, tuple[int, int]]
    ) -> dict[str, _Option]:
        if self._use_cbc():
            return self._solve_cbc(view, jobs, by_type, types)
        if len(by_type) == 1:
            (members,) = by_type.values()
            return self._solve_one_type(view, jobs, sum(view.cluster.nodes[n].gpus for n in members))
        return self._solve_milp(view, jobs, by_type)

    def _use_cbc(self) -> bool:
        if self._cbc is None:
            self._cbc = self.params.solver != "highs" and cbc_available()
            if not self._cbc and self.params.solver == "cbc":
                raise PolicyError("sia: solver=cbc needs cylp (pip install 'shapeshift[cbc]')")
            if not self._cbc and self.params.solver == "auto":
                warnings.warn(NO_CBC, stacklevel=2)
        return self._cbc

    def _solve_cbc(
        self, view: ClusterView, jobs: list[_Job], by_type: dict[str, list[int]], types: dict[str, tuple[int, int]]
    ) -> dict[str, _Option]:
        caps = {t: float(sum(view.cluster.nodes[n].gpus for n in by_type[t])) for t in types}
        cost = lambda job, good, current: self.costs(view, job, good, current, np.float32)  # noqa: E731
        return solve_artifact(jobs, types, caps, cost, self.params.time_limit)

    def _solve_one_type(self, view: ClusterView, jobs: list[_Job], total: int) -> dict[str, _Option]:
        return solve_knapsack(jobs, [self.costs(view, job) for job in jobs], total)

    def _solve_milp(self, view: ClusterView, jobs: list[_Job], by_type: dict[str, list[int]]) -> dict[str, _Option]:
        caps = {t: float(sum(view.cluster.nodes[m].gpus for m in members)) for t, members in by_type.items()}
        return solve_highs(jobs, [self.costs(view, job) for job in jobs], caps, self.params.time_limit)

    # ------------------------------------------------------------ placement
    def _place(
        self,
        view: ClusterView,
        jobs: list[_Job],
        chosen: dict[str, _Option],
        gpu_type: str,
        members: list[int],
        desired: dict[str, Allocation],
        reasons: dict[str, str],
    ) -> None:
        mine = [j for j in jobs if j.job_id in chosen and chosen[j.job_id].gpu_type == gpu_type]
        for job in jobs:
            if job.job_id not in chosen:
                reasons[job.job_id] = "not chosen by this round's goodput optimisation"
        wanted = {j.job_id: (chosen[j.job_id].gpus, view.job(j.job_id).allocation) for j in mine}
        exact = frozenset(j.job_id for j in mine if j.kind != "pollux")
        caps = {n: view.cluster.nodes[n].gpus for n in members}
        if self.params.placement == "artifact":
            placed = cursor_place({j: g for j, (g, _) in wanted.items()}, [j.job_id for j in mine], caps)
        else:
            placed = keep_or_pack(wanted, [j.job_id for j in mine], caps, exact)
        free_c = {n: float(view.cluster.nodes[n].cpus) for n in members}
        free_m = {n: float(view.cluster.nodes[n].mem_gb) for n in members}
        for job in mine:
            place = placed.get(job.job_id)
            if not place:
                reasons[job.job_id] = f"no placement for {chosen[job.job_id].gpus} GPUs"
                continue
            alloc = self._allocation(view, job, place, free_c, free_m)
            if alloc is None:
                reasons[job.job_id] = "no plan, CPUs or host memory for its GPUs on the chosen nodes"
                continue
            current = view.job(job.job_id).allocation
            if current is not None and job.kind == "pollux" and same_shape_move(view, current, alloc):
                self._same_shape_moves[job.job_id] = self._same_shape_moves.get(job.job_id, 0) + 1
            desired[job.job_id] = current if alloc == current else alloc

    def _allocation(
        self, view: ClusterView, job: _Job, place: dict[int, int], free_c: dict[int, float], free_m: dict[int, float]
    ) -> Allocation | None:
        spec = job.spec
        g = sum(place.values())
        shape = [place[n] for n in sorted(place)]
        plan = spec.plan if spec.plan is not None and spec.plan.gpus == g else None
        batch = None
        if job.kind == "plan":
            space = dp_space(spec.plan) if g != spec.num_gpus else fixed_space(spec.plan)
            c = self.knowledge.best(spec.model, shape, self._cpus(spec, g), space)
            if c is None:
                return None
            plan = c.plan
        elif job.kind == "pollux" and spec.batch is not None and spec.batch.adaptive:
            gpu_type = view.cluster.nodes[next(iter(place))].gpu_type
            batch = round_batch(view, view.job(spec.job_id), gpu_type, place, self._batch)
        if job.kind == "plan" and plan is not None:
            cpus, mem = self._cpus(spec, g), host_memory_gb(get_arch(spec.model), plan)
        else:
            per = g / spec.num_gpus if spec.num_gpus else 0.0
            cpus, mem = spec.num_cpus * per, spec.mem_gb * per
        shares = []
        for n in sorted(place):
            r = Resources(place[n], cpus * place[n] / g, mem * place[n] / g)
            if r.cpus > free_c[n] + 1e-9 or r.mem_gb > free_m[n] + 1e-9:
                return None
            shares.append((n, r))
        for n, r in shares:
            free_c[n] -= r.cpus
            free_m[n] -= r.mem_gb
        return Allocation(tuple(shares), plan, batch_size=batch)

    def _batch(self, spec: JobSpec, batch_now: int | None, progress: float, gpu_type: str, shape: Shape) -> int:
        by_placement = self.params.batch_cap == "placement"
        cap = not self.params.batch_overshoot
        spec = self._as_run(spec)
        return own_batch(self.goodput, self.online, spec, batch_now, progress, gpu_type, shape, by_placement, cap)

    def _as_run(self, spec: JobSpec) -> JobSpec:
        return spec if self.params.fixed_batch == "keep" else tuned(spec)


@register(
    "sia",
    "Sia: goodput per configuration (1, 2, 4.. GPUs, then whole nodes) per GPU type, an integer program per round.",
    SiaParams,
    speed_models=("pollux", "pollux-calibrated"),
    speed_note="chooses batch sizes for goodput (throughput x statistical efficiency), and only the pollux "
    "profiles model statistical efficiency: here a batch size changes no job's progress",
)
def make_sia(params: SiaParams) -> SiaPolicy:
    return SiaPolicy(params, params.knowledge())
