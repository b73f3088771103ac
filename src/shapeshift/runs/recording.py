"""Exact GPU-holding intervals of every job, recorded by wrapping the policy.

``jobs.csv`` keeps one row per job (first start, end), which cannot say when a preempted
job was off the cluster. Utilization-over-time figures need the real intervals, so the
runner wraps each policy in ``IntervalRecorder``: every schedule change the engine is
about to apply opens or closes an interval (the view still shows the state before
reconciliation), and completions close the rest. Cost: O(changes) per decision.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from shapeshift.engine.contract import Policy, traits_of
from shapeshift.engine.state import JobState
from shapeshift.model import Schedule
from shapeshift.sim.simulator import SimulationResult

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

INTERVAL_COLUMNS = ("job_id", "start", "end", "gpus")


@dataclass(frozen=True)
class Interval:
    job_id: str
    start: float
    end: float
    gpus: int


class IntervalRecorder:
    """A transparent policy wrapper that logs allocation intervals."""

    def __init__(self, inner: Policy):
        self.inner = inner
        self.name = inner.name
        self.triggers = inner.triggers
        self.default_round = inner.default_round
        self.traits = traits_of(inner)
        self._open: dict[str, tuple[float, int]] = {}
        self.intervals: list[Interval] = []

    def decide(self, view: ClusterView) -> Schedule:
        schedule = self.inner.decide(view)
        now = view.now
        current = view.allocations
        for job_id, desired in schedule.changes.items():
            held = current.get(job_id)
            if desired is None:
                if held is not None:
                    self._close(job_id, now)
            elif held is None:
                self._open[job_id] = (now, desired.gpus)
            elif desired != held:
                self._close(job_id, now)
                self._open[job_id] = (now, desired.gpus)
        return schedule

    def _close(self, job_id: str, now: float) -> None:
        opened = self._open.pop(job_id, None)
        if opened is not None and now > opened[0]:
            self.intervals.append(Interval(job_id, opened[0], now, opened[1]))

    def finish(self, result: SimulationResult) -> list[Interval]:
        """Close the intervals of completed jobs at their end times (unfinished: at the last event)."""
        last = max((j.end_time for j in result.jobs if j.end_time is not None), default=0.0)
        by_id = {j.job_id: j for j in result.jobs}
        for job_id in list(self._open):
            status = by_id[job_id]
            end = status.end_time if status.state is JobState.COMPLETED and status.end_time is not None else last
            self._close(job_id, end)
        self.intervals.sort(key=lambda i: (i.start, i.job_id))
        return self.intervals


def write_intervals(intervals: list[Interval], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(INTERVAL_COLUMNS)
        writer.writerows((i.job_id, repr(round(i.start, 6)), repr(round(i.end, 6)), i.gpus) for i in intervals)


def utilization(intervals: list[Interval], start: float, end: float, total_gpus: int) -> float:
    """Share of the cluster's GPU-seconds held in ``[start, end]``."""
    if end <= start or total_gpus <= 0:
        return 0.0
    held = sum(max(min(i.end, end) - max(i.start, start), 0.0) * i.gpus for i in intervals)
    return held / (total_gpus * (end - start))
