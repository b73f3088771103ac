"""Summary statistics of a workload: what ``shapeshift workload describe`` prints.

The first questions about any trace: how many jobs over how long, how fast they arrive,
how big and how long they are, where the GPU time goes, and who submits them. All
figures come from whole columns at once, so describing the 82k-job Philly trace takes
a fraction of a second. The result is a plain JSON-ready dict.

Definitions: span = last - first submission; arrival rate = (jobs - 1) / span in hours
(the gaps between arrivals per hour; ``None`` for fewer than two jobs or a zero span);
GPU-hours = GPUs (a share of one GPU counts as that share) x duration / 3600 (jobs
without a duration count 0 and are counted in
``jobs_without_duration``); job sizes are grouped in power-of-two buckets (1, 2, 3-4,
5-8, ...; 0 = CPU-only); percentiles are linear-interpolated over jobs with a duration.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from shapeshift.workloads.workload import Workload

PERCENTILES = (10, 25, 50, 75, 90, 99)


def size_bucket(gpus: int) -> tuple[int, int]:
    """The power-of-two bucket ``(low, high)`` holding ``gpus`` (0 -> (0, 0), 5 -> (5, 8))."""
    if gpus <= 2:
        return gpus, gpus
    high = 1 << (int(gpus) - 1).bit_length()
    return high // 2 + 1, high


def _label(low: int, high: int) -> str:
    if high == 0:
        return "0 (CPU)"
    return str(low) if low == high else f"{low}-{high}"


def _size_table(gpus: np.ndarray, gpu_hours: np.ndarray) -> list[dict[str, Any]]:
    buckets: dict[tuple[int, int], list[int]] = {}
    for g in np.unique(gpus).tolist():
        buckets.setdefault(size_bucket(int(g)), []).append(int(g))
    total_jobs = max(len(gpus), 1)
    total_hours = float(gpu_hours.sum())
    rows = []
    for (low, high), members in sorted(buckets.items()):
        sel = np.isin(gpus, members)
        hours = float(gpu_hours[sel].sum())
        rows.append(
            {
                "bucket": _label(low, high),
                "min_gpus": low,
                "max_gpus": high,
                "jobs": int(sel.sum()),
                "job_share": float(sel.sum()) / total_jobs,
                "gpu_hours": hours,
                "gpu_hour_share": hours / total_hours if total_hours > 0 else 0.0,
            }
        )
    return rows


def _groups(frame: pd.DataFrame, column: str, gpu_hours: np.ndarray) -> list[dict[str, Any]]:
    table = pd.DataFrame({"key": frame[column].to_numpy(), "gpu_hours": gpu_hours})
    grouped = table.groupby("key", sort=True).agg(jobs=("gpu_hours", "size"), gpu_hours=("gpu_hours", "sum"))
    grouped = grouped.reset_index().sort_values(["jobs", "key"], ascending=[False, True], kind="stable")
    return [
        {"name": str(k), "jobs": int(j), "gpu_hours": float(h)}
        for k, j, h in zip(grouped["key"], grouped["jobs"], grouped["gpu_hours"], strict=True)
    ]


def describe(workload: Workload) -> dict[str, Any]:
    """Every statistic ``workload describe`` shows, as a JSON-ready dict."""
    frame = workload.frame
    n = len(frame)
    gpus = frame["num_gpus"].to_numpy(dtype=np.int64)
    duration = frame["duration"].to_numpy(dtype=float)
    known = np.isfinite(duration)
    # A job holding a share of one GPU (``gpu_milli``, GPU-sharing traces) counts that share.
    milli = frame["gpu_milli"].to_numpy(dtype=np.int64) if "gpu_milli" in frame.columns else np.zeros(n, np.int64)
    held = np.where(milli > 0, milli / 1000.0, gpus)
    gpu_hours = np.where(known, held * np.nan_to_num(duration), 0.0) / 3600.0
    submit = frame["submit_time"].to_numpy(dtype=float)
    first = float(submit.min()) if n else None
    last = float(submit.max()) if n else None
    span = (last - first) if n else 0.0
    stats: dict[str, Any] = {
        "workload": workload.name,
        "jobs": n,
        "cpu_only_jobs": int(frame["cpu_only"].sum()),
        "guaranteed_jobs": int(frame["guaranteed"].sum()),
        "jobs_without_duration": int((~known).sum()),
        "time_span": {
            "first_submit_s": first,
            "last_submit_s": last,
            "span_s": span,
            "span_h": span / 3600.0,
        },
        "arrival_rate_per_hour": (n - 1) / (span / 3600.0) if n >= 2 and span > 0 else None,
        "total_gpu_hours": float(gpu_hours.sum()),
        "gpu_demand": _size_table(gpus, gpu_hours) if n else [],
    }
    values = duration[known]
    if values.size:
        stats["duration_s"] = {
            **{f"p{p}": float(np.percentile(values, p)) for p in PERCENTILES},
            "mean": float(values.mean()),
            "max": float(values.max()),
        }
    else:
        stats["duration_s"] = None
    stats["per_vc"] = _groups(frame, "vc", gpu_hours) if (frame["vc"] != "").any() else []
    stats["per_tenant"] = _groups(frame, "tenant", gpu_hours) if (frame["tenant"] != "").any() else []
    stats["models"] = _groups(frame, "model", gpu_hours) if (frame["model"] != "").any() else []
    stats["states"] = _groups(frame, "state", gpu_hours) if "state" in frame.columns else []
    return stats
