"""The numbers every run reports, and the files they go into.

Definitions (seconds unless named):

* ``jct`` = end time - submit time, over completed jobs;
* ``queue_time`` = time a job spent without an allocation (JCT minus time held, so a
  preempted job's second wait counts too);
* ``responsiveness`` = first start - submit (time to first service);
* ``makespan`` = last completion - first submission;
* ``gpu_utilization`` = allocated GPU-seconds / (cluster GPUs x makespan), restart
  pauses included, since the GPUs are held during them; a GPU that jobs share counts
  once;
* on clusters where jobs may share GPUs (``gpu_share_limit`` above 1):
  ``shared_gpu_time_share`` = GPU-seconds on GPUs holding two or more jobs / busy
  GPU-seconds (both counting each GPU once), ``shared_jobs`` = jobs that ever shared, and
  ``shared_slowdown`` = their seconds held while sharing / the seconds the same progress
  takes alone (1.0 = no interference; restart pauses excluded); ``jobs.csv`` always has
  ``shared_seconds`` (seconds held while sharing a GPU);
* slowdown, bounded slowdown, Jain's fairness index and finish-time fairness are
  defined in :mod:`shapeshift.analysis.fairness`;
* ``slo_attainment`` = over guaranteed jobs, the share of their running time (time
  holding an allocation) in which they progressed at least at the throughput of their
  requested plan on their requested resources (``null`` without guaranteed jobs).

``summary.json`` keeps a fixed key order and rounds floats to 6 decimals, so the same
run gives byte-identical files (only ``sim_wall_seconds`` varies).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from shapeshift.analysis.fairness import fairness_summary
from shapeshift.engine.state import JobState
from shapeshift.sim.simulator import SimulationResult

SUMMARY_KEYS = (
    "policy",
    "workload",
    "cluster_gpus",
    "jobs_total",
    "jobs_completed",
    "jobs_rejected",
    "avg_jct",
    "p50_jct",
    "p99_jct",
    "avg_queue",
    "p99_queue",
    "avg_responsiveness",
    "makespan",
    "gpu_utilization",
    "preemptions",
    "reconfigurations",
    "sim_wall_seconds",
)
JOB_COLUMNS = (
    "job_id",
    "submit_time",
    "first_start_time",
    "end_time",
    "jct",
    "queue_time",
    "num_gpus",
    "preemptions",
    "reconfigurations",
    "status",
    "shared_seconds",
)
#: Fields that measure the machine, not the schedule; excluded from determinism checks.
WALL_TIME_KEYS = ("sim_wall_seconds",)


def _stat(values: np.ndarray, fn: str) -> float | None:
    if values.size == 0:
        return None
    if fn == "mean":
        return float(values.mean())
    return float(np.percentile(values, float(fn[1:])))


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 6)
    return value


def summarize(result: SimulationResult, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``summary.json`` mapping (contract keys first, in a fixed order)."""
    # One pass over the jobs; sums accumulate in job order, as ``sum()`` would.
    ends: list[float] = []
    done_submits: list[float] = []
    held: list[float] = []
    responses: list[float] = []
    first_submit = math.inf
    attained = overcount = 0.0
    preemptions = reconfigurations = unfinished = accepted = 0
    completed, rejected = JobState.COMPLETED, JobState.REJECTED
    for j in result.jobs:
        state, submit = j.state, j.spec.submit_time
        if state is completed:
            ends.append(j.end_time)  # type: ignore[arg-type]
            done_submits.append(submit)
            held.append(j.run_seconds)
        elif state is JobState.UNFINISHED:
            unfinished += 1
        if state is not rejected:
            accepted += 1
            first_submit = min(first_submit, submit)
        if j.first_start is not None:
            responses.append(j.first_start - submit)
        attained += j.attained
        overcount += j.overcount_gpu_seconds
        preemptions += j.preemptions
        reconfigurations += j.reconfigurations
    jct = np.array(ends, dtype=float) - np.array(done_submits, dtype=float)
    queue = jct - np.array(held, dtype=float)
    response = np.array(responses, dtype=float)
    gpus = result.cluster.total_gpus
    makespan = max(ends) - first_submit if ends else 0.0
    attained -= overcount
    summary: dict[str, Any] = {
        "policy": result.policy,
        "workload": result.workload,
        "cluster_gpus": gpus,
        "jobs_total": len(result.jobs),
        "jobs_completed": len(ends),
        "jobs_rejected": len(result.rejections),
        "avg_jct": _stat(jct, "mean"),
        "p50_jct": _stat(jct, "p50"),
        "p99_jct": _stat(jct, "p99"),
        "avg_queue": _stat(queue, "mean"),
        "p99_queue": _stat(queue, "p99"),
        "avg_responsiveness": _stat(response, "mean"),
        "makespan": makespan,
        "gpu_utilization": attained / (gpus * makespan) if makespan > 0 else 0.0,
        "preemptions": int(preemptions),
        "reconfigurations": int(reconfigurations),
        "sim_wall_seconds": result.wall_seconds,
        "slo_attainment": _slo_attainment(result),
        "jobs_unfinished": unfinished,
        "events": result.events,
        "decisions": result.decisions,
    }
    # Rejected jobs never run, so every preemption is an accepted job's.
    summary["preemptions_per_job"] = preemptions / accepted if accepted else 0.0
    summary.update(fairness_summary(result.jobs, result.cluster))
    if result.cluster.gpu_share_limit > 1:
        summary.update(sharing_summary(result, attained))
    summary.update(extra or {})
    return {k: _clean(v) for k, v in summary.items()}


def sharing_summary(result: SimulationResult, busy_gpu_seconds: float) -> dict[str, Any]:
    """The sharing figures of the module docstring (``busy_gpu_seconds`` counts GPUs once)."""
    shared = [j for j in result.jobs if j.shared_seconds > 0]
    once = float(sum(j.shared_gpu_seconds for j in shared))
    held = float(sum(j.shared_seconds for j in shared))
    alone = held - float(sum(j.slowed_seconds for j in shared))
    return {
        "shared_gpu_time_share": once / busy_gpu_seconds if busy_gpu_seconds > 0 else 0.0,
        "shared_jobs": len(shared),
        "shared_slowdown": held / alone if shared and alone > 0 else None,
    }


def _slo_attainment(result: SimulationResult) -> float | None:
    held = [j for j in result.jobs if j.spec.guaranteed and j.target_rate is not None and j.run_seconds > 0]
    total = sum(j.run_seconds for j in held)
    return sum(j.slo_met_seconds for j in held) / total if total > 0 else None


def job_rows(result: SimulationResult) -> list[tuple[Any, ...]]:
    rows = []
    for j in result.jobs:
        submit = j.spec.submit_time
        end = j.end_time if j.state is JobState.COMPLETED else None
        jct = end - submit if end is not None else None
        queue = jct - j.run_seconds if jct is not None else None
        rows.append(
            (
                j.job_id,
                submit,
                j.first_start,
                end,
                jct,
                queue,
                j.spec.num_gpus,
                j.preemptions,
                j.reconfigurations,
                j.state.value,
                j.shared_seconds,
            )
        )
    return rows


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def write_job_files(result: SimulationResult, out: str | Path) -> None:
    """Write ``jobs.csv`` and ``rejected.csv`` into ``out`` (created if needed)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "jobs.csv").open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(JOB_COLUMNS)
        writer.writerows([_fmt(v) for v in row] for row in job_rows(result))
    with (out / "rejected.csv").open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(("job_id", "reason"))
        writer.writerows((r.job_id, r.reason) for r in result.rejections)


def write_outputs(result: SimulationResult, out: str | Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``summary.json``, ``jobs.csv`` and ``rejected.csv`` into ``out``."""
    out = Path(out)
    summary = summarize(result, extra)
    write_job_files(result, out)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
