"""``gavel``: heterogeneity-aware max-min fairness over GPU types, in rounds.

Gavel (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for Deep
Learning Workloads", OSDI 2020, Sec. 4.1 and 5) expresses a policy as an optimisation
over an *allocation* ``X[j, k]``: the fraction of time job ``j`` spends on GPU type
``k``. This module implements its max-min fairness ("LAS") policy as Gavel's code does
(``MaxMinFairnessPolicyWithPerf`` in ``scheduler/policies/max_min_fairness.py``, with
``ProportionalPolicy`` in ``proportional.py``):

    maximise  min_j  s_j * sum_k T[j, k] X[j, k] / T_prop[j]
    s.t.      sum_k X[j, k] <= 1                 (a job runs on one type at a time)
              sum_j s_j X[j, k] <= G_k           (type k has G_k GPUs; job j needs s_j)
              0 <= X <= 1

``T`` is the job's throughput on each type, ``s_j`` its scale factor (GPU count) and
``T_prop[j] = sum_k T[j, k] G_k / sum G`` its throughput under the
heterogeneity-agnostic split of the cluster. The scale factor in the objective gives a
1-GPU job ``s`` times the time of an ``s``-GPU job, so on one GPU type every job gets
the same GPU-time (``s_j X_j`` equal). The LP is solved with ``scipy.optimize.linprog``
(HiGHS), closed-form on one GPU type, and again only when a partition's set of active
jobs changes (scipy's interface takes no starting basis, so the saving is the solves
skipped, not a warm start).

Throughputs: a job's own ``gpu_speed`` (a column per GPU type in the workload, 0 = it
cannot run there) when it gives one, else the model catalog (Gavel's measured
throughputs for the models they cover, ``workloads/catalog.py``); a job whose model the
catalog does not know uses the catalog-wide mean speed of each type, and a GPU type
nobody knows counts as 1.

Gavel's round-based mechanism (``scheduler.py``, ``_schedule_jobs_on_workers``) turns
the time fractions into placements: every round (default 360 s) each (job, type) pair
gets priority ``X[j, k] / f[j, k]``, where ``f[j, k]`` is the fraction of its time in the
system the job has actually spent on type ``k``; pairs are granted in priority order,
one type per job, while the type has GPUs. A job granted the type it already runs on
keeps its GPUs; jobs not granted are preempted at the round boundary. Between rounds,
arrivals and completions only hand free GPUs to waiting jobs (first come, first served,
no preemption), each on the free type where it is fastest relative to the catalog-wide
mean speed of that type (its comparative advantage). This fill is ours and off by
default (Gavel's simulator dispatches only at round boundaries: ``fill=true``).
Differences in the round mechanism that remain: Gavel measures the fraction received per
type against the type's total time since its last allocation reset and visits types in a
fixed order with deficits as tie-breaks; we use the time since the job's submission and
one global priority order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, ClusterSpec, JobSpec
from shapeshift.perf.throughput import job_type_speed
from shapeshift.policies.placement import Consolidated
from shapeshift.policies.registry import PolicyParams, register
from shapeshift.policies.rounds import RoundOrFillPolicy
from shapeshift.workloads.catalog import lookup, mean_gpu_speed

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

_EPS = 1e-6


@functools.lru_cache(maxsize=4096)
def type_speed(model: str, gpu_type: str) -> float:
    """Relative throughput (K80 = 1) of ``model`` on ``gpu_type``; see the module docstring."""
    info = lookup(model)
    if info is not None and gpu_type in info.gpu_speed:
        return info.gpu_speed[gpu_type]
    mean = mean_gpu_speed(gpu_type)
    return mean if mean is not None else 1.0


def job_speed(spec: JobSpec, gpu_type: str) -> float:
    """``spec``'s throughput on ``gpu_type``: its own figures if it gives them, else the catalog's."""
    own = job_type_speed(spec, gpu_type)
    return type_speed(spec.model, gpu_type) if own is None else own


def max_min_allocation(
    speed: np.ndarray,
    demand: np.ndarray,
    capacity: np.ndarray,
    *,
    fill_spare: bool = False,
    objective: str = "gavel",
) -> np.ndarray:
    """Solve Gavel's max-min fairness LP (``MaxMinFairnessPolicyWithPerf``).

    ``speed``: (jobs x types) throughput (0 where a job cannot run on a type);
    ``demand``: GPUs per job (Gavel's scale factor); ``capacity``: GPUs per type.
    Returns X (jobs x types). Every job that can run somewhere gets the same
    ``demand_j * sum_k speed[j, k] X[j, k] / proportional_j``, as large as possible, where
    ``proportional_j = sum_k speed[j, k] * capacity_k / sum(capacity)`` is its throughput
    under the heterogeneity-agnostic split (Gavel's ``ProportionalPolicy``). On one GPU
    type this gives every job the same GPU-time: ``demand_j * X_j`` equal.

    Gavel's solver returns whichever optimum it reaches when several exist;
    ``fill_spare`` (ours) picks, among them, one that also maximises the total normalised
    throughput, so capacity the max-min level leaves over is handed out in the LP.

    ``objective="best-type"`` is our earlier rule: no scale factor, throughput normalised
    by the job's best type (``sum_k T X / max_k T``), always with ``fill_spare``."""
    # Imported here: scipy.optimize costs ~0.5 s at start-up and only this step needs it.
    from scipy.optimize import linprog

    jobs, types = speed.shape
    x = np.zeros((jobs, types))
    runnable = np.flatnonzero(speed.max(axis=1) > 0) if jobs else np.zeros(0, dtype=np.int64)
    if runnable.size == 0:
        return x
    s = speed[runnable]
    d = demand[runnable].astype(float)
    proportional = s @ (capacity / capacity.sum())
    # The objective's per-job coefficient: Gavel multiplies throughput by the scale factor
    # and divides by the proportional throughput (a job that can run only on an absent
    # type never reaches here: its speed row is 0).
    if objective == "best-type":
        coeff, fill_spare = s / s.max(axis=1, keepdims=True), True
    else:
        coeff = s * (d / proportional)[:, None]
    m = runnable.size
    if types == 1 and not fill_spare:
        # demand_j X_j = t for all j, X_j <= 1, sum demand_j X_j <= G: t = min(G / m, min demand).
        level = min(float(capacity[0]) / m, float(d.min()))
        x[runnable, 0] = level / d
        return x
    n = m * types
    rows = np.arange(m)
    # Variables: X flattened row-major (job, type), then t. Minimise -t (- w * total).
    c = np.zeros(n + 1)
    c[n] = -1.0
    if fill_spare:
        c[:n] = -(1e-3 / m) * (s / s.max(axis=1, keepdims=True)).ravel()
    a = np.zeros((2 * m + types, n + 1))
    # t - sum_k coeff[j,k] X[j,k] <= 0
    a[rows[:, None], rows[:, None] * types + np.arange(types)] = -coeff
    a[rows, n] = 1.0
    # sum_k X[j,k] <= 1
    a[m + rows[:, None], rows[:, None] * types + np.arange(types)] = 1.0
    # sum_j demand_j X[j,k] <= G_k
    a[2 * m + np.arange(types)[None, :], rows[:, None] * types + np.arange(types)] = d[:, None]
    b = np.concatenate([np.zeros(m), np.ones(m), capacity.astype(float)])
    bounds = [(0.0, 1.0 if v > 0 else 0.0) for v in s.ravel()] + [(0.0, None)]
    result = linprog(c, A_ub=a, b_ub=b, bounds=bounds, method="highs")
    if not result.success:  # pragma: no cover - the LP is always feasible (X = 0)
        return x
    x[runnable] = np.clip(result.x[:n].reshape(m, types), 0.0, 1.0)
    return x


@dataclass(frozen=True)
class _Types:
    """The GPU types of one partition: names, node indexes per type, GPUs per type."""

    names: tuple[str, ...]
    nodes: tuple[np.ndarray, ...]
    gpus: np.ndarray
    node_type: Mapping[int, int]

    @classmethod
    def of(cls, cluster: ClusterSpec, nodes: np.ndarray) -> _Types:
        names = tuple(sorted({cluster.nodes[int(n)].gpu_type for n in nodes}))
        index = {name: i for i, name in enumerate(names)}
        per = [np.array([int(n) for n in nodes if cluster.nodes[int(n)].gpu_type == t], dtype=np.int64) for t in names]
        gpus = np.array([sum(cluster.nodes[int(n)].gpus for n in p) for p in per], dtype=np.int64)
        node_type = {int(n): index[cluster.nodes[int(n)].gpu_type] for n in nodes}
        return cls(names, tuple(per), gpus, node_type)


class GavelPolicy(RoundOrFillPolicy):
    name = "gavel"
    waiting_reason = "waiting for a round"

    def __init__(self, round_seconds: float, fill: bool = False, fill_spare: bool = False, objective: str = "gavel"):
        super().__init__(round_seconds)
        self._fill = fill
        self._fill_spare = fill_spare
        self._objective = objective
        #: per partition: the job list of the last LP and its solution (re-solved on change)
        self._solved: dict[str, tuple[list[str], np.ndarray]] = {}
        #: LP solves so far (the benchmark prints it)
        self.solves = 0
        self._placement = Consolidated()
        self._types: dict[str, _Types] = {}
        #: seconds each job has run on each type index (per partition's type list)
        self._received: dict[str, dict[int, float]] = {}
        self._last = 0.0
        #: X of the last round, per job: type index -> fraction
        self._share: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ helpers
    def _types_of(self, view: ClusterView, partition: str) -> _Types:
        types = self._types.get(partition)
        if types is None:
            types = self._types[partition] = _Types.of(view.cluster, view.partitions[partition])
        return types

    def _speeds(self, view: ClusterView, types: _Types, jobs: Sequence[str]) -> np.ndarray:
        speed = np.zeros((len(jobs), len(types.names)))
        for i, job_id in enumerate(jobs):
            spec = view.job(job_id).spec
            for k, name in enumerate(types.names):
                if spec.num_gpus <= types.gpus[k]:
                    speed[i, k] = job_speed(spec, name)
        return speed

    def before_decision(self, view: ClusterView) -> None:
        """Credit every running job with the time since the last decision on its GPU type."""
        dt = view.now - self._last
        self._last = view.now
        if dt <= 0:
            return
        for job_id, alloc in view.allocations.items():
            partition = view.job(job_id).partition
            k = self._types_of(view, partition).node_type[alloc.placement[0][0]]
            got = self._received.setdefault(job_id, {})
            got[k] = got.get(k, 0.0) + dt

    def _type_of(self, types: _Types, alloc: Allocation) -> int:
        return types.node_type[alloc.placement[0][0]]

    def _place_on(
        self, view: ClusterView, job_id: str, types: _Types, k: int, free: FreeResources
    ) -> Allocation | None:
        return self._placement.find(view.job(job_id).spec, types.nodes[k], free)

    # ----------------------------------------------------------------- decide
    def plan_round(
        self,
        view: ClusterView,
        partition: str,
        free: FreeResources,
        changes: dict[str, Allocation | None],
        reasons: dict[str, str],
    ) -> None:
        types = self._types_of(view, partition)
        running = list(view.running(partition))
        jobs = sorted([*running, *view.pending(partition)], key=lambda j: (view.job(j).spec.submit_time, j))
        if not jobs:
            return
        last = self._solved.get(partition)
        if last is not None and last[0] == jobs:
            x = last[1]
        else:
            speed = self._speeds(view, types, jobs)
            demand = np.array([view.job(j).spec.num_gpus for j in jobs], dtype=float)
            x = max_min_allocation(speed, demand, types.gpus, fill_spare=self._fill_spare, objective=self._objective)
            self._solved[partition] = (jobs, x)
            self.solves += 1
        pairs = []
        for i, job_id in enumerate(jobs):
            self._share[job_id] = x[i]
            status = view.job(job_id)
            age = max(view.now - status.spec.submit_time, _EPS)
            got = self._received.get(job_id, {})
            for k in range(len(types.names)):
                if x[i, k] <= _EPS:
                    continue
                fraction = got.get(k, 0.0) / age
                priority = x[i, k] / fraction if fraction > 0 else math.inf
                pairs.append((-priority, -x[i, k], status.spec.submit_time, job_id, k))
        pairs.sort()
        left = types.gpus.copy()
        granted: dict[str, int] = {}
        for _, _, _, job_id, k in pairs:
            gpus = view.job(job_id).spec.num_gpus
            if job_id in granted or gpus > left[k]:
                continue
            granted[job_id] = k
            left[k] -= gpus
        current = view.allocations
        # Free everything that is not kept in place, then place the rest in grant order.
        for job_id in running:
            if granted.get(job_id) != self._type_of(types, current[job_id]):
                free.give(current[job_id])
                changes[job_id] = None
        for job_id, k in granted.items():
            if job_id in current and job_id not in changes:
                continue
            alloc = self._place_on(view, job_id, types, k, free)
            if alloc is None:
                reasons[job_id] = f"granted {types.names[k]} GPUs this round but they are fragmented"
                continue
            free.take(alloc)
            if job_id in current and alloc == current[job_id]:
                del changes[job_id]
            else:
                changes[job_id] = alloc
        for job_id in jobs:
            if job_id not in granted and job_id not in current:
                reasons[job_id] = "not granted GPUs this round (max-min fair share)"

    def fill_free(
        self,
        view: ClusterView,
        partition: str,
        free: FreeResources,
        changes: dict[str, Allocation | None],
        reasons: dict[str, str],
    ) -> None:
        if not self._fill:
            return
        types = self._types_of(view, partition)
        nodes = view.partitions[partition]
        free_gpus = int(free.gpus[nodes].sum())
        for job_id in view.pending(partition):
            if free_gpus == 0:
                break
            spec = view.job(job_id).spec
            if spec.num_gpus > free_gpus:
                continue
            speed = self._speeds(view, types, [job_id])[0]
            # Comparative advantage: prefer the type where this job is fast relative to the
            # typical job (a3c gains little from a V100, so it should leave it to a CNN).
            mean = [type_speed("", name) for name in types.names]
            for k in sorted(range(len(types.names)), key=lambda k: (-speed[k] / mean[k], -speed[k], k)):
                if speed[k] <= 0:
                    continue
                alloc = self._place_on(view, job_id, types, k, free)
                if alloc is not None:
                    changes[job_id] = alloc
                    free.take(alloc)
                    free_gpus -= alloc.gpus
                    break
            else:
                reasons[job_id] = "no free GPUs of a usable type until the next round"


class GavelParams(PolicyParams):
    round: float = Field(360.0, gt=0)
    fill: bool = Field(False, description="hand free GPUs to waiting jobs between rounds (ours)")
    fill_spare: bool = Field(False, description="LP tie-break: maximise total normalised throughput (ours)")
    objective: Literal["gavel", "best-type"] = Field(
        "gavel", description="gavel: MaxMinFairnessPolicyWithPerf; best-type: our earlier objective"
    )


@register(
    "gavel",
    "Heterogeneity-aware max-min fairness as Gavel (scale factors, normalised by the proportional split): "
    "LP over GPU-type time fractions (HiGHS), re-solved when the job set changes; per-round placements.",
    GavelParams,
)
def make_gavel(params: GavelParams) -> GavelPolicy:
    return GavelPolicy(params.round, params.fill, params.fill_spare, params.objective)
