"""Trace characterization: what a cluster's job log says about its workload.

Operators start from the job log to decide what to change: how long jobs run, how big
they are and who holds the GPU time, when work arrives (the diurnal pattern that makes
energy saving possible), how busy the GPUs are, how much each virtual cluster queues,
how much work ends cancelled or failed. The statistics follow the Helios study (Hu et
al., "Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU
Datacenters", SC'21), computed from whatever a trace carries:

* every trace has submit time, GPUs and duration (``Workload.frame``);
* ``state``, ``start_time``, ``end_time``, ``queue`` and ``user`` are used when present
  (Helios schema); a section a trace cannot support is left out and named in
  ``stats["omitted"]`` with the reason, never a crash.

Definitions (seconds unless named): GPU time = GPUs x duration; a CPU job is a job with
0 GPUs; the top p% users are the ``ceil(p/100 x users)`` users with the most GPU time
(at least one); queueing delay = ``queue`` column, else start - submit, else the delay
of a FIFO replay when a cluster is given. Utilization comes from start/end times when
the trace has them, else from the FIFO replay, else from the *ideal* demand curve (every
job runs from its submission for its duration, i.e. an infinitely large cluster); the
method used is recorded in ``stats["utilization"]["method"]``.

The sections live in ``trace_time`` (origin, timing, diurnal, utilization) and
``trace_jobs`` (durations, sizes, VCs, status, users); ``trace_basics`` holds what they
share.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from shapeshift.analysis.trace_basics import (
    SIZE_BUCKETS,
    TIME_COLUMNS,
    TOP_USER_PERCENTS,
    WEEKDAYS,
    Characterization,
    busy_curve,
    json_ready,
    top_share,
)
from shapeshift.analysis.trace_jobs import durations, job_size, per_vc, status, users
from shapeshift.analysis.trace_time import diurnal, fifo_replay, timing_of, trace_origin, utilization
from shapeshift.model import ClusterSpec
from shapeshift.workloads.workload import Workload

__all__ = [
    "SIZE_BUCKETS",
    "TIME_COLUMNS",
    "TOP_USER_PERCENTS",
    "WEEKDAYS",
    "Characterization",
    "busy_curve",
    "characterize",
    "fifo_replay",
    "json_ready",
    "top_share",
    "trace_origin",
]


def characterize(
    workload: Workload,
    *,
    origin: pd.Timestamp | None = None,
    cluster: ClusterSpec | None = None,
    cluster_label: str = "",
) -> Characterization:
    """Every statistic the trace supports. ``origin`` is the wall-clock time of
    ``submit_time == 0``; ``cluster`` enables a FIFO replay for traces without start/end
    times (queueing delay and utilization) and gives the capacity for utilization."""
    frame = workload.frame
    stats: dict[str, Any] = {"trace": workload.name, "jobs": len(frame), "omitted": {}}
    omitted: dict[str, str] = stats["omitted"]
    curves: dict[str, Any] = {}
    if frame.empty:
        for section in ("durations", "job_size", "diurnal", "utilization", "per_vc", "status", "users"):
            omitted[section] = "the trace has no jobs"
        return Characterization(stats, curves)

    gpus = frame["num_gpus"].to_numpy(dtype=np.int64)
    if "cpu_only" in frame.columns:
        # A CPU-only job of a mixed log counts as a 0-GPU job whatever GPU count it carries.
        gpus = np.where(frame["cpu_only"].fillna(False).to_numpy(dtype=bool), 0, gpus)
    duration = frame["duration"].to_numpy(dtype=float)
    known = np.isfinite(duration)
    gpu_time = np.where(known, gpus * np.nan_to_num(duration), 0.0)
    stats["origin"] = None if origin is None else origin.isoformat()
    stats["gpu_jobs"] = int((gpus > 0).sum())
    stats["cpu_jobs"] = int((gpus == 0).sum())
    stats["total_gpu_hours"] = float(gpu_time.sum()) / 3600.0
    stats["span_s"] = float(frame["submit_time"].max() - frame["submit_time"].min())

    timing = timing_of(workload, cluster, cluster_label)
    stats["timing_source"] = timing.source

    durations(stats, curves, gpus, duration, known, omitted)
    job_size(stats, curves, gpus, gpu_time, omitted)
    diurnal(stats, curves, frame, gpus, origin, omitted)
    utilization(stats, curves, frame, gpus, timing, cluster, origin, omitted)
    per_vc(stats, curves, frame, gpu_time, timing, omitted)
    status(stats, curves, frame, gpus, gpu_time, omitted)
    users(stats, curves, frame, gpu_time, timing, omitted)
    return Characterization(stats, curves)


