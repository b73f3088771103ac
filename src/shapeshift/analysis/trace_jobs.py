"""Jobs in a trace: durations, sizes and who holds the GPU time, per virtual cluster,
final status and user concentration."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from shapeshift.analysis.trace_basics import (
    SIZE_BUCKETS,
    TOP_USER_PERCENTS,
    duration_stats,
    mean_or_none,
    size_bucket,
    top_share,
)
from shapeshift.analysis.trace_time import Timing


def durations(
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
    section["gpu"] = duration_stats(gpu_d)
    curves["gpu_durations"] = gpu_d
    cpu_d = np.sort(duration[known & (gpus == 0)])
    if cpu_d.size:
        section["cpu"] = duration_stats(cpu_d)
        curves["cpu_durations"] = cpu_d
    else:
        section["cpu"] = None
        omitted["durations.cpu"] = "the trace has no CPU jobs (0 GPUs)"
    stats["durations"] = section


def job_size(
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
    labels = size_bucket(pd.Series(g))
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


def per_vc(
    stats: dict[str, Any],
    curves: dict[str, Any],
    frame: pd.DataFrame,
    gpu_time: np.ndarray,
    timing: Timing,
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
            row["avg_queue_s"] = mean_or_none(q)
        rows.append(row)
    rows.sort(key=lambda r: (-r["gpu_hours"], r["vc"]))
    stats["per_vc"] = {"queue_source": timing.source, "vcs": rows}
    if timing.queue is None:
        omitted["per_vc.avg_queue"] = "no queue or start times in the trace and no --cluster for a FIFO replay"
    curves["per_vc"] = rows


def status(
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
    labels = size_bucket(pd.Series(gpus)).to_numpy()
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


def users(
    stats: dict[str, Any],
    curves: dict[str, Any],
    frame: pd.DataFrame,
    gpu_time: np.ndarray,
    timing: Timing,
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
