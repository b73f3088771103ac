"""The Pollux/AdaptDL throughput model, fitted with scipy, and the goodput it implies.

Per-step time of data-parallel SGD on ``replicas`` GPUs over ``nodes`` nodes at an
atomic (per-GPU) batch ``b`` with ``s`` accumulation steps (Pollux, OSDI'21 §3.2;
artifact ``simulator/goodput.py``):

* compute: ``T_grad(b) = alpha_c + beta_c * b``;
* synchronisation: ``T_sync = alpha + beta * max(replicas - 2, 0)`` with
  ``(alpha_n, beta_n)`` when the job spans nodes, ``(alpha_r, beta_r)`` when it spans
  GPUs of one node, 0 on a single GPU;
* overlap: ``T_iter = (T_grad^gamma + T_sync^gamma)^(1/gamma)``, ``gamma`` in [1, 10];
* a step with ``s`` accumulation micro-steps takes ``s * T_grad + T_iter``.

Fitting minimises the artifact's objective (``_obj_fn``): root-mean-square log error of
the compute time (``step - sync`` as measured) plus that of the step time, a small pull
of ``gamma`` towards 1 and of the retrogression terms towards 0, from a fixed start with
fixed bounds (``scipy.optimize.minimize``, L-BFGS-B): same rows, same parameters.

Goodput = throughput x statistical efficiency (:func:`..profiles.efficiency`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from shapeshift.perf.pollux.profiles import Row, efficiency


class PerfParams(NamedTuple):
    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float


def _network(p: np.ndarray, nodes: np.ndarray, replicas: np.ndarray) -> np.ndarray:
    alpha = np.where(nodes > 1, p[2], np.where(replicas > 1, p[4], 1e-8))
    beta = np.where(nodes > 1, p[3], np.where(replicas > 1, p[5], 1e-8))
    return alpha + beta * np.maximum(replicas - 2, 1e-8)


def _log_iter(p: np.ndarray, grad: np.ndarray, net: np.ndarray) -> np.ndarray:
    g = p[6]
    return np.log(grad**g + net**g) / g


def step_time(params: PerfParams, nodes, replicas, atomic_bsz, accum=0):  # type: ignore[no-untyped-def]
    """Predicted seconds per optimiser step (vectorised over its arguments)."""
    p = np.asarray(params, dtype=float)
    nodes, replicas = np.asarray(nodes, float), np.asarray(replicas, float)
    grad = p[0] + p[1] * np.asarray(atomic_bsz, float)
    net = _network(p, nodes, replicas)
    return np.asarray(accum, float) * grad + np.exp(_log_iter(p, grad, net))


def _objective(  # type: ignore[no-untyped-def]
    p: np.ndarray, bsz, log_compute, log_step, inter, intra, extra
) -> tuple[float, np.ndarray]:
    """The artifact's fitting objective and its exact gradient (L-BFGS-B needs no finite
    differences: same optimum, an eighth of the evaluations). What depends on the rows
    only (logs of the measured times, the kind of each row) comes computed once per fit.
    A fit evaluates this a few hundred times on a handful of rows, so numpy's per-call
    cost dominates: each sum is one ``np.add.reduce`` (what ``np.sum`` runs, in the same
    order), each log is taken once, and a mean is that sum over the row count, as
    ``np.mean`` divides."""
    n = len(bsz)
    grad = p[0] + p[1] * bsz
    alpha = np.where(inter, p[2], np.where(intra, p[4], 1e-8))
    net = alpha + np.where(inter, p[3], np.where(intra, p[5], 1e-8)) * extra
    g = p[6]
    gg, ng = grad**g, net**g
    total = gg + ng
    log_total = np.log(total)
    log_grad = np.log(grad)
    log_iter = log_total / g
    d1 = log_grad - log_compute
    d2 = log_iter - log_step
    add = np.add.reduce
    err1 = math.sqrt(float(add(d1**2)) / n)
    err2 = math.sqrt(float(add(d2**2)) / n)
    value = err1 + err2 + 1e-3 * (g - 1) ** 2 + 1e-2 * ((p[3] / p[2]) ** 2 + (p[5] / p[4]) ** 2)
    w1 = d1 / grad / (n * max(err1, 1e-300))
    w2 = d2 / (n * max(err2, 1e-300))
    wg = w2 * (gg / grad / total)
    wn = w2 * (ng / net / total)
    dl_dg = (gg * log_grad + ng * np.log(net)) / total / g - log_total / g**2
    jac = np.array(
        (
            0.0 + add(w1) + add(wg),
            0.0 + add(w1 * bsz) + add(wg * bsz),
            0.0 + add(wn * inter) - 2e-2 * p[3] ** 2 / p[2] ** 3,
            0.0 + add(wn * inter * extra) + 2e-2 * p[3] / p[2] ** 2,
            0.0 + add(wn * intra) - 2e-2 * p[5] ** 2 / p[4] ** 3,
            0.0 + add(wn * intra * extra) + 2e-2 * p[5] / p[4] ** 2,
            0.0 + (add(w2 * dl_dg) + 2e-3 * (g - 1)),
        )
    )
    return value, jac


@functools.cache
def _blas():  # type: ignore[no-untyped-def]
    """The BLAS libraries loaded once scipy's optimiser is (its own OpenBLAS among them).
    L-BFGS-B's step on seven parameters makes BLAS calls far too small to share out:
    with a pool of threads each call waits on the others (about 10 ms a call on two busy
    cores, against microseconds on one thread), so a fit runs them on one thread."""
    import scipy.optimize  # noqa: F401  (its BLAS must be loaded to be found)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def fit_perf_params(rows: list[Row], tol: float | tuple[float, float] | None = None) -> PerfParams:
    """Fit the seven parameters to measured rows (deterministic: fixed start and bounds,
    the artifact's ``fit_perf_params`` with its rules for missing kinds of rows). ``tol``:
    the optimiser's tolerance, one figure for both of L-BFGS-B's stopping tests or a pair
    (``ftol``, ``gtol``) (default: near machine precision, for the one fit per
    application); the Sia artifact fits each job's model with 1e-5 (``job.py``), the
    Pollux artifact with scipy's defaults (:mod:`.online`)."""
    from scipy.optimize import minimize

    nodes = np.array([r.nodes for r in rows], float)
    replicas = np.array([r.replicas for r in rows], float)
    bsz = np.array([r.local_bsz for r in rows], float)
    step = np.array([r.step for r in rows], float)
    compute = np.maximum(step - np.array([r.sync for r in rows], float), 1e-6)
    start = [1e-1, 1e-2] * 3 + [1.0 + 1e-3]
    lower = [1e-8, 1e-8] * 3 + [1.0]
    upper = [np.inf, np.inf] * 3 + [10.0]
    fixed = set()
    if len(np.unique(bsz)) == 1:
        start[0] = lower[0] = upper[0] = float(np.mean(compute)) / 2
        fixed.add(0)
    if not np.any(nodes > 1):
        fixed |= {2, 3}
    if not np.any((nodes == 1) & (replicas > 1)):
        fixed |= {4, 5}
    if not np.any(replicas > 2):
        fixed |= {3, 5}
    for i in fixed - {0}:
        start[i] = upper[i] = lower[i]
    bounds = list(zip(lower, upper, strict=True))
    kinds = (nodes > 1, (nodes == 1) & (replicas > 1), np.maximum(replicas - 2, 1e-8))
    args = (bsz, np.log(compute), np.log(step), *kinds)
    ftol, gtol = (tol, tol) if isinstance(tol, float | int) else tol or (1e-12, 1e-10)
    with _blas().limit(limits=1, user_api="blas"):
        result = minimize(
            _objective,
            np.array(start),
            args=args,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": 2000, "ftol": ftol, "gtol": gtol},
        )
    p = [float(v) for v in result.x]
    if not np.any(nodes > 1):  # the artifact's prior: crossing nodes costs at least as much
        p[2], p[3] = max(p[2], p[4] * 1.1), max(p[3], p[5] * 1.1)
    return PerfParams(*p)


def relative_errors(params: PerfParams, rows: list[Row]) -> np.ndarray:
    """|predicted - measured| / measured step time per row."""
    pred = step_time(params, [r.nodes for r in rows], [r.replicas for r in rows], [r.local_bsz for r in rows])
    true = np.array([r.step for r in rows])
    return np.abs(pred - true) / true


@dataclass(frozen=True)
class BatchLimits:
    init: int
    max_size: int
    min_local: int
    max_local: int


class GoodputGrid:
    """Candidate batches and their step times for a set of (nodes, replicas) columns,
    computed once; :meth:`evaluate` then only applies a job's gradient statistics.

    As AdaptDL's ``GoodputFunction.optimize`` with accumulation: 50 global batches in
    geometric steps from ``max(init, min_local * replicas)`` to ``max_size``; local batches
    above ``max_local`` accumulate; one GPU above the initial batch accumulates at least
    once. A fixed-batch job has one candidate, its own batch (``limits.init``).

    ``cap_total``: a candidate whose per-GPU batch, rounded up, takes the global batch past
    ``max_size`` is dropped, and so are all where ``min_local * replicas`` passes it. Without
    it, AdaptDL's rule (``adaptdl/goodput.py``; the Sia artifact's ``goodput.py``,
    ``GoodputFunction.optimize``): only the per-GPU batch is checked, so the rounded-up top
    candidate counts and, past ``max_size``, the candidates run from the smallest batch
    the GPUs can hold down to ``max_size`` (that smallest one valid).
    """

    def __init__(  # type: ignore[no-untyped-def]
        self, params: PerfParams, limits: BatchLimits, nodes, replicas, adaptive: bool = True, cap_total: bool = True
    ):
        nodes = np.atleast_1d(np.asarray(nodes, float))
        replicas = np.atleast_1d(np.asarray(replicas, float))
        eps = 1e-8
        lo = np.maximum(limits.init, limits.min_local * replicas)
        if adaptive:
            top = np.maximum(limits.max_size, lo) if cap_total else np.full_like(lo, float(limits.max_size))
            batch = np.geomspace(lo, top, 50)
        else:
            batch = np.full((1, len(replicas)), float(limits.init))
        local = batch / replicas
        accum = np.ceil(local / limits.max_local - eps) - 1
        accum = np.where((replicas == 1) & (local > limits.init + eps), np.maximum(accum, 1), accum)
        atomic = np.ceil(local / (accum + 1) - eps)
        self.total = replicas * atomic * (accum + 1)
        self.throughput = self.total / step_time(params, nodes, replicas, atomic, accum)
        if adaptive:
            ok = (atomic >= limits.min_local) & (atomic <= limits.max_local)
            if cap_total:
                ok &= self.total <= limits.max_size * (1 + eps)
        else:
            ok = atomic >= 1
        self.throughput = np.where(ok & (replicas > 0), self.throughput, 0.0)
        self.scale = self.total / limits.init
        self._cols = np.arange(self.total.shape[1])

    def evaluate(self, grad: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        """(best goodput in examples/s at the initial batch, its global batch) per column."""
        sqr, var = grad
        denom = var / self.scale + sqr
        gain = np.where(denom > 0, (var + sqr) / np.where(denom > 0, denom, 1.0), 1.0)
        good = self.throughput * gain / self.scale
        idx = np.argmax(good, axis=0)
        return good[idx, self._cols], self.total[idx, self._cols].astype(int)


def best_batch(  # type: ignore[no-untyped-def]
    params: PerfParams,
    grad: tuple[float, float],
    limits: BatchLimits,
    nodes,
    replicas,
    adaptive: bool = True,
    cap_total: bool = True,
):
    """Best goodput per (nodes, replicas) and the batch that reaches it (see :class:`GoodputGrid`)."""
    return GoodputGrid(params, limits, nodes, replicas, adaptive, cap_total).evaluate(grad)


__all__ = [
    "BatchLimits",
    "GoodputGrid",
    "PerfParams",
    "best_batch",
    "efficiency",
    "fit_perf_params",
    "relative_errors",
    "step_time",
]
