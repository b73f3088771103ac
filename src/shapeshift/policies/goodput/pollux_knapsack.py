"""The exact search of :mod:`.pollux`: the power mean's per-job terms and a knapsack
over GPU counts that maximises their sum."""

from __future__ import annotations

import numpy as np

EPS = 1e-3


def power_utility(x: np.ndarray, p: float) -> np.ndarray:
    """Per-job term whose sum orders allocations as the power mean of ``x + 1e-3`` does."""
    if p == 0:
        return np.log(np.maximum(x, EPS))
    return -((x + EPS) ** p) if p < 0 else (x + EPS) ** p


def solve(utilities: list[np.ndarray], total: int, prefer_more: bool = False) -> list[int]:
    """GPU count per job maximising ``sum_j utilities[j][r_j]`` with ``sum r_j <= total``
    (exact knapsack). Ties go to fewer GPUs, or with ``prefer_more`` to more (an optimum
    that leaves fewer GPUs idle)."""
    best = np.full(total + 1, -np.inf)
    best[0] = 0.0
    choice = np.zeros((len(utilities), total + 1), dtype=np.int64)
    for j, u in enumerate(utilities):
        r_max = min(len(u) - 1, total)
        cand = np.full((r_max + 1, total + 1), -np.inf)
        for r in np.flatnonzero(np.isfinite(u[: r_max + 1])):  # Sia's options are sparse
            cand[r, r:] = best[: total + 1 - r] + u[r]
        if prefer_more:
            choice[j] = r_max - np.argmax(cand[::-1], axis=0)
        else:
            choice[j] = np.argmax(cand, axis=0)
        best = cand[choice[j], np.arange(total + 1)]
    g = total - int(np.argmax(best[::-1])) if prefer_more else int(np.argmax(best))
    counts = [0] * len(utilities)
    for j in range(len(utilities) - 1, -1, -1):
        counts[j] = int(choice[j, g])
        g -= counts[j]
    return counts
