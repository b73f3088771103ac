"""Queue length and GPU utilization over time, from a run's job table and intervals.

Both are exact step functions, built by sweeping start/end events:

* queue length at ``t`` = jobs submitted and not completed (nor rejected) at ``t`` minus
  jobs holding GPUs at ``t``, so a preempted job waiting again counts as queued;
* GPU utilization at ``t`` = GPUs held at ``t`` / cluster GPUs.

GPU holding comes from ``intervals.csv``, which the runner records exactly (every
launch, preemption, reconfiguration and completion). For run directories without it
(written by ``shapeshift simulate``) each job is assumed to hold its GPUs from its first
start to its end: exact for jobs never preempted, an overestimate for the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Series:
    """A right-continuous step function: value ``values[i]`` on ``[times[i], times[i+1])``."""

    times: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class RunSeries:
    queue: Series
    utilization: Series
    #: "recorded" (from intervals.csv) or "approximate" (first start to end).
    source: str


def _steps(times: np.ndarray, deltas: np.ndarray) -> Series:
    if times.size == 0:
        return Series(np.zeros(1), np.zeros(1))
    order = np.argsort(times, kind="stable")
    t, c = times[order], np.cumsum(deltas[order])
    last_of_instant = np.r_[t[1:] != t[:-1], True]
    t, c = t[last_of_instant], c[last_of_instant]
    if t[0] > 0:
        t, c = np.r_[0.0, t], np.r_[0.0, c]
    return Series(t, np.round(c, 9))


def run_series(run_dir: Path, cluster_gpus: int) -> RunSeries:
    jobs = pd.read_csv(run_dir / "jobs.csv")
    jobs = jobs[jobs["status"] != "rejected"]
    intervals_path = run_dir / "intervals.csv"
    if intervals_path.is_file():
        intervals = pd.read_csv(intervals_path)
        starts, ends, gpus = (intervals[c].to_numpy(dtype=float) for c in ("start", "end", "gpus"))
        source = "recorded"
    else:
        held = jobs.dropna(subset=["first_start_time"])
        end_time = held["end_time"].fillna(held["end_time"].max()).to_numpy(dtype=float)
        starts, ends, gpus = held["first_start_time"].to_numpy(dtype=float), end_time, held["num_gpus"].to_numpy(float)
        source = "approximate"
    submit = jobs["submit_time"].to_numpy(dtype=float)
    done = jobs["end_time"].to_numpy(dtype=float)
    horizon = float(np.nanmax(np.r_[done, ends, submit])) if submit.size else 0.0
    done = np.where(np.isnan(done), horizon, done)
    queue = _steps(
        np.r_[submit, done, starts, ends],
        np.r_[np.ones(submit.size), -np.ones(done.size), -np.ones(starts.size), np.ones(ends.size)],
    )
    util = _steps(np.r_[starts, ends], np.r_[gpus, -gpus] / max(cluster_gpus, 1))
    return RunSeries(queue, util, source)
