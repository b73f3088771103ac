"""Choose which configurations to profile so a new model's fit is well determined.

Two layers, so the choice is both complete and informative:

* **Coverage quotas** (hard): one run of every plan family the model can run, and three
  ZeRO-Offload runs when Offload is feasible, because only Offload runs identify
  ``k_opt_off``/``k_off``/``k_swap`` (:data:`~shapeshift.perf.fitting.MIN_OFFLOAD_POINTS`).
  While a family is short of its quota, only that family's candidates are eligible.
* **Spread and size coverage** (hard, at the end): when the runs left are only just
  enough to cover every spread the pool offers (single node, even, uneven) or
  :data:`MIN_GPU_COUNTS` different GPU counts, only candidates that add a missing one
  are eligible (as long as one exists within the family constraint).
* **Information** (soft): among eligible candidates, the one that most increases the
  determinant of the fit's information matrix ``sum_i j_i j_i^T`` (a greedy D-optimal
  design), where ``j_i`` is the sensitivity of the candidate's log iteration time to
  the log of each coefficient. A candidate whose time depends on coefficients that the
  chosen runs leave undetermined adds the most; one that repeats what is known adds
  little. A small bonus for a GPU count and for a spread (single node, even, uneven) not
  yet covered keeps the runs spanning the placements a scheduler will ask about.

The sensitivities depend on the coefficients, which are unknown before profiling. The
planner averages the log-determinant gain over :data:`PRIOR_EFFICIENCIES`: the documented
default coefficients with the forward time set from the model's FLOPs at several
hardware efficiencies (``2 x parameters x sequence length`` FLOPs per sample, Kaplan et
al. 2020, over the GPU's dense half-precision peak). Compute-bound and
communication-bound guesses then both shape the choice, and one wrong guess cannot
dominate it.

Greedy over a sorted pool with a strict comparison: the same inputs always give the same
list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from shapeshift.model import ExecutionPlan, NodeSpec
from shapeshift.perf.arch import ModelArch
from shapeshift.perf.measurements import format_placement, plan_family
from shapeshift.perf.memory import fits_memory
from shapeshift.perf.rubick import A800_NODE, PARAM_SPECS, Config, RubickParams, build_features, predict_times

OFFLOAD_RUNS = 3
#: Fractions of peak FLOPs at which the planner imagines the model's forward pass runs.
PRIOR_EFFICIENCIES = (0.15, 0.3, 0.5)
#: Dense fp16/bf16 tensor-core peak (TFLOP/s) per GPU type, from NVIDIA's data sheets;
#: other types fall back to the A100-class figure.
PEAK_TFLOPS = {"A800": 312.0, "A100": 312.0, "H800": 989.0, "H100": 989.0, "H200": 989.0, "V100": 125.0}
DEFAULT_PEAK_TFLOPS = 312.0
#: Information-matrix ridge: the fit's weak prior, so a determinant exists before there
#: are as many runs as coefficients.
RIDGE = 1e-2
#: Bonus (in log-determinant units) for a GPU count, and for a spread, not yet chosen.
COVERAGE_BONUS = 1.0
#: Different GPU counts the chosen runs must span (fewer when the pool has fewer).
MIN_GPU_COUNTS = 3
_T_FWD = [i for i, s in enumerate(PARAM_SPECS) if s.name in ("t_fwd", "t_fwd_3d")]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A configuration that could be profiled."""

    plan: ExecutionPlan
    placement: tuple[int, ...]

    @property
    def family(self) -> str:
        return plan_family(self.plan)

    @property
    def gpus(self) -> int:
        return sum(self.placement)

    @property
    def spread(self) -> str:
        """``single`` node, ``even`` (same GPUs on every node) or ``uneven``."""
        if len(self.placement) == 1:
            return "single"
        return "even" if len(set(self.placement)) == 1 else "uneven"

    def key(self) -> tuple[object, ...]:
        p = self.plan
        return (self.family, self.gpus, format_placement(self.placement), p.pp, p.tp, p.dp)


def prior_coefficients(arch: ModelArch, node: NodeSpec) -> list[np.ndarray]:
    """Default coefficients with a FLOPs-based forward time, one set per prior efficiency."""
    peak = PEAK_TFLOPS.get(node.gpu_type, DEFAULT_PEAK_TFLOPS) * 1e12
    flops_per_sample = 2.0 * arch.params * arch.seq_len
    out = []
    for efficiency in PRIOR_EFFICIENCIES:
        theta = RubickParams().as_array()
        theta[_T_FWD] = flops_per_sample / (efficiency * peak)
        out.append(theta)
    return out


def log_sensitivities(arch: ModelArch, pool: Sequence[Candidate], theta: np.ndarray, node: NodeSpec) -> np.ndarray:
    """``d log T / d log theta`` per candidate (rows) and coefficient (columns), by finite differences."""
    features = build_features([Config(arch, c.plan, c.placement, node=node) for c in pool])
    base = np.log(predict_times(theta, features))
    step = 1e-4
    jac = np.empty((len(pool), len(theta)))
    for i in range(len(theta)):
        moved = theta.copy()
        moved[i] *= np.exp(step)
        jac[:, i] = (np.log(predict_times(moved, features)) - base) / step
    return jac


def _quotas(pool: Sequence[Candidate], offload_runs: int = OFFLOAD_RUNS) -> dict[str, int]:
    families = sorted({c.family for c in pool})
    offload_ok = sum(c.family == "zero-offload" for c in pool) >= offload_runs
    return {f: offload_runs if f == "zero-offload" and offload_ok else 1 for f in families}


def _cover_the_rest(pool: Sequence[Candidate], chosen: list[int], eligible: np.ndarray, left: int) -> np.ndarray:
    """Narrow ``eligible`` to runs adding a missing spread or GPU count once ``left`` runs are only just enough."""
    spreads = {pool[i].spread for i in chosen}
    missing_spreads = {c.spread for c in pool} - spreads
    if missing_spreads and left <= len(missing_spreads):
        narrowed = eligible & np.array([c.spread in missing_spreads for c in pool])
        if narrowed.any():
            eligible = narrowed
    counts = {pool[i].gpus for i in chosen}
    missing_counts = min(MIN_GPU_COUNTS, len({c.gpus for c in pool})) - len(counts)
    if missing_counts > 0 and left <= missing_counts:
        narrowed = eligible & np.array([c.gpus not in counts for c in pool])
        if narrowed.any():
            eligible = narrowed
    return eligible


def plan_profiling(
    arch: ModelArch,
    candidates: Sequence[Candidate],
    budget: int = 7,
    node: NodeSpec = A800_NODE,
    check_memory: bool = True,
    offload_runs: int = OFFLOAD_RUNS,
    coverage_bonus: float = COVERAGE_BONUS,
) -> list[Candidate]:
    """Pick ``budget`` candidates: family quotas first, then the most informative runs.

    Candidates that do not fit in memory are skipped when ``check_memory`` (measured rows
    evidently fit, so the validation passes ``False`` for them). ``offload_runs`` and
    ``coverage_bonus`` are the planner's hyper-parameters, exposed so they can be chosen
    by leave-one-model-out (``shapeshift.perf.heldout``).
    """
    if budget < 1:
        raise ValueError("budget must be >= 1")
    pool = sorted(
        (c for c in candidates if not check_memory or fits_memory(arch, c.plan, c.placement, node)),
        key=Candidate.key,
    )
    if not pool:
        return []
    quota = _quotas(pool, offload_runs)
    jacobians = [log_sensitivities(arch, pool, theta, node) for theta in prior_coefficients(arch, node)]
    inverses = [np.eye(len(PARAM_SPECS)) / RIDGE for _ in jacobians]
    left = np.ones(len(pool), dtype=bool)
    chosen: list[int] = []
    while left.any() and len(chosen) < budget:
        counts = {f: sum(pool[i].family == f for i in chosen) for f in quota}
        short = {f for f, q in quota.items() if counts[f] < q}
        eligible = left & np.array([not short or c.family in short for c in pool])
        eligible = _cover_the_rest(pool, chosen, eligible, budget - len(chosen))
        # log det(M + j j^T) - log det(M) = log(1 + j^T M^-1 j)  (matrix determinant lemma)
        gain = np.mean(
            [np.log1p(np.einsum("ij,jk,ik->i", jac, inv, jac)) for jac, inv in zip(jacobians, inverses, strict=True)],
            axis=0,
        )
        gpus = {pool[i].gpus for i in chosen}
        spreads = {pool[i].spread for i in chosen}
        gain += coverage_bonus * np.array([(c.gpus not in gpus) + (c.spread not in spreads) for c in pool])
        gain[~eligible] = -np.inf
        best = int(np.argmax(gain))  # first maximum: deterministic on the sorted pool
        chosen.append(best)
        left[best] = False
        for k, jac in enumerate(jacobians):  # Sherman-Morrison update of M^-1
            inv, j = inverses[k], jac[best]
            u = inv @ j
            inverses[k] = inv - np.outer(u, u) / (1.0 + j @ u)
    return [pool[i] for i in chosen]
