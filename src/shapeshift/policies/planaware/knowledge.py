"""What a plan-aware policy knows about a job's performance, and how it learns more.

The honest setting: a policy never reads the measured tables the simulator
charges. Per model it starts from the performance model (``shapeshift.perf``) fitted on a
7-row sample of profiling runs (the profiling planner's choice, or seeded random rows
covering three plan families, the ``perf fit --sample 7`` rule), and it learns online:

* every configuration a running job was observed in (plan, GPUs per node, CPUs) is
  remembered with its observed iteration time (``1 / JobStatus.rate``) and overrides the
  prediction for exactly that configuration;
* the model is refit on sample + observations when the mean relative error of the last
  observations exceeds ``refit_threshold``; refits back off (they cost ~0.3 s), and the
  curves of a refit model are recomputed lazily (cache keyed by the model's version).

Answers are cached: ``best`` (best plan of a plan space for a placement multiset and a
CPU amount) and ``curve`` (best throughput per GPU count on packed placements), so a
decision costs dictionary lookups, not model evaluations.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from shapeshift.datasets import locate
from shapeshift.engine.view import ClusterView
from shapeshift.model import ExecutionPlan, JobSpec, ZeroMode
from shapeshift.perf.arch import ModelArch, UnknownModelError, get_arch
from shapeshift.perf.fitting import FitError, FittedModel, abs_pct_errors, fit
from shapeshift.perf.ground_truth import normalise_plan, placement_key
from shapeshift.perf.measurements import Measurement, MeasurementError, read_trace_dir
from shapeshift.perf.memory import fits_memory
from shapeshift.perf.plans import enumerate_plans, packed_placement
from shapeshift.perf.rubick import A800_NODE, Config, RubickParams
from shapeshift.perf.validate import planner_sample, random_sample

#: Where the Rubick profiling rows are looked for when a policy names no directory.
TRACES_ENV = "SHAPESHIFT_RUBICK_TRACES"
SAMPLE_SIZE = 7

#: A plan space: ("all",) every plan; ("all", plan) every plan plus the requested one;
#: ("fixed", plan) the requested plan only; ("dp", tp, pp, zero, gc) data-parallel
#: scaling of the requested plan's shape.
PlanSpace = tuple[object, ...]
ALL: PlanSpace = ("all",)

#: Fits on the 7-row samples are deterministic, so policy instances of one process share
#: them (every experiment builds several policies over the same profiling rows).
_INITIAL_FITS: dict[tuple[object, ...], FittedModel] = {}

#: L-BFGS-B iterations allowed to an online refit (warm-started, so few are needed).
REFIT_ITERATIONS = 40


def default_traces() -> Path:
    """``$SHAPESHIFT_RUBICK_TRACES``, else the bundled A800 tables (``rubick-a800-tables``)."""
    return locate(os.environ.get(TRACES_ENV) or "rubick-a800-tables")


def fixed_space(plan: ExecutionPlan) -> PlanSpace:
    return ("fixed", plan)


def dp_space(plan: ExecutionPlan) -> PlanSpace:
    """Scale only data parallelism: TP, PP, ZeRO mode and checkpointing stay as requested."""
    return ("dp", plan.tp, plan.pp, plan.zero.value, plan.grad_ckpt)


def plans_in_space(arch: ModelArch, place: tuple[int, ...], space: PlanSpace) -> list[ExecutionPlan]:
    """Valid plans of ``space`` on ``place`` (a multiset of GPUs per node), pipelines as one micro-batch."""
    gpus = sum(place)
    kind = space[0]
    if kind == "fixed":
        plan = space[1]
        assert isinstance(plan, ExecutionPlan)
        ok = plan.gpus == gpus and all(g % plan.tp == 0 for g in place)
        return [plan] if ok else []
    if kind == "dp":
        _, tp, pp, zero, gc = space
        assert isinstance(tp, int) and isinstance(pp, int)
        if gpus % (tp * pp) or any(g % tp for g in place):
            return []
        dp = gpus // (tp * pp)
        if arch.global_batch % dp:
            return []
        return [ExecutionPlan(dp=dp, tp=tp, pp=pp, zero=ZeroMode(zero), grad_ckpt=bool(gc))]
    seen: dict[ExecutionPlan, None] = {}
    for plan in enumerate_plans(arch, place):
        seen[normalise_plan(arch.name, plan)] = None
    requested = _requested(space)
    if requested is not None:
        # The plan the user submitted stays a candidate even where the enumerated space
        # would not produce it (gpt2's TP=5 does not divide its 19 heads, yet it ran).
        seen.update(dict.fromkeys(plans_in_space(arch, place, fixed_space(requested))))
    return list(seen)


def _requested(space: PlanSpace) -> ExecutionPlan | None:
    plan = space[1] if len(space) > 1 and space[0] in ("all", "fixed") else None
    return plan if isinstance(plan, ExecutionPlan) else None


@dataclass(frozen=True, slots=True)
class Choice:
    """The best plan of a space on a placement, with its predicted speed."""

    plan: ExecutionPlan
    throughput: float  # samples per second
    iter_time: float  # seconds per iteration


@dataclass
class ModelKnowledge:
    """One model's fitted coefficients, its sample, its observations and its caches."""

    arch: ModelArch
    model: FittedModel
    sample: list[Measurement]
    observed: dict[tuple[object, ...], Measurement] = field(default_factory=dict)
    recent_errors: list[float] = field(default_factory=list)
    version: int = 0
    refits: int = 0
    since_refit: int = 0


def config_key(plan: ExecutionPlan, place: tuple[int, ...], cpus: float) -> tuple[object, ...]:
    cpu_key = round(cpus, 1) if plan.zero is ZeroMode.OFFLOAD else 0.0
    return (plan, place, cpu_key)


class Knowledge:
    """Per-policy performance knowledge of every model its jobs train."""

    def __init__(
        self,
        traces: str | Path | None = None,
        sample: str = "planner",
        seed: int = 0,
        refit_threshold: float = 0.15,
        window: int = 5,
        fit_starts: int = 3,
    ) -> None:
        self.traces = locate(traces) if traces else default_traces()
        self.sample_mode = sample
        self.seed = seed
        self.refit_threshold = refit_threshold
        self.window = window
        self.fit_starts = fit_starts
        self._rows: dict[str, list[Measurement]] | None = None
        self._models: dict[str, ModelKnowledge | None] = {}
        self._best: dict[tuple[object, ...], Choice | None] = {}
        self._curves: dict[tuple[object, ...], np.ndarray] = {}
        self._seen: dict[str, tuple[object, ...]] = {}
        self.notes: list[str] = []

    # --------------------------------------------------------------- models
    def _sample_rows(self, name: str) -> list[Measurement]:
        if self._rows is None:
            self._rows = {}
            if self.traces is not None:
                try:
                    self._rows = read_trace_dir(self.traces)
                except MeasurementError as exc:
                    self.notes.append(f"no profiling rows: {exc}")
        rows = self._rows.get(name, [])
        if len(rows) <= SAMPLE_SIZE:
            return rows
        pick = planner_sample(rows, SAMPLE_SIZE) if self.sample_mode == "planner" else None
        if pick is None:
            pick = random_sample(rows, SAMPLE_SIZE, self.seed)
        return [rows[i] for i in pick]

    def knowledge(self, model_name: str) -> ModelKnowledge | None:
        """The model's knowledge, fitted on its 7-row sample at first use; None if unknown."""
        if model_name in self._models:
            return self._models[model_name]
        try:
            arch = get_arch(model_name)
        except UnknownModelError:
            self._models[model_name] = None
            return None
        sample = self._sample_rows(arch.name)
        key = (str(self.traces), arch.name, self.sample_mode, self.seed, self.fit_starts)
        fitted = _INITIAL_FITS.get(key)
        if fitted is None:
            try:
                fitted = fit(sample, arch, starts=self.fit_starts, seed=self.seed)
            except (FitError, ValueError):
                fitted = FittedModel(arch, RubickParams(), node=A800_NODE)
                self.notes.append(f"{arch.name}: no 7-row sample; default coefficients")
            _INITIAL_FITS[key] = fitted
        mk = ModelKnowledge(arch, fitted, list(sample))
        self._models[model_name] = mk
        return mk

    # ------------------------------------------------------------ learning
    def observe(self, view: ClusterView) -> int:
        """Record the observed speed of every running job whose configuration is new; refit
        models whose recent error exceeds the threshold. Returns the number of refits."""
        refits = 0
        touched: set[str] = set()
        for job_id, alloc in view.allocations.items():
            status = view.job(job_id)
            if status.rate <= 0 or alloc.plan is None or getattr(status, "speed", 1.0) < 1.0:
                continue  # (a job slowed by a GPU partner is observed once it runs alone)
            place = placement_key([r.gpus for _, r in alloc.placement])
            key = (alloc.plan, place, round(alloc.total.cpus, 1))
            if self._seen.get(job_id) == key:
                continue
            self._seen[job_id] = key
            mk = self.knowledge(status.spec.model)
            if mk is None:
                continue
            ckey = config_key(alloc.plan, place, alloc.total.cpus)
            if ckey in mk.observed:
                continue
            threads = alloc.total.cpus / max(sum(place), 1)  # measurements record threads per process
            m = Measurement(mk.arch.name, alloc.plan, place, 1.0 / status.rate, threads)
            err = float(abs_pct_errors(mk.model, [m])[0])
            mk.observed[ckey] = m
            mk.recent_errors = [*mk.recent_errors, err][-self.window :]
            mk.since_refit += 1
            self._invalidate(mk, curves=False)
            touched.add(mk.arch.name)
        due = []
        for name in sorted(touched):
            mk = self._models.get(name) or self.knowledge(name)
            if mk is None or not mk.recent_errors:
                continue
            if float(np.mean(mk.recent_errors)) <= self.refit_threshold or mk.since_refit < 2 + 2 * mk.refits:
                continue
            due.append((-float(np.mean(mk.recent_errors)), name, mk))
        # At most one refit per decision, the worst model first (the others stay due and are
        # refit by later decisions): a decision must stay well under 200 ms.
        for _, _, mk in sorted(due, key=lambda d: (d[0], d[1]))[:1]:
            rows = mk.sample + list(mk.observed.values())
            try:
                # one bounded start from the current coefficients: close to the answer already
                mk.model = fit(
                    rows, mk.arch, starts=1, seed=self.seed, warm_start=mk.model.params, max_iterations=REFIT_ITERATIONS
                )
            except (FitError, ValueError):
                continue
            mk.refits += 1
            mk.since_refit = 0
            recent = list(mk.observed.values())[-self.window :]
            mk.recent_errors = [float(e) for e in abs_pct_errors(mk.model, recent)]
            self._invalidate(mk, curves=True)
            refits += 1
        return refits

    def _invalidate(self, mk: ModelKnowledge, curves: bool) -> None:
        mk.version += 1
        name = mk.arch.name
        self._best = {k: v for k, v in self._best.items() if k[0] != name}
        if curves:
            self._curves = {k: v for k, v in self._curves.items() if k[0] != name}

    @property
    def refits(self) -> int:
        return sum(mk.refits for mk in self._models.values() if mk is not None)

    # ------------------------------------------------------------- answers
    def is_observed(self, model_name: str, plan: ExecutionPlan, place: Sequence[int], cpus: float) -> bool:
        """Whether exactly this configuration has been seen running (its speed is known)."""
        mk = self.knowledge(model_name)
        return mk is not None and config_key(plan, placement_key(place), cpus) in mk.observed

    def best(self, model_name: str, place: Sequence[int], cpus: float, space: PlanSpace = ALL) -> Choice | None:
        """Best plan of ``space`` on ``place`` with ``cpus`` CPUs in all (observations override predictions)."""
        mk = self.knowledge(model_name)
        if mk is None:
            return None
        pk = placement_key(place)
        if not pk:
            return None
        key = (mk.arch.name, pk, round(cpus, 1), space)
        if key in self._best:
            return self._best[key]
        plans = plans_in_space(mk.arch, pk, space)
        requested = _requested(space)
        if space[0] != "fixed":
            # The memory estimator vetoes enumerated plans, never the submitted one: that
            # plan ran on the user's resources, so it is known to fit.
            plans = [p for p in plans if p == requested or fits_memory(mk.arch, p, pk, mk.model.node)]
        result = None
        if plans:
            # ``cpus`` is the job's total; the model takes CPU threads per training process.
            per_process = max(cpus / sum(pk), 1.0)
            times = mk.model.predict([Config(mk.arch, p, pk, per_process, mk.model.node) for p in plans])
            for i, p in enumerate(plans):
                seen = mk.observed.get(config_key(p, pk, cpus))
                if seen is not None:
                    times[i] = seen.iter_time
            i = int(np.argmin(times))
            t = float(times[i])
            if math.isfinite(t) and t > 0:
                result = Choice(plans[i], mk.arch.global_batch / t, t)
        self._best[key] = result
        return result

    def curve(self, model_name: str, space: PlanSpace, max_gpus: int, gpus_per_node: int, cpus_per_gpu: float):
        """Throughput (samples/s) of the best plan at 0..max_gpus GPUs on packed placements,
        made monotone (more GPUs never predicted slower: extra GPUs may stay idle)."""
        mk = self.knowledge(model_name)
        name = mk.arch.name if mk else model_name
        key = (name, space, max_gpus, gpus_per_node, round(cpus_per_gpu, 2))
        cached = self._curves.get(key)
        if cached is not None:
            return cached
        thr = np.zeros(max_gpus + 1)
        for g in range(1, max_gpus + 1):
            c = self.best(model_name, packed_placement(g, gpus_per_node), cpus_per_gpu * g, space)
            thr[g] = max(thr[g - 1], c.throughput if c else 0.0)
        self._curves[key] = thr
        return thr


def job_space(job: JobSpec, replan: bool, elastic: bool) -> PlanSpace:
    """The plan space of a job under a policy variant (rubick / -e / -r / -n)."""
    if job.plan is None:
        return ALL
    if replan:
        return ("all", job.plan)
    return dp_space(job.plan) if elastic else fixed_space(replace(job.plan))
