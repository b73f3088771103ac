"""The building blocks of trace characterization: size buckets, the result type, and the
numeric helpers every section uses (robust medians and means, top-k shares, the exact
busy-GPU curve)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

#: Job-size buckets (inclusive GPU ranges) for the size distribution.
SIZE_BUCKETS: tuple[tuple[int, float, str], ...] = (
    (1, 1, "1"),
    (2, 2, "2"),
    (3, 4, "3-4"),
    (5, 8, "5-8"),
    (9, 16, "9-16"),
    (17, 32, "17-32"),
    (33, 64, "33-64"),
    (65, math.inf, ">64"),
)
TOP_USER_PERCENTS = (1, 5, 10)
#: Columns that may carry absolute submission times in a trace file, in the order tried.
TIME_COLUMNS = ("timestamp", "submit_time", "submission_time", "time")
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@dataclass
class Characterization:
    """``stats`` is what goes into ``stats.json``; ``curves`` holds the arrays the figures plot."""

    stats: dict[str, Any]
    curves: dict[str, Any] = field(default_factory=dict)

    @property
    def omitted(self) -> dict[str, str]:
        return self.stats["omitted"]


def json_ready(value: Any) -> Any:
    """``value`` with numpy scalars as Python numbers, floats rounded to 6 decimals and
    non-finite floats as ``None`` (so ``stats.json`` is valid, stable JSON)."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, np.generic):
        return json_ready(value.item())
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    return value


def median_or_none(values: np.ndarray) -> float | None:
    return float(np.median(values)) if values.size else None


def mean_or_none(values: np.ndarray) -> float | None:
    return float(np.mean(values)) if values.size else None


def duration_stats(values: np.ndarray) -> dict[str, Any]:
    return {
        "jobs": int(values.size),
        "median_s": median_or_none(values),
        "mean_s": mean_or_none(values),
        "p90_s": float(np.percentile(values, 90)) if values.size else None,
        "max_s": float(values.max()) if values.size else None,
    }


def size_bucket(gpus: pd.Series) -> pd.Series:
    labels = pd.Series("", index=gpus.index, dtype=object)
    for low, high, label in SIZE_BUCKETS:
        labels[(gpus >= low) & (gpus <= high)] = label
    return labels


def top_share(values: np.ndarray, percent: float) -> tuple[int, float]:
    """(k, share of the total held by the k largest values), ``k = max(1, ceil(p% x n))``."""
    n = values.size
    total = float(values.sum())
    if n == 0 or total <= 0:
        return 0, 0.0
    k = max(1, math.ceil(percent / 100.0 * n))
    top = np.sort(values)[::-1][:k]
    return k, float(top.sum()) / total


def busy_curve(
    start: np.ndarray, end: np.ndarray, gpus: np.ndarray, step: float = 3600.0
) -> tuple[np.ndarray, np.ndarray]:
    """Time-weighted mean GPUs in use per ``step``-second bin, from job intervals.

    Exact: the integral of the step function "GPUs in use" is piecewise linear between
    job starts and ends, so it is evaluated at the bin edges by interpolation.
    Returns (bin start times, mean GPUs in use).
    """
    ok = np.isfinite(start) & np.isfinite(end) & (end > start) & (gpus > 0)
    start, end, gpus = start[ok], end[ok], gpus[ok].astype(float)
    if start.size == 0:
        return np.zeros(0), np.zeros(0)
    times = np.concatenate([start, end])
    deltas = np.concatenate([gpus, -gpus])
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    level = np.cumsum(deltas)
    integral = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
    first = math.floor(times[0] / step) * step
    edges = np.arange(first, times[-1] + step, step)
    if edges[-1] < times[-1]:
        edges = np.append(edges, edges[-1] + step)
    at_edges = np.interp(edges, times, integral)
    return edges[:-1], np.diff(at_edges) / step


