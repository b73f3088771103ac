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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shapeshift.model import ClusterSpec
from shapeshift.workloads.workload import Workload

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


def trace_origin(path: str | Path, fmt: str | None = None) -> pd.Timestamp | None:
    """The absolute time of the first submission when the file stores timestamps.

    Readers turn times into seconds after the first submission; hour-of-day and weekday
    need the wall-clock origin back. ``None`` when the times are plain numbers or the
    file cannot be read (the analysis then works in trace-relative time).
    """
    path = Path(path)
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            names = list(pq.read_schema(path).names)
            column = next((c for c in TIME_COLUMNS if c in names), None)
            if column is None:
                return None
            values = pd.read_parquet(path, columns=[column])[column]
        else:
            with path.open(newline="") as handle:
                names = [c.strip() for c in handle.readline().strip().split(",")]
            column = next((c for c in TIME_COLUMNS if c in names), None)
            if column is None:
                return None
            values = pd.read_csv(path, usecols=lambda c: c.strip() == column, dtype=str).iloc[:, 0]
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if pd.api.types.is_datetime64_any_dtype(values):
        stamps = values
    else:
        text = values.astype(str).str.strip()
        if pd.to_numeric(text, errors="coerce").notna().all():
            return None
        stamps = pd.to_datetime(text, errors="coerce", format="ISO8601")
    if getattr(stamps.dt, "tz", None) is not None:
        stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    stamps = stamps.dropna()
    return None if stamps.empty else pd.Timestamp(stamps.min())


def fifo_replay(workload: Workload, cluster: ClusterSpec) -> pd.DataFrame:
    """Start and end time of every job under ``fifo`` on ``cluster`` (NaN when never run)."""
    from shapeshift.policies.registry import make_policy
    from shapeshift.sim.simulator import simulate

    result = simulate(workload.jobs(), cluster, make_policy("fifo"), workload_name=workload.name)
    rows = {
        j.job_id: (
            math.nan if j.first_start is None else j.first_start,
            math.nan if j.end_time is None else j.end_time,
            j.end_time - j.spec.submit_time - j.run_seconds if j.end_time is not None else math.nan,
        )
        for j in result.jobs
    }
    ids = workload.frame["job_id"].tolist()
    return pd.DataFrame(
        [rows.get(i, (math.nan, math.nan, math.nan)) for i in ids], columns=["start_time", "end_time", "queue"]
    )


def _median(values: np.ndarray) -> float | None:
    return float(np.median(values)) if values.size else None


def _mean(values: np.ndarray) -> float | None:
    return float(np.mean(values)) if values.size else None


def _duration_stats(values: np.ndarray) -> dict[str, Any]:
    return {
        "jobs": int(values.size),
        "median_s": _median(values),
        "mean_s": _mean(values),
        "p90_s": float(np.percentile(values, 90)) if values.size else None,
        "max_s": float(values.max()) if values.size else None,
    }


def _size_bucket(gpus: pd.Series) -> pd.Series:
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

    timing = _timing(workload, cluster, cluster_label)
    stats["timing_source"] = timing.source

    _durations(stats, curves, gpus, duration, known, omitted)
    _job_size(stats, curves, gpus, gpu_time, omitted)
    _diurnal(stats, curves, frame, gpus, origin, omitted)
    _utilization(stats, curves, frame, gpus, timing, cluster, origin, omitted)
    _per_vc(stats, curves, frame, gpu_time, timing, omitted)
    _status(stats, curves, frame, gpus, gpu_time, omitted)
    _users(stats, curves, frame, gpu_time, timing, omitted)
    return Characterization(stats, curves)


@dataclass
class _Timing:
    """Where queueing delays and run intervals come from (``source`` says which)."""

    source: str | None = None
    start: np.ndarray | None = None
    end: np.ndarray | None = None
    queue: np.ndarray | None = None


def _timing(workload: Workload, cluster: ClusterSpec | None, label: str) -> _Timing:
    frame = workload.frame
    cols = frame.columns
    submit = frame["submit_time"].to_numpy(dtype=float)
    if "start_time" in cols and "end_time" in cols:
        start = pd.to_numeric(frame["start_time"], errors="coerce").to_numpy(dtype=float)
        end = pd.to_numeric(frame["end_time"], errors="coerce").to_numpy(dtype=float)
        if "queue" in cols:
            queue = pd.to_numeric(frame["queue"], errors="coerce").to_numpy(dtype=float)
        else:
            queue = start - submit
        return _Timing("trace start/end times", start, end, queue)
    if "queue" in cols:
        queue = pd.to_numeric(frame["queue"], errors="coerce").to_numpy(dtype=float)
        return _Timing("trace queue column", None, None, queue)
    if cluster is not None:
        replay = fifo_replay(workload, cluster)
        return _Timing(
            f"fifo replay on {label or 'the given cluster'}",
            replay["start_time"].to_numpy(dtype=float),
            replay["end_time"].to_numpy(dtype=float),
            replay["queue"].to_numpy(dtype=float),
        )
    return _Timing()


def _durations(
    stats: dict[str, Any],
    curves: dict[str, Any],
    gpus: np.ndarray,
    duration: np.ndarray,
    known: np.ndarray,
    omitted: dict[str, str],
) -> None:
    if not known.any():
        omitted["durations"] = "the trace has no job durations"
        return
    section: dict[str, Any] = {}
    gpu_d = np.sort(duration[known & (gpus > 0)])
    section["gpu"] = _duration_stats(gpu_d)
    curves["gpu_durations"] = gpu_d
    cpu_d = np.sort(duration[known & (gpus == 0)])
    if cpu_d.size:
        section["cpu"] = _duration_stats(cpu_d)
        curves["cpu_durations"] = cpu_d
    else:
        section["cpu"] = None
        omitted["durations.cpu"] = "the trace has no CPU jobs (0 GPUs)"
    stats["durations"] = section


def _job_size(
    stats: dict[str, Any], curves: dict[str, Any], gpus: np.ndarray, gpu_time: np.ndarray, omitted: dict[str, str]
) -> None:
    mask = gpus > 0
    if not mask.any():
        omitted["job_size"] = "the trace has no GPU jobs"
        return
    g, t = gpus[mask], gpu_time[mask]
    n, total = g.size, float(t.sum())
    share = (lambda x: float(x) / total) if total > 0 else (lambda x: 0.0)
    by_gpus = [
        {
            "gpus": int(k),
            "jobs": int((g == k).sum()),
            "job_share": float((g == k).sum()) / n,
            "gpu_time_share": share(t[g == k].sum()),
        }
        for k in np.unique(g)
    ]
    labels = _size_bucket(pd.Series(g))
    buckets = []
    for _, _, label in SIZE_BUCKETS:
        sel = (labels == label).to_numpy()
        buckets.append(
            {
                "bucket": label,
                "jobs": int(sel.sum()),
                "job_share": float(sel.sum()) / n,
                "gpu_time_share": share(t[sel].sum()),
            }
        )
    stats["job_size"] = {
        "single_gpu_job_share": float((g == 1).sum()) / n,
        "single_gpu_time_share": share(t[g == 1].sum()),
        "ge8_gpu_job_share": float((g >= 8).sum()) / n,
        "ge8_gpu_time_share": share(t[g >= 8].sum()),
        "median_gpus": float(np.median(g)),
        "mean_gpus": float(np.mean(g)),
        "by_gpus": by_gpus,
        "by_bucket": buckets,
    }
    curves["size_buckets"] = buckets


def _clock(frame: pd.DataFrame, origin: pd.Timestamp | None) -> pd.DatetimeIndex:
    base = origin if origin is not None else pd.Timestamp("1970-01-01")
    return pd.DatetimeIndex(base + pd.to_timedelta(frame["submit_time"].to_numpy(dtype=float), unit="s"))


def _diurnal(
    stats: dict[str, Any],
    curves: dict[str, Any],
    frame: pd.DataFrame,
    gpus: np.ndarray,
    origin: pd.Timestamp | None,
    omitted: dict[str, str],
) -> None:
    stamps = _clock(frame, origin)
    per = pd.DataFrame({"jobs": 1, "gpus": gpus}, index=stamps)
    hourly = per.resample("1h").sum()
    curves["hourly"] = hourly
    by_hour = hourly.groupby(hourly.index.hour).mean().reindex(range(24), fill_value=0.0)
    section: dict[str, Any] = {
        "clock": "wall clock" if origin is not None else "trace-relative (hour 0 = first submission; no wall clock)",
        "hours": len(hourly),
        "peak_hourly_submissions": int(hourly["jobs"].max()),
        "mean_hourly_submissions": float(hourly["jobs"].mean()),
        "by_hour_of_day": [
            {"hour": int(h), "submissions_per_hour": float(r.jobs), "gpus_requested_per_hour": float(r.gpus)}
            for h, r in by_hour.iterrows()
        ],
    }
    curves["by_hour"] = by_hour
    if origin is not None:
        daily = per.resample("1D").sum()
        by_day = daily.groupby(daily.index.day_of_week).mean().reindex(range(7))
        section["by_weekday"] = [
            {
                "weekday": WEEKDAYS[d],
                "submissions_per_day": None if math.isnan(r.jobs) else float(r.jobs),
                "gpus_requested_per_day": None if math.isnan(r.gpus) else float(r.gpus),
            }
            for d, r in by_day.iterrows()
        ]
        curves["by_weekday"] = by_day
    else:
        omitted["diurnal.by_weekday"] = "submission times are relative (no timestamps in the trace): no weekday"
    stats["diurnal"] = section


def _utilization(
    stats: dict[str, Any],
    curves: dict[str, Any],
    frame: pd.DataFrame,
    gpus: np.ndarray,
    timing: _Timing,
    cluster: ClusterSpec | None,
    origin: pd.Timestamp | None,
    omitted: dict[str, str],
) -> None:
    if timing.start is not None and timing.end is not None:
        start, end, method = timing.start, timing.end, timing.source
    else:
        submit = frame["submit_time"].to_numpy(dtype=float)
        duration = frame["duration"].to_numpy(dtype=float)
        if not np.isfinite(duration).any():
            omitted["utilization"] = "the trace has neither start/end times nor durations"
            return
        start, end = submit, submit + duration
        method = "ideal demand: every job runs from its submission for its duration (unlimited cluster)"
    times, busy = busy_curve(start, end, gpus.astype(float))
    if times.size == 0:
        omitted["utilization"] = "no job has a positive run interval"
        return
    capacity = cluster.total_gpus if cluster is not None else None
    ok = np.isfinite(start) & np.isfinite(end) & (end > start)
    span = float(end[ok].max() - start[ok].min())
    mean_busy = float((gpus[ok] * (end[ok] - start[ok])).sum()) / span
    section: dict[str, Any] = {
        "method": method,
        "capacity_gpus": capacity,
        "span_s": span,
        "mean_gpus_in_use": mean_busy,
        "peak_gpus_in_use_hourly": float(busy.max()),
        "mean_utilization": mean_busy / capacity if capacity else None,
    }
    base = origin if origin is not None else pd.Timestamp("1970-01-01")
    index = pd.DatetimeIndex(base + pd.to_timedelta(times, unit="s"))
    curve = pd.Series(busy, index=index)
    by_hour = curve.groupby(index.hour).mean().reindex(range(24))
    section["gpus_in_use_by_hour_of_day"] = [None if math.isnan(v) else float(v) for v in by_hour.tolist()]
    if capacity is None:
        omitted["utilization.fraction"] = "no --cluster given: GPUs in use are reported, not a fraction of capacity"
    stats["utilization"] = section
    curves["utilization"] = curve
    curves["utilization_method"] = method
    curves["capacity"] = capacity


def _per_vc(
    stats: dict[str, Any],
    curves: dict[str, Any],
    frame: pd.DataFrame,
    gpu_time: np.ndarray,
    timing: _Timing,
    omitted: dict[str, str],
) -> None:
    vc = frame["vc"].astype(str)
    if (vc == "").all():
        omitted["per_vc"] = "the trace names no virtual cluster (vc)"
        return
    table = pd.DataFrame({"vc": vc.to_numpy(), "gpu_time": gpu_time})
    if timing.queue is not None:
        table["queue"] = timing.queue
    grouped = table.groupby("vc", sort=True)
    rows = []
    for name, group in grouped:
        row: dict[str, Any] = {"vc": name, "jobs": len(group), "gpu_hours": float(group["gpu_time"].sum()) / 3600.0}
        if timing.queue is not None:
            q = group["queue"].dropna().to_numpy(dtype=float)
            row["avg_queue_s"] = _mean(q)
        rows.append(row)
    rows.sort(key=lambda r: (-r["gpu_hours"], r["vc"]))
    stats["per_vc"] = {"queue_source": timing.source, "vcs": rows}
    if timing.queue is None:
        omitted["per_vc.avg_queue"] = "no queue or start times in the trace and no --cluster for a FIFO replay"
    curves["per_vc"] = rows


def _status(
    stats: dict[str, Any],
    curves: dict[str, Any],
    frame: pd.DataFrame,
    gpus: np.ndarray,
    gpu_time: np.ndarray,
    omitted: dict[str, str],
) -> None:
    if "state" not in frame.columns:
        omitted["status"] = "the trace has no final-status (state) column"
        return
    state = frame["state"].fillna("").astype(str).str.strip().str.upper().replace("", "UNKNOWN")
    total_jobs = len(state)
    total_time = float(gpu_time.sum())
    states = sorted(state.unique())
    by_state = []
    for s in states:
        sel = (state == s).to_numpy()
        by_state.append(
            {
                "state": s,
                "jobs": int(sel.sum()),
                "job_share": float(sel.sum()) / total_jobs,
                "gpu_time_share": float(gpu_time[sel].sum()) / total_time if total_time > 0 else 0.0,
            }
        )
    labels = _size_bucket(pd.Series(gpus)).to_numpy()
    by_size = []
    for _, _, label in SIZE_BUCKETS:
        sel = labels == label
        if not sel.any():
            continue
        sub = state.to_numpy()[sel]
        by_size.append(
            {"bucket": label, "jobs": int(sel.sum()), **{s: float((sub == s).sum()) / sel.sum() for s in states}}
        )
    if (gpus == 0).any():
        sub = state.to_numpy()[gpus == 0]
        by_size.insert(
            0, {"bucket": "CPU", "jobs": int(sub.size), **{s: float((sub == s).sum()) / sub.size for s in states}}
        )
    stats["status"] = {"states": states, "by_state": by_state, "by_size": by_size}
    curves["status"] = stats["status"]


def _users(
    stats: dict[str, Any],
    curves: dict[str, Any],
    frame: pd.DataFrame,
    gpu_time: np.ndarray,
    timing: _Timing,
    omitted: dict[str, str],
) -> None:
    user = frame["user"].astype(str)
    if (user == "").all():
        omitted["users"] = "the trace names no users"
        return
    table = pd.DataFrame({"user": user.to_numpy(), "gpu_time": gpu_time})
    per_user = table.groupby("user", sort=True)["gpu_time"].sum()
    values = per_user.to_numpy(dtype=float)
    section: dict[str, Any] = {"users": len(per_user)}
    for p in TOP_USER_PERCENTS:
        k, share = top_share(values, p)
        section[f"top{p}pct_users"] = k
        section[f"top{p}pct_gpu_time_share"] = share
    ranked = per_user.sort_values(ascending=False, kind="stable")
    total = float(values.sum())
    section["top_users_by_gpu_time"] = [
        {"user": u, "gpu_hours": float(v) / 3600.0, "share": float(v) / total if total > 0 else 0.0}
        for u, v in ranked.head(10).items()
    ]
    curves["user_gpu_time"] = np.sort(values)[::-1]
    if timing.queue is not None:
        table["queue"] = np.nan_to_num(timing.queue, nan=0.0)
        per_queue = table.groupby("user", sort=True)["queue"].sum()
        qvalues = per_queue.to_numpy(dtype=float)
        qtotal = float(qvalues.sum())
        for p in TOP_USER_PERCENTS:
            _, share = top_share(qvalues, p)
            section[f"top{p}pct_queue_share"] = share
        ranked_q = per_queue.sort_values(ascending=False, kind="stable")
        section["top_users_by_queueing"] = [
            {"user": u, "queue_hours": float(v) / 3600.0, "share": float(v) / qtotal if qtotal > 0 else 0.0}
            for u, v in ranked_q.head(10).items()
        ]
        curves["user_queue"] = np.sort(qvalues)[::-1]
    else:
        omitted["users.queueing"] = "no queueing delays (no queue/start times and no --cluster replay)"
    stats["users"] = section
