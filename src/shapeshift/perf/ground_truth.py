"""Simulation ground truth for plan-aware jobs: measured iteration times, model fallback.

A simulation of plan-aware scheduling is only as honest as the throughput it charges.
This model answers "how many iterations per second does this job make with this plan on
these GPUs, CPUs and host memory?" from the *measured* tables of the Rubick artifact
(``rubick/traces/<model>/placements.csv``) whenever a row exists for the configuration,
and otherwise from the performance model fitted on *all* rows of that model (the
documented fallback; every use is counted in :attr:`GroundTruthModel.stats`).

Policies never see this object: they get a model fitted on a 7-row sample and refit it
online from the rates they observe (``shapeshift.policies.planaware``).

Rules (each one a choice the data forces; see ``../shared/data/README.md``):

* **Placement** is matched as a multiset of GPUs per node (``(3, 5)`` and ``(5, 3)`` are
  the same measured run; ranks are laid out on the larger node first), so the key is the
  per-node GPU counts sorted in descending order.
* **Pipelining**: the measured PP rows behave as one micro-batch (no pipelining benefit)
  for every trace except ``llama7b_bsz16``; a pipeline plan is therefore charged as one
  micro-batch, in the table lookup and in the fallback alike.
* **CPUs** only matter under ZeRO-Offload (the optimizer step runs on the host). A job's
  CPUs are shared by its training processes, one per GPU, and the measured rows record CPU
  threads *per process* (``cpu_threads``; 4 where absent, the artifact's profiling setting:
  its ``gen_perf_curve`` loops threads up to ``64 // n_gpu``). A job's CPUs are therefore
  divided by its GPUs before they are compared with a row; an Offload row run at other
  threads per process is scaled by the fitted model's ratio ``T(threads) / T(row threads)``
  and counted separately as ``table_cpu_scaled``.
* **Memory**: a configuration without a measured row must fit GPU memory by
  :mod:`shapeshift.perf.memory`; every plan must fit the host memory allocated to the
  job (ZeRO-Offload keeps gradients and optimizer states on the host; the per-GPU base that
  policies allocate, :data:`BASE_HOST_GB_PER_GPU`, is not enforced). An infeasible
  configuration runs at rate 0 (the job would crash with out-of-memory); counted as
  ``infeasible``.
* **Requested resources** of a job, for its promised rate (``target_rate``): its plan on
  the fewest nodes (packed), with its requested CPUs and the host memory its plan needs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from shapeshift.model import Allocation, ExecutionPlan, JobSpec, ZeroMode
from shapeshift.perf.arch import ModelArch, UnknownModelError, get_arch
from shapeshift.perf.fitting import MIN_POINTS, FittedModel, fit
from shapeshift.perf.measurements import PIPELINED_TRACES, Measurement, read_trace_dir
from shapeshift.perf.memory import estimate_memory
from shapeshift.perf.plans import packed_placement
from shapeshift.perf.rubick import Config

#: Host memory (GB) every job needs per GPU besides what its plan keeps on the host
#: (data-loader workers, pinned staging buffers). An assumption, not a measurement; it
#: only makes memory a dimension that a scheduler must allocate for every job.
BASE_HOST_GB_PER_GPU = 8.0

SOURCES = ("table", "table_cpu_scaled", "fallback", "infeasible")

PlanKey = tuple[int, int, int, str, int, bool, int]


def placement_key(placement: Sequence[int]) -> tuple[int, ...]:
    """GPUs per node as a canonical multiset (descending), without empty nodes."""
    return tuple(sorted((int(g) for g in placement if g > 0), reverse=True))


def normalise_plan(model: str, plan: ExecutionPlan) -> ExecutionPlan:
    """Pipeline plans of non-pipelining traces run as one micro-batch (see module doc)."""
    if plan.pp > 1 and plan.micro_batches != 1 and model not in PIPELINED_TRACES:
        return replace(plan, micro_batches=1)
    return plan


def plan_key(plan: ExecutionPlan) -> PlanKey:
    return (plan.dp, plan.tp, plan.pp, plan.zero.value, plan.grad_accum, plan.grad_ckpt, plan.micro_batches)


def plan_host_gb(arch: ModelArch, plan: ExecutionPlan) -> float:
    """Host memory ``plan`` cannot run without (ZeRO-Offload's gradients and optimizer states)."""
    return estimate_memory(arch, plan).host_gb if plan.zero is ZeroMode.OFFLOAD else 0.0


def host_memory_gb(arch: ModelArch, plan: ExecutionPlan) -> float:
    """Host memory plan-aware policies allocate for ``plan``: its own need plus a per-GPU base."""
    return plan_host_gb(arch, plan) + BASE_HOST_GB_PER_GPU * plan.gpus


@dataclass
class GroundTruthStats:
    """How rates were answered: per source, per model, and distinct configurations."""

    calls: Counter[str] = field(default_factory=Counter)
    by_model: dict[str, Counter[str]] = field(default_factory=dict)
    configs: dict[str, set[tuple[object, ...]]] = field(default_factory=dict)

    def record(self, model: str, source: str, key: tuple[object, ...]) -> None:
        self.calls[source] += 1
        self.by_model.setdefault(model, Counter())[source] += 1
        self.configs.setdefault(source, set()).add((model, *key))

    def as_dict(self) -> dict[str, object]:
        return {
            "calls": {s: self.calls.get(s, 0) for s in SOURCES},
            "distinct_configs": {s: len(self.configs.get(s, ())) for s in SOURCES},
            "by_model": {m: {s: c.get(s, 0) for s in SOURCES} for m, c in sorted(self.by_model.items())},
        }


class GroundTruthModel:
    """``ThroughputModel`` for iteration-based jobs: work = iterations, rate = iterations/s."""

    def __init__(
        self,
        tables: Mapping[str, Sequence[Measurement]],
        fits: Mapping[str, FittedModel] | None = None,
        gpus_per_node: int = 8,
        enforce_host_memory: bool = True,
        fit_starts: int = 6,
    ) -> None:
        self.gpus_per_node = gpus_per_node
        self.enforce_host_memory = enforce_host_memory
        self.fit_starts = fit_starts
        self._rows = {m: list(rows) for m, rows in tables.items()}
        self._fits: dict[str, FittedModel] = dict(fits or {})
        self._table: dict[str, dict[tuple[PlanKey, tuple[int, ...]], tuple[float, float]]] = {}
        for model, rows in sorted(self._rows.items()):
            grouped: dict[tuple[PlanKey, tuple[int, ...]], list[Measurement]] = {}
            for r in rows:
                plan = normalise_plan(model, r.plan)
                grouped.setdefault((plan_key(plan), placement_key(r.placement)), []).append(r)
            self._table[model] = {
                k: (float(np.mean([r.iter_time for r in v])), float(v[0].cpus)) for k, v in grouped.items()
            }
        self.stats = GroundTruthStats()
        self._cache: dict[tuple[object, ...], tuple[float, str]] = {}

    @classmethod
    def from_dir(cls, root: str | Path, **kw: object) -> GroundTruthModel:
        return cls(_read_dir(str(Path(root).resolve())), **kw)  # type: ignore[arg-type]

    # ----------------------------------------------------------- model lookup
    def _trace_name(self, model: str) -> str:
        if model in self._rows:
            return model
        try:
            name = get_arch(model).name
        except UnknownModelError:
            raise ValueError(f"no measurements and no architecture for model {model!r}") from None
        return name

    def fitted(self, model: str) -> FittedModel:
        """The fallback: the model fitted on all measured rows of ``model`` (lazily, once)."""
        name = self._trace_name(model)
        if name not in self._fits:
            rows = self._rows.get(name, [])
            if len(rows) < MIN_POINTS:
                raise ValueError(f"model {model!r}: {len(rows)} measured rows, {MIN_POINTS} needed for the fallback")
            self._fits[name] = _fit_all(name, tuple(rows), self.fit_starts)
        return self._fits[name]

    # ------------------------------------------------------------ the answers
    def iteration_time(
        self, model: str, plan: ExecutionPlan, placement: Sequence[int], cpus: float, mem_gb: float
    ) -> tuple[float, str]:
        """(seconds per iteration, source); ``inf`` when infeasible."""
        name = self._trace_name(model)
        plan = normalise_plan(name, plan)
        place = placement_key(placement)
        key = (name, plan_key(plan), place, round(cpus, 3), round(mem_gb, 3))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._answer(name, plan, place, cpus, mem_gb)
            self._cache[key] = hit
        self.stats.record(name, hit[1], (plan_key(plan), place))
        return hit

    def _answer(
        self, name: str, plan: ExecutionPlan, place: tuple[int, ...], cpus: float, mem_gb: float
    ) -> tuple[float, str]:
        arch = get_arch(name)
        if sum(place) != plan.gpus:
            return math.inf, "infeasible"
        cpus = cpus / plan.gpus  # the job's CPUs, shared by its processes: threads per process
        if self.enforce_host_memory and plan_host_gb(arch, plan) > mem_gb + 1e-6:
            return math.inf, "infeasible"
        row = self._table.get(name, {}).get((plan_key(plan), place))
        offload = plan.zero is ZeroMode.OFFLOAD
        if row is not None:
            t, row_cpus = row
            if not offload or abs(cpus - row_cpus) < 1e-9:
                return t, "table"
            model = self.fitted(name)
            at = model.predict([Config(model.arch, plan, place, cpus, model.node)])[0]
            base = model.predict([Config(model.arch, plan, place, row_cpus, model.node)])[0]
            return t * float(at / base), "table_cpu_scaled"
        model = self.fitted(name)
        if not estimate_memory(model.arch, plan, place, model.node).fits_gpu:
            return math.inf, "infeasible"
        t = float(model.predict([Config(model.arch, plan, place, max(cpus, 1e-3), model.node)])[0])
        return t, "fallback"

    def total_work(self, job: JobSpec) -> float:
        if job.iterations is None:
            raise ValueError(f"job {job.job_id} has no iterations; the ground-truth model counts iterations")
        return float(job.iterations)

    def rate(self, job: JobSpec, allocation: Allocation) -> float:
        plan = allocation.plan or job.plan
        if plan is None or plan.gpus != allocation.gpus:
            plan = ExecutionPlan.data_parallel(allocation.gpus) if allocation.gpus else None
        if plan is None:
            return 0.0
        total = allocation.total
        place = [r.gpus for _, r in allocation.placement]
        t, _ = self.iteration_time(job.model, plan, place, total.cpus, total.mem_gb)
        return 0.0 if not math.isfinite(t) or t <= 0 else 1.0 / t

    def requested_rate(self, job: JobSpec) -> float:
        """Iterations/s of the job's requested plan on its requested resources, packed."""
        if job.plan is None or job.num_gpus < 1:
            return 0.0
        arch = get_arch(job.model)
        place = packed_placement(job.num_gpus, self.gpus_per_node)
        cpus = job.num_cpus or 4.0 * job.num_gpus
        mem = max(job.mem_gb, host_memory_gb(arch, job.plan))
        t, _ = self.iteration_time(job.model, job.plan, place, cpus, mem)
        return 0.0 if not math.isfinite(t) else 1.0 / t

    def target_rate(self, job: JobSpec) -> float | None:
        return self.requested_rate(job) if job.guaranteed else None


@lru_cache(maxsize=8)
def _read_dir(root: str) -> dict[str, list[Measurement]]:
    return read_trace_dir(root)


@lru_cache(maxsize=32)
def _fit_all(name: str, rows: tuple[Measurement, ...], starts: int) -> FittedModel:
    """Full-data fits are shared by every ground-truth instance of the process."""
    return fit(list(rows), get_arch(name), starts=starts)
