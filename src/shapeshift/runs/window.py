"""Tracked-job windows: metrics over jobs ``[start, end)`` of a run that simulated them all.

Blox and Tiresias measure steady state by simulating a long Poisson stream and reporting
only a middle slice of jobs (e.g. jobs 3000-4000), so the empty-cluster warm-up and the
drain at the end do not dilute the numbers. Job indexes are positions in the workload
sorted by submit time. Every ``summary.json`` metric is recomputed over the tracked jobs,
except ``gpu_utilization``: that is the share of the cluster held by *all* jobs between
the first tracked submission and the last tracked completion (the cluster is shared; the
tracked jobs alone would understate it), from the recorded allocation intervals.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shapeshift.analysis.metrics import summarize
from shapeshift.engine.state import JobState
from shapeshift.runs.recording import Interval, utilization
from shapeshift.sim.simulator import SimulationResult


def windowed_summary(
    result: SimulationResult,
    tracked_ids: list[str],
    window: tuple[int, int],
    intervals: list[Interval],
    extra: dict[str, Any],
) -> dict[str, Any]:
    ids = set(tracked_ids)
    jobs = [j for j in result.jobs if j.job_id in ids]
    sub = replace(result, jobs=jobs, rejections=[r for r in result.rejections if r.job_id in ids])
    done = [j for j in jobs if j.state is JobState.COMPLETED and j.end_time is not None]
    accepted = [j for j in jobs if j.state is not JobState.REJECTED]
    info = {"window_start": window[0], "window_end": window[1], "jobs_simulated": len(result.jobs)}
    summary = summarize(sub, {**extra, **info})
    if done and accepted:
        start = min(j.spec.submit_time for j in accepted)
        end = max(j.end_time for j in done)  # type: ignore[type-var]
        summary["gpu_utilization"] = round(utilization(intervals, start, end, result.cluster.total_gpus), 6)
    return summary
