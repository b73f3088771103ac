"""Per-queue figures of a Kueue or KAI-Scheduler replay, for ``summary.json`` and the report.

What a platform team asks of a queueing configuration, per queue (a ClusterQueue for
Kueue, a leaf queue for KAI): how long its jobs wait to be admitted, how many GPU-hours
it ran on borrowed quota (GPUs held above its deserved amount: Kueue's ``nominalQuota``,
KAI's ``quota``), how often its jobs were evicted, and its share of the GPU time the
queues used against its deserved share (deserved amount / the sum over queues). One
number summarises fairness across queues: Jain's index over (GPU share / deserved share)
of the queues that ran jobs (1 = every queue got GPU time in proportion to what it
deserves).

The ledger follows the policy's own decisions: a job's interval opens when the policy
starts it and closes when the policy evicts it or the engine finishes it (the job's
recorded end time, read from its status at the end, so a completion after the last
decision is counted too).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shapeshift.engine.state import JobStatus
from shapeshift.engine.view import ClusterView
from shapeshift.model import Schedule


class QueueLedger:
    def __init__(self, deserved: Mapping[str, float]):
        #: Deserved GPUs per queue (``math.inf``: unlimited).
        self.deserved = dict(deserved)
        self.intervals: list[tuple[str, float, float, float]] = []  # (queue, gpus, start, end)
        self.open: dict[str, tuple[str, float, float, JobStatus]] = {}
        self.waits: dict[str, tuple[str, float]] = {}  # job -> (queue, first start - submit)
        self.evictions: dict[str, int] = defaultdict(int)
        self._opened: dict[str, int] = {}  # job -> the count of intervals opened before it
        self._count = 0

    def record(self, view: ClusterView, schedule: Schedule, queue_of: Callable[[str], str]) -> None:
        """What one decision changed: evictions close intervals, starts open them."""
        held = view.allocations
        # finished since the last decision: among the view's touched jobs; closed in the order opened
        ended = sorted((j for j in view.touched if j in self.open and j not in held), key=self._opened.__getitem__)
        for job_id in ended:
            self._close(job_id, None)
        for job_id, alloc in schedule.changes.items():
            if job_id in self.open:
                queue = self.open[job_id][0]
                self._close(job_id, view.now)
                if alloc is None:
                    self.evictions[queue] += 1
            if alloc is None or alloc.gpus == 0:
                continue
            status = view.job(job_id)
            queue = queue_of(job_id)
            self.open[job_id] = (queue, float(alloc.gpus), view.now, status)
            self._opened[job_id] = self._count
            self._count += 1
            self.waits.setdefault(job_id, (queue, view.now - status.spec.submit_time))

    def _close(self, job_id: str, now: float | None) -> None:
        queue, gpus, start, status = self.open.pop(job_id)
        del self._opened[job_id]
        end = now if now is not None else status.end_time
        if end is not None and end > start:
            self.intervals.append((queue, gpus, start, end))

    def summary(self) -> dict[str, Any]:
        intervals = list(self.intervals)
        for queue, gpus, start, status in self.open.values():
            if status.end_time is not None and status.end_time > start:
                intervals.append((queue, gpus, start, status.end_time))
        gpu_s: dict[str, float] = defaultdict(float)
        events: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for queue, gpus, start, end in intervals:
            gpu_s[queue] += gpus * (end - start)
            events[queue] += [(start, gpus), (end, -gpus)]
        waits: dict[str, list[float]] = defaultdict(list)
        for queue, wait in self.waits.values():
            waits[queue].append(wait)
        finite = [v for v in self.deserved.values() if math.isfinite(v)]
        total_deserved = sum(finite) if len(finite) == len(self.deserved) else math.inf
        total_gpu_s = sum(gpu_s.values())
        queues: dict[str, dict[str, Any]] = {}
        for queue in sorted(set(waits) | set(gpu_s) | set(self.evictions)):
            deserved = self.deserved.get(queue, 0.0)
            share = gpu_s[queue] / total_gpu_s if total_gpu_s > 0 else 0.0
            queues[queue] = {
                "jobs_admitted": len(waits[queue]),
                "admission_wait_mean_s": sum(waits[queue]) / len(waits[queue]) if waits[queue] else None,
                "admission_wait_max_s": max(waits[queue], default=None),
                "gpu_hours": gpu_s[queue] / 3600.0,
                "borrowed_gpu_hours": _above(events[queue], deserved) / 3600.0,
                "preemptions_suffered": self.evictions.get(queue, 0),
                "gpu_share": share,
                "deserved_share": deserved / total_deserved if 0 < total_deserved < math.inf else None,
            }
        ratios = [
            q["gpu_share"] / q["deserved_share"] for q in queues.values() if q["deserved_share"] and q["jobs_admitted"]
        ]
        means = [q["admission_wait_mean_s"] for q in queues.values() if q["admission_wait_mean_s"] is not None]
        return {
            "queues": queues,
            "queues_jain_share_vs_deserved": _jain(ratios),
            "queues_worst_mean_wait_s": max(means, default=None),
            "queues_borrowed_gpu_hours": sum(q["borrowed_gpu_hours"] for q in queues.values()),
        }


def _above(events: list[tuple[float, float]], level: float) -> float:
    """GPU-seconds held above ``level`` by a queue whose holdings change at ``events``."""
    if not math.isfinite(level):
        return 0.0
    total, held, last = 0.0, 0.0, None
    for time, delta in sorted(events):
        if last is not None and held > level:
            total += (held - level) * (time - last)
        held += delta
        last = time
    return total


def _jain(values: list[float]) -> float | None:
    if not values:
        return None
    squares = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * squares) if squares > 0 else None


def queue_fairness(jobs: Iterable[JobStatus], deserved: Mapping[str, float], queue_of=None) -> dict[str, Any]:
    """The same per-queue view for any policy's finished simulation (the jobs' recorded
    GPU-seconds: GPUs x seconds held; waits: first start - submit), so research policies
    and the queueing replays are compared on one footing. ``queue_of(spec)`` names a
    job's queue (default: its ``vc``); ``deserved``: GPUs per queue.

    When every job finishes, each queue's GPU time is its demand whatever the policy, so
    the share-vs-deserved index only tells policies apart on a run cut short; Jain over
    the queues' mean slowdown (JCT / time run) says whether the queues were served alike."""
    queue_of = queue_of or (lambda spec: spec.vc)
    gpu_s: dict[str, float] = defaultdict(float)
    waits: dict[str, list[float]] = defaultdict(list)
    slowdowns: dict[str, list[float]] = defaultdict(list)
    for j in jobs:
        queue = queue_of(j.spec)
        gpu_s[queue] += j.spec.num_gpus * j.run_seconds
        if j.first_start is not None:
            waits[queue].append(j.first_start - j.spec.submit_time)
        if j.end_time is not None and j.run_seconds > 0:
            slowdowns[queue].append((j.end_time - j.spec.submit_time) / j.run_seconds)
    total = sum(gpu_s.values())
    total_deserved = sum(deserved.values())
    ratios = [
        (gpu_s[q] / total) / (deserved[q] / total_deserved) for q in waits if total > 0 and deserved.get(q, 0) > 0
    ]
    means = {q: sum(w) / len(w) for q, w in waits.items() if w}
    return {
        "queues_jain_share_vs_deserved": _jain(ratios),
        "queues_jain_slowdown": _jain([sum(s) / len(s) for s in slowdowns.values() if s]),
        "queues_worst_mean_wait_s": max(means.values(), default=None),
        "queue_mean_wait_s": means,
    }
