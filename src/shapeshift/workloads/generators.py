"""Seeded synthetic load shaped like the Philly trace: Poisson and bursty arrivals.

Researchers need controlled load: the same job mix at a chosen arrival rate, or the
same mix with periodic bursts, to see how a policy behaves as load rises. Job sizes and
durations are drawn from an empirical distribution fitted to the 82k-job Philly trace
(``shapeshift/data/philly_fit.json``, produced by ``scripts/fit_philly_distribution.py``):
the size pmf of the trace, and per size an empirical quantile function of
ln(duration), because Philly durations depend strongly on size (median 19 min at 1 GPU,
6.6 h at 8 GPUs) and are far from log-normal.

* ``poisson``: exponential inter-arrival gaps at ``rate`` jobs/hour.
* ``bursty`` (the Blox bursty-load scenario): every ``period`` hours a burst of
  ``length`` hours at ``k`` x the base rate (bursts start at 0, period, 2 x period, ...),
  generated exactly as a non-homogeneous Poisson process by inverting its cumulative
  intensity. Burst jobs are short: their durations are drawn from the lower
  ``short_quantile`` of their size's duration distribution.
* Models (optional): ``uniform`` draws each job's model uniformly from the list;
  ``size-aware`` takes the list as ordered from smallest to largest model and gives the
  k-th of n equal-count bands of jobs, ranked by GPU-hours, the k-th model (the way the
  Pollux workload generator maps Philly jobs of growing GPU time to growing models).

Every random draw comes from one ``numpy`` generator seeded by ``seed`` and is made in a
fixed order, so a seed gives the same workload on every machine.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal

import numpy as np
import pandas as pd

from shapeshift.errors import InputError
from shapeshift.workloads.workload import MAX_JOBS, Workload

ModelAssignment = Literal["uniform", "size-aware"]
MODEL_ASSIGNMENTS: tuple[str, ...] = ("uniform", "size-aware")


@dataclass(frozen=True)
class SizeDuration:
    """A fitted job-size pmf and, per size group, quantiles of ln(duration)."""

    sizes: np.ndarray
    probabilities: np.ndarray
    levels: np.ndarray
    group_of_size: dict[int, int]
    log_quantiles: tuple[np.ndarray, ...]
    source: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> SizeDuration:
        sizes = np.asarray(data["sizes"]["gpus"], dtype=np.int64)
        probs = np.asarray(data["sizes"]["probabilities"], dtype=float)
        groups = data["duration_groups"]
        group_of_size = {int(g): i for i, group in enumerate(groups) for g in group["gpus"]}
        missing = [int(s) for s in sizes if int(s) not in group_of_size]
        if missing:
            raise ValueError(f"sizes {missing} have no duration group")
        return cls(
            sizes=sizes,
            probabilities=probs / probs.sum(),
            levels=np.asarray(data["quantile_levels"], dtype=float),
            group_of_size=group_of_size,
            log_quantiles=tuple(np.asarray(g["log_quantiles"], dtype=float) for g in groups),
            source=data.get("source", {}).get("script", ""),
        )

    def limited(self, max_gpus: int | None) -> SizeDuration:
        """The same distribution conditioned on jobs of at most ``max_gpus`` GPUs."""
        if max_gpus is None:
            return self
        keep = self.sizes <= max_gpus
        if not keep.any():
            raise InputError(f"no job size of the fitted distribution fits in {max_gpus} GPUs", field="max_gpus")
        probs = self.probabilities[keep]
        return SizeDuration(
            self.sizes[keep], probs / probs.sum(), self.levels, self.group_of_size, self.log_quantiles, self.source
        )

    def sample_sizes(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.choice(self.sizes, size=n, p=self.probabilities).astype(np.int64)

    def durations(self, sizes: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Durations (s) at quantile levels ``u`` (in [0, 1]) of each job's size group."""
        out = np.empty(len(sizes), dtype=float)
        groups = np.fromiter((self.group_of_size[int(s)] for s in sizes), dtype=np.int64, count=len(sizes))
        for g, quantiles in enumerate(self.log_quantiles):
            sel = groups == g
            if sel.any():
                out[sel] = np.exp(np.interp(u[sel], self.levels, quantiles))
        return out


@functools.cache
def philly_fit() -> SizeDuration:
    """The built-in distribution fitted to the Philly trace."""
    text = resources.files("shapeshift").joinpath("data/philly_fit.json").read_text()
    return SizeDuration.from_dict(json.loads(text))


def _check(jobs: int, rate: float) -> None:
    if jobs < 0:
        raise InputError(f"jobs must be >= 0, got {jobs}", field="jobs")
    if jobs > MAX_JOBS:
        raise InputError(f"jobs must be at most {MAX_JOBS:,}, got {jobs}", field="jobs")
    if not rate > 0:
        raise InputError(f"rate must be > 0 jobs/hour, got {rate}", field="rate")


def _assign_models(
    rng: np.random.Generator, models: Sequence[str], assignment: str, gpu_hours: np.ndarray
) -> np.ndarray:
    n = len(gpu_hours)
    if not models:
        return np.full(n, "", dtype=object)
    if assignment not in MODEL_ASSIGNMENTS:
        raise InputError(
            f"unknown model assignment {assignment!r}; expected {', '.join(MODEL_ASSIGNMENTS)}", field="assignment"
        )
    names = np.asarray(list(models), dtype=object)
    if assignment == "uniform":
        return names[rng.integers(0, len(names), size=n)]
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(gpu_hours, kind="stable")] = np.arange(n)
    return names[(rank * len(names)) // max(n, 1)]


def _frame(
    submit: np.ndarray,
    sizes: np.ndarray,
    durations: np.ndarray,
    models: np.ndarray,
) -> pd.DataFrame:
    n = len(submit)
    return pd.DataFrame(
        {
            "job_id": [f"j{i:06d}" for i in range(n)],
            "submit_time": np.round(submit, 3),
            "num_gpus": sizes,
            "duration": np.round(np.maximum(durations, 1.0), 1),
            "model": models,
        }
    )


def poisson(
    jobs: int,
    rate: float,
    *,
    seed: int = 0,
    models: Sequence[str] = (),
    assignment: str = "uniform",
    max_gpus: int | None = None,
    distribution: SizeDuration | None = None,
    name: str | None = None,
) -> Workload:
    """``jobs`` jobs arriving as a Poisson process at ``rate`` jobs/hour (first at t=0);
    sizes and durations from the fitted Philly distribution (conditioned on at most
    ``max_gpus`` GPUs when given)."""
    _check(jobs, rate)
    dist = (distribution or philly_fit()).limited(max_gpus)
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(3600.0 / rate, size=jobs)
    submit = np.cumsum(gaps) - (gaps[0] if jobs else 0.0)
    sizes = dist.sample_sizes(rng, jobs)
    durations = dist.durations(sizes, rng.random(jobs))
    assigned = _assign_models(rng, models, assignment, sizes * durations)
    return Workload.from_frame(name or f"poisson-{rate:g}ph-seed{seed}", _frame(submit, sizes, durations, assigned))


@dataclass(frozen=True)
class Bursts:
    """Every ``period`` hours, ``length`` hours at ``factor`` x the base rate."""

    period: float = 24.0
    length: float = 2.0
    factor: float = 4.0
    short_quantile: float = 0.5

    def __post_init__(self) -> None:
        if not self.period > 0:
            raise InputError(f"burst period must be > 0 hours, got {self.period}", field="period")
        if not 0 < self.length <= self.period:
            raise InputError(
                f"burst length must be > 0 and <= the period ({self.period} h), got {self.length}", field="length"
            )
        if not self.factor >= 1:
            raise InputError(f"burst factor must be >= 1, got {self.factor}", field="factor")
        if not 0 < self.short_quantile <= 1:
            raise InputError(f"short quantile must be in (0, 1], got {self.short_quantile}", field="short_quantile")


def burst_arrivals(cumulative: np.ndarray, rate: float, bursts: Bursts) -> tuple[np.ndarray, np.ndarray]:
    """Arrival times (s) and in-burst flags for unit-rate cumulative intensities.

    The intensity is ``factor x rate`` during ``[j P, j P + L)`` and ``rate`` otherwise
    (per hour); an arrival with cumulative intensity ``s`` happens where the integrated
    intensity reaches ``s`` (time-rescaling theorem), which is exact and vectorised.
    """
    period, length = bursts.period, bursts.length
    burst_mass = bursts.factor * rate * length
    per_period = burst_mass + rate * (period - length)
    whole = np.floor(cumulative / per_period)
    rest = cumulative - whole * per_period
    in_burst = rest < burst_mass
    hours = whole * period + np.where(in_burst, rest / (bursts.factor * rate), length + (rest - burst_mass) / rate)
    return hours * 3600.0, in_burst


def bursty(
    jobs: int,
    rate: float,
    bursts: Bursts = Bursts(),
    *,
    seed: int = 0,
    models: Sequence[str] = (),
    assignment: str = "uniform",
    max_gpus: int | None = None,
    distribution: SizeDuration | None = None,
    name: str | None = None,
) -> Workload:
    """``jobs`` jobs at base ``rate`` jobs/hour with periodic bursts of short jobs."""
    _check(jobs, rate)
    dist = (distribution or philly_fit()).limited(max_gpus)
    rng = np.random.default_rng(seed)
    cumulative = np.cumsum(rng.exponential(1.0, size=jobs))
    if jobs:
        cumulative -= cumulative[0]
    submit, in_burst = burst_arrivals(cumulative, rate, bursts)
    sizes = dist.sample_sizes(rng, jobs)
    u = rng.random(jobs)
    u = np.where(in_burst, u * bursts.short_quantile, u)
    durations = dist.durations(sizes, u)
    assigned = _assign_models(rng, models, assignment, sizes * durations)
    frame = _frame(submit, sizes, durations, assigned)
    label = name or f"bursty-{rate:g}ph-{bursts.factor:g}x{bursts.length:g}h-every{bursts.period:g}h-seed{seed}"
    return Workload.from_frame(label, frame)
