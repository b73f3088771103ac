"""The LPs behind ``gavel``: Gavel's max-min fairness and total throughput over GPU-type
time fractions, and the per-job throughputs they read.

Gavel (Narayanan et al., OSDI 2020, Sec. 4.1) solves, over ``X[j, k]`` (the fraction of
time job ``j`` spends on GPU type ``k``), ``MaxMinFairnessPolicyWithPerf``
(``scheduler/policies/max_min_fairness.py``, with ``ProportionalPolicy`` in
``proportional.py``; ``max_min_allocation``) or, as the Sia artifact runs its Gavel
baseline, ``max_sum_throughput_perf`` (``ThroughputSumWithPerf`` in
``scheduler/policies/max_sum_throughput.py``; ``max_sum_throughput_allocation``). Solved
with ``scipy.optimize.linprog`` (HiGHS), max-min closed-form on one GPU type.
"""

from __future__ import annotations

import functools

import numpy as np

from shapeshift.model import JobSpec
from shapeshift.perf.throughput import job_type_speed
from shapeshift.workloads.catalog import lookup, mean_gpu_speed


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

    types = speed.shape[1]
    x, runnable, s, d = _runnable(speed, demand)
    if runnable.size == 0:
        return x
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
    level = np.zeros((m, n + 1))
    # t - sum_k coeff[j,k] X[j,k] <= 0
    level[rows[:, None], rows[:, None] * types + np.arange(types)] = -coeff
    level[rows, n] = 1.0
    base, limits = _base_constraints(d, capacity, types, n + 1)
    a = np.vstack([level, base])
    b = np.concatenate([np.zeros(m), limits])
    bounds = [(0.0, 1.0 if v > 0 else 0.0) for v in s.ravel()] + [(0.0, None)]
    result = linprog(c, A_ub=a, b_ub=b, bounds=bounds, method="highs")
    if not result.success:  # pragma: no cover - the LP is always feasible (X = 0)
        return x
    x[runnable] = np.clip(result.x[:n].reshape(m, types), 0.0, 1.0)
    return x


def max_sum_throughput_allocation(speed: np.ndarray, demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Solve Gavel's ``ThroughputSumWithPerf`` (``max_sum_throughput_perf``).

    maximise ``sum_j sum_k speed[j, k] X[j, k]`` subject to Gavel's base constraints
    (``Policy.get_base_constraints``): ``X >= 0``, ``sum_k X[j, k] <= 1`` and
    ``sum_j demand_j X[j, k] <= capacity_k``. The throughputs enter as they are (no scale
    factor, no normalisation), so the unit matters: Gavel's are steps per second.

    Where several optima exist Gavel solves with ECOS, an interior-point method, whose
    answer treats identical jobs (the same speeds and demand) alike, while HiGHS returns
    a vertex that gives one of them the whole residual share and the others none. Since
    the job's priority is its share over its time received, a zero share leaves it
    behind every job with one. So identical jobs get the mean of their shares (still an
    optimum: it averages optima over their permutations), as ECOS's answer is
    symmetric in them; other ties keep HiGHS's vertex. The shares are then rounded to 5
    decimals and clipped to [0, 1], as the Sia artifact's copy
    (``policies/max_sum_throughput.py``) returns them."""
    from scipy.optimize import linprog

    types = speed.shape[1]
    x, runnable, s, d = _runnable(speed, demand)
    if runnable.size == 0:
        return x
    m = runnable.size
    n = m * types
    a, b = _base_constraints(d, capacity, types, n)
    bounds = [(0.0, 1.0 if v > 0 else 0.0) for v in s.ravel()]
    result = linprog(-s.ravel(), A_ub=a, b_ub=b, bounds=bounds, method="highs")
    if not result.success:  # pragma: no cover - the LP is always feasible (X = 0)
        return x
    x[runnable] = np.clip(symmetric_shares(result.x.reshape(m, types), s, d).round(5), 0.0, 1.0)
    return x


def symmetric_shares(x: np.ndarray, speed: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """``x`` with every group of identical jobs (equal speed rows and demand) given the
    group's mean shares."""
    out = x.copy()
    groups: dict[tuple[float, ...], list[int]] = {}
    for j in range(x.shape[0]):
        groups.setdefault((float(demand[j]), *speed[j].tolist()), []).append(j)
    for rows in groups.values():
        if len(rows) > 1:
            out[rows] = x[rows].mean(axis=0)
    return out


def _runnable(speed: np.ndarray, demand: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The all-zero allocation, and the jobs some type can run (a zero speed row cannot)
    with their speeds and demands: what both of Gavel's LPs solve over."""
    jobs, types = speed.shape
    runnable = np.flatnonzero(speed.max(axis=1) > 0) if jobs else np.zeros(0, dtype=np.int64)
    return np.zeros((jobs, types)), runnable, speed[runnable], demand[runnable].astype(float)


def _base_constraints(d: np.ndarray, capacity: np.ndarray, types: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Gavel's base constraints (``Policy.get_base_constraints``) over X flattened row-major
    (job, type) in the first ``m * types`` of ``width`` columns: ``sum_k X[j, k] <= 1`` and
    ``sum_j demand_j X[j, k] <= G_k``."""
    m = d.size
    rows = np.arange(m)
    cols = rows[:, None] * types + np.arange(types)
    a = np.zeros((m + types, width))
    a[rows[:, None], cols] = 1.0
    a[m + np.arange(types)[None, :], cols] = d[:, None]
    return a, np.concatenate([np.ones(m), capacity.astype(float)])
