"""Time in a trace: the wall-clock origin, where start and end times come from (the trace,
a FIFO replay, or none), the diurnal and weekly pattern, and utilization over time."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shapeshift.analysis.trace_basics import TIME_COLUMNS, WEEKDAYS, busy_curve
from shapeshift.model import ClusterSpec
from shapeshift.workloads.workload import Workload


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
    from shapeshift.policies.framework.registry import make_policy
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


@dataclass
class Timing:
    """Where queueing delays and run intervals come from (``source`` says which)."""

    source: str | None = None
    start: np.ndarray | None = None
    end: np.ndarray | None = None
    queue: np.ndarray | None = None


def timing_of(workload: Workload, cluster: ClusterSpec | None, label: str) -> Timing:
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
        return Timing("trace start/end times", start, end, queue)
    if "queue" in cols:
        queue = pd.to_numeric(frame["queue"], errors="coerce").to_numpy(dtype=float)
        return Timing("trace queue column", None, None, queue)
    if cluster is not None:
        replay = fifo_replay(workload, cluster)
        return Timing(
            f"fifo replay on {label or 'the given cluster'}",
            replay["start_time"].to_numpy(dtype=float),
            replay["end_time"].to_numpy(dtype=float),
            replay["queue"].to_numpy(dtype=float),
        )
    return Timing()


def _clock(frame: pd.DataFrame, origin: pd.Timestamp | None) -> pd.DatetimeIndex:
    base = origin if origin is not None else pd.Timestamp("1970-01-01")
    return pd.DatetimeIndex(base + pd.to_timedelta(frame["submit_time"].to_numpy(dtype=float), unit="s"))


def diurnal(
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


def utilization(
    stats: dict[str, Any],
    curves: dict[str, Any],
    frame: pd.DataFrame,
    gpus: np.ndarray,
    timing: Timing,
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


