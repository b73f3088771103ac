"""Sia's integer program: one binary variable per (job, configuration), at most one
configuration per job, the GPUs of each type within the type's total, a job in the middle
of a checkpoint-restore held to its current configuration; minimise the sum of the chosen
costs (the artifact's ``sia.py``, ``__solve_mip_rescaled``).

Its costs are rounded to two decimals, so the program often has several optima, and which
one a solver returns decides which GPU type a new job starts on (and so which of its
models the other types are projected from). The artifact builds the program with cvxpy
and solves it with CBC through cylp (``problem.solve(solver=cp.CBC, numberThreads=8,
allowablePercentageGap=0.01)``). CBC's choice among equal optima follows from the
program's layout (every configuration of every type a column for every job, in cvxpy's
order), from the last bits of its costs (the artifact rounds them in float32) and from
CBC's own presolve, cuts and simplex path: no simple rule (first type, first column, keep
the current configuration) reproduces it, so :func:`solve_cbc` hands CBC that very layout
(:func:`standard_form`) with float32-rounded costs (needs ``cylp``, ``pip install
'shapeshift[cbc]'``). :func:`solve_highs` (``solver=highs``) solves the same program on
each job's own options with HiGHS at the same relative gap, and :func:`solve_knapsack` on
one GPU type; of equal optima they return whichever they find.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np


def configurations(gpn: int, count: int) -> list[tuple[int, int]]:
    """(nodes, GPUs) on ``count`` nodes of ``gpn`` GPUs: powers of two up to one node, the
    whole node, then whole nodes (the artifact's ``CONFIGS_4GPU``/``CONFIGS_8GPU``)."""
    sizes = [(1, 1 << i) for i in range(gpn.bit_length()) if (1 << i) < gpn] + [(1, gpn)]
    return sizes + [(k, k * gpn) for k in range(2, count + 1)]


def artifact_grid(types: Mapping[str, tuple[int, int]], options: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """The program's columns, (GPU type, GPUs), in the artifact's order: type by type
    (``types``: GPUs per node and nodes), each type's configurations by GPUs; a GPU count
    some job's options have beyond them (a rigid request) after its type's own."""
    grid: list[tuple[str, int]] = []
    for gpu_type, (gpn, count) in types.items():
        own = [r for _, r in configurations(gpn, count)]
        extra = sorted({g for t, g in options if t == gpu_type} - set(own))
        grid += [(gpu_type, r) for r in own + extra]
    return grid


NO_CBC = (
    "sia: cylp is not installed, so the integer program is solved with HiGHS, which decides ties between "
    "equal optima differently from the artifact's CBC (pip install 'shapeshift[cbc]', or solver=highs)"
)


def solve_artifact(
    jobs: Sequence[Any],
    types: Mapping[str, tuple[int, int]],
    caps: Mapping[str, float],
    cost: Callable[[Any, np.ndarray, int | None], np.ndarray],
    time_limit: float,
) -> dict[str, Any]:
    """The chosen option per job id, by :func:`solve_cbc` on the artifact's columns
    (:func:`artifact_grid`): a configuration a job has no option for has goodput 0 there
    (the artifact's ``ZERO_ALLOC_GAIN``: costly, never chosen). ``cost(job, goodputs,
    current)``: the job's costs on those goodputs, ``current`` its configuration's column."""
    grid = artifact_grid(types, [(o.gpu_type, o.gpus) for j in jobs for o in j.options])
    column = {key: k for k, key in enumerate(grid)}
    rows, current = [], []
    for job in jobs:
        good = np.zeros(len(grid))
        where = [column[o.gpu_type, o.gpus] for o in job.options]
        good[where] = [o.goodput for o in job.options]
        current.append(where[job.current] if job.current is not None else None)
        rows.append(cost(job, good, current[-1]))
    names = list(types)
    costs = np.array(rows, dtype=float).reshape(len(jobs), len(grid))
    gpus, kinds = [r for _, r in grid], [names.index(t) for t, _ in grid]
    limits = [caps[t] for t in names]
    picked = solve_cbc(costs, gpus, kinds, limits, current, [j.pinned for j in jobs], time_limit)
    return {
        job.job_id: next(o for o in job.options if (o.gpu_type, o.gpus) == grid[k])
        for job, k in zip(jobs, picked, strict=True)
        if k is not None
    }


def cbc_available() -> bool:
    """Whether CBC can be reached through cylp (the optional ``cbc`` extra)."""
    try:
        from cylp.cy import CyClpSimplex  # noqa: F401
    except ImportError:
        return False
    return True


def standard_form(
    costs: np.ndarray,
    gpus: Sequence[int],
    column_type: Sequence[int],
    caps: Sequence[float],
    current: Sequence[int | None],
    pinned: Sequence[bool],
) -> tuple[np.ndarray, Any, np.ndarray, Any, np.ndarray]:
    """``(c, A_eq, b_eq, A_le, b_le)`` as cvxpy hands the artifact's program to CBC.

    ``costs[j, k]``: job ``j`` on configuration ``k``, the configurations in the artifact's
    order (:func:`artifact_grid`); ``gpus[k]`` and ``column_type[k]`` (an index into
    ``caps``, the GPUs per type) describe configuration ``k``. The artifact's
    ``cp.Variable((jobs, configs))`` is flattened column by column (variable ``k * jobs +
    j``); first the equalities ``x = 1`` for the pinned jobs' current configurations, in job
    order; then the inequalities ``-x <= 0`` and ``x <= 1`` for every variable, ``sum gpus
    x <= cap`` and then ``-sum gpus x <= 0`` for every type, and ``sum_k x <= 1`` for every
    job (its constraints in the order ``__solve_mip_rescaled`` lists them, equalities
    first as cvxpy puts them)."""
    from scipy.sparse import coo_array, csr_matrix, identity, vstack

    n, m = costs.shape
    size = n * m
    col = np.arange(size)
    job_of, cfg_of = col % n, col // n
    types = len(caps)
    g = np.asarray(gpus, dtype=float)[cfg_of]
    by_type = coo_array((g, (np.asarray(column_type, dtype=int)[cfg_of], col)), shape=(types, size))
    per_job = coo_array((np.ones(size), (job_of, col)), shape=(n, size))
    eye = identity(size, format="csr")
    a_le = csr_matrix(vstack([-eye, eye, by_type, -by_type, per_job], format="csr"))
    b_le = np.concatenate([np.zeros(size), np.ones(size), np.asarray(caps, float), np.zeros(types), np.ones(n)])
    held = [int(current[j]) * n + j for j in range(n) if pinned[j] and current[j] is not None]  # type: ignore[arg-type]
    a_eq = csr_matrix(coo_array((np.ones(len(held)), (np.arange(len(held)), held)), shape=(len(held), size)))
    return costs.T.reshape(-1).astype(float), a_eq, np.ones(len(held)), a_le, b_le


def solve_cbc(
    costs: np.ndarray,
    gpus: Sequence[int],
    column_type: Sequence[int],
    caps: Sequence[float],
    current: Sequence[int | None],
    pinned: Sequence[bool],
    time_limit: float,
) -> list[int | None]:
    """The configuration chosen per job (an index into the columns, or ``None``): CBC
    through cylp on :func:`standard_form`, with the artifact's settings (8 threads, a
    relative gap of 1e-4) and the run's time limit. Replayed on the 220 rounds the
    instrumented artifact logged on two Saturn workloads (its costs as float32 rounds
    them), it gives the artifact's choice in every round (docs/sia-artifact.md)."""
    from cylp.cy import CyClpSimplex
    from cylp.py.modeling.CyLPModel import CyLPArray, CyLPModel

    n, m = costs.shape
    if n * m == 0:
        return [None] * n
    c, a_eq, b_eq, a_le, b_le = standard_form(costs, gpus, column_type, caps, current, pinned)
    model = CyLPModel()
    x = model.addVariable("x", n * m)
    if a_eq.shape[0]:
        model += a_eq * x == CyLPArray(b_eq)
    model += a_le * x <= CyLPArray(b_le)
    model.objective = c
    simplex = CyClpSimplex(model)
    simplex.logLevel = 0
    simplex.setInteger(x)
    cbc = simplex.getCbcModel()
    cbc.logLevel = 0
    cbc.numberThreads = 8  # the artifact's ``sia_solver_num_threads``
    cbc.allowablePercentageGap = 1e-4 * 100  # ``sia_solver_thresh``
    cbc.maximumSeconds = time_limit
    cbc.solve()
    values = np.asarray(cbc.primalVariableSolution["x"]).reshape(m, n)
    chosen: list[int | None] = []
    for j in range(n):
        on = np.flatnonzero(values[:, j] > 0.5)
        chosen.append(int(on[0]) if on.size else None)
    return chosen


def solve_highs(
    jobs: Sequence[Any], costs: Sequence[np.ndarray], caps: Mapping[str, float], time_limit: float
) -> dict[str, Any]:
    """The chosen option per job id (absent: no GPUs). Each job has ``job_id``, ``options``
    (each with ``gpu_type`` and ``gpus``), ``current`` and ``pinned``; ``costs[i]`` holds
    one cost per option of ``jobs[i]``; ``caps``: GPUs per type."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array

    cost: list[float] = []
    var_job: list[int] = []
    var_opt: list[Any] = []
    lower: list[float] = []
    for i, (job, job_costs) in enumerate(zip(jobs, costs, strict=True)):
        for k, (option, c) in enumerate(zip(job.options, job_costs, strict=True)):
            cost.append(float(c))
            var_job.append(i)
            var_opt.append(option)
            lower.append(1.0 if job.pinned and k == job.current else 0.0)
    if not cost:
        return {}
    n = len(cost)
    a_job = coo_array((np.ones(n), (var_job, np.arange(n))), shape=(len(jobs), n)).tocsr()
    type_names = sorted(caps)
    rows = [type_names.index(o.gpu_type) for o in var_opt]
    a_gpu = coo_array(([float(o.gpus) for o in var_opt], (rows, np.arange(n))), shape=(len(type_names), n)).tocsr()
    res = milp(
        np.array(cost),
        constraints=[LinearConstraint(a_job, 0, 1), LinearConstraint(a_gpu, 0, [caps[t] for t in type_names])],
        integrality=np.ones(n),
        bounds=Bounds(np.array(lower), 1),
        options={"time_limit": time_limit, "mip_rel_gap": 1e-4},
    )
    chosen: dict[str, Any] = {}
    if res.x is not None:
        for v in np.flatnonzero(res.x > 0.5):
            chosen[jobs[var_job[v]].job_id] = var_opt[v]
    return chosen


def solve_knapsack(jobs: Sequence[Any], costs: Sequence[np.ndarray], total: int) -> dict[str, Any]:
    """One GPU type (``solver=highs``): the program is a multiple-choice knapsack over GPU
    counts, solved exactly by :func:`shapeshift.policies.goodput.pollux.solve`
    (deterministic, no time limit); of equal optima, the one using the most GPUs."""
    from shapeshift.policies.goodput.pollux import solve

    utilities, picks = [], []
    for job, job_costs in zip(jobs, costs, strict=True):
        u = np.full(total + 1, -np.inf)
        u[0] = -np.inf if job.pinned else 0.0
        best: dict[int, int] = {}
        for k, (option, c) in enumerate(zip(job.options, job_costs, strict=True)):
            if option.gpus > total or (job.pinned and k != job.current):
                continue
            if -c > u[option.gpus]:
                u[option.gpus] = -c
                best[option.gpus] = k
        utilities.append(u)
        picks.append(best)
    counts = solve(utilities, total, prefer_more=True)
    return {job.job_id: job.options[best[r]] for job, best, r in zip(jobs, picks, counts, strict=True) if r > 0}
