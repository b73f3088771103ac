"""The simulated executor: exact finish times from a throughput model.

When a job starts or changes, its finish time is computed in closed form
(``stall_until + remaining / rate``) and pushed onto a heap. A later change bumps the
job's version, which turns the old heap entry into a no-op: lazy invalidation is
cheaper than deleting from a heap.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

from shapeshift.engine.contract import RateBoundaries
from shapeshift.engine.sharing import GpuLedger
from shapeshift.engine.state import JobStatus
from shapeshift.model import Allocation
from shapeshift.perf.colocation import InterferenceModel, UtilisationInterference
from shapeshift.perf.throughput import ThroughputModel

#: Event times are exact to this many decimals (1 microsecond). A finish time computed in
#: floating point (0.1 + 0.2 = 0.30000000000000004) is rounded here, in one place, so a
#: job that finishes at the instant another arrives is seen finishing first, as it does.
TIME_DECIMALS = 6


class CompletionQueue:
    """Min-heap of ``(time, seq, job_id, version)``; ``seq`` keeps ties deterministic.

    A preempted or reconfigured job leaves its old entry behind (lazy invalidation). Under
    policies that restart jobs by the million (rotating a long queue through the cluster
    by attained service or by round) those dead entries outnumber the live ones by far, and each pop pays for
    the heap's height. With ``is_live`` (``(job_id, version) -> bool``, which once False
    stays False: a job's version only grows), the heap drops its dead entries whenever
    it has grown to twice its live size. Nothing observable changes: a dead entry is
    never acted on, and ``quiet_from`` answers what the simulation loop would have seen of
    the dead entries (it ends a stuck run only once no entry, dead or alive, is left).
    """

    #: Below this many entries the heap is never compacted.
    MIN_COMPACT = 4096

    def __init__(self, is_live: Callable[[str, int], bool] | None = None) -> None:
        self._heap: list[tuple[float, int, str, int]] = []
        self._seq = 0
        self.is_live = is_live
        self._compact_at = self.MIN_COMPACT
        #: The latest time of a dead entry dropped by compaction.
        self._dropped_until = -math.inf

    def push(self, time: float, job_id: str, version: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (round(time, TIME_DECIMALS), self._seq, job_id, version))
        if len(self._heap) >= self._compact_at and self.is_live is not None:
            self._compact(self.is_live)

    def _compact(self, is_live: Callable[[str, int], bool]) -> None:
        live, dropped_until = [], self._dropped_until
        for entry in self._heap:
            if is_live(entry[2], entry[3]):
                live.append(entry)
            elif entry[0] > dropped_until:
                dropped_until = entry[0]
        heapq.heapify(live)  # same (time, seq) keys: the same pop order
        self._heap = live
        self._dropped_until = dropped_until
        self._compact_at = max(2 * len(live), self.MIN_COMPACT)

    def peek_time(self) -> float:
        return self._heap[0][0] if self._heap else math.inf

    def pop(self) -> tuple[float, str, int]:
        time, _, job_id, version = heapq.heappop(self._heap)
        return time, job_id, version

    def quiet_from(self, now: float) -> bool:
        """Once every entry up to ``now`` was popped: whether no entry is queued, and no
        dropped dead entry was due at ``now`` or later. Without compaction the loop would
        have seen such an entry, later than ``now`` as a queued completion, at ``now`` as
        the instant's completion time."""
        return not self._heap and self._dropped_until < now

    def __len__(self) -> int:
        return len(self._heap)


class SimulatedExecutor:
    """Rates from the throughput model; on shared GPUs, times the interference model's speed.

    A model with ``rate_at`` (``RateBoundaries``: progress-dependent goodput, :mod:`shapeshift.perf.pollux`)
    also says until which progress its rate holds; the executor then queues that instant as
    a *boundary* (not a completion) and recomputes the rate there (:meth:`crossed_boundary`),
    so progress stays exact.

    A job sharing GPUs runs at the speed of its slowest GPU (synchronous training waits for
    the straggler); on one GPU its speed is the product of its pair speeds beside each
    partner (exact for pairs, the usual case; an approximation for three or more).
    """

    def __init__(
        self,
        throughput: ThroughputModel,
        completions: CompletionQueue,
        interference: InterferenceModel | None = None,
    ):
        self.throughput = throughput
        self.completions = completions
        self.interference = interference or UtilisationInterference()
        self.sharing: GpuLedger | None = None
        self._rate_at = throughput.rate_at if isinstance(throughput, RateBoundaries) else None
        #: (time, progress) of the pending boundary event per job (absent: the queued event
        #: is a completion).
        self._boundary: dict[str, tuple[float, float]] = {}

    def use_sharing(self, ledger: GpuLedger) -> None:
        """The engine's GPU ledger, on clusters where jobs may share GPUs."""
        self.sharing = ledger

    def sharing_changed(self, job: JobStatus, now: float) -> None:
        """A partner came or left: new speed from ``now`` (the engine folded progress)."""
        if job.allocation is None:
            job.rate = 0.0
            self._boundary.pop(job.job_id, None)
            return
        self._queue(job, job.allocation, max(job.stall_until, now))

    def _speed(self, job: JobStatus) -> float:
        """The interference model's speed factor of ``job`` beside its current partners."""
        speed = 1.0
        if self.sharing is not None:
            for partners in self.sharing.partners(job.job_id):
                on_gpu = 1.0
                for partner in partners:
                    on_gpu *= self.interference.pair_speed(job.spec, partner.spec)
                speed = min(speed, on_gpu)
        job.speed = speed
        return speed

    def on_submit(self, job: JobStatus) -> None:
        job.work_total = self.throughput.total_work(job.spec)
        job.target_rate = self.throughput.target_rate(job.spec)

    def launch(self, job: JobStatus, allocation: Allocation, now: float, pause: float) -> None:
        self._start(job, allocation, now, pause)

    def reconfigure(self, job: JobStatus, allocation: Allocation, now: float, pause: float) -> None:
        self._start(job, allocation, now, pause)

    def stop(self, job: JobStatus, now: float) -> None:
        job.rate = 0.0
        self._boundary.pop(job.job_id, None)

    def crossed_boundary(self, job: JobStatus, now: float) -> bool:
        """Called for a job's current queued event at ``now``: if it is a rate boundary,
        fold progress in, queue the next event and return True (the job goes on)."""
        hit = self._boundary.get(job.job_id) if self._boundary else None
        if hit is None or hit[0] != now:
            return False
        progress = hit[1]
        del self._boundary[job.job_id]
        job.advance(now)
        # The event time is rounded to 1 us: snap to the boundary it stands for, so the
        # next rate is the next segment's (never the same boundary again).
        job.work_done = min(max(job.work_done, progress), job.work_total)
        self._queue(job, job.allocation, max(job.stall_until, now))  # type: ignore[arg-type]
        return True

    def _start(self, job: JobStatus, allocation: Allocation, now: float, pause: float) -> None:
        job.last_update = now
        job.stall_until = now + pause
        self._queue(job, allocation, job.stall_until)

    def _queue(self, job: JobStatus, allocation: Allocation, start: float) -> None:
        if self._boundary:
            self._boundary.pop(job.job_id, None)
        horizon = math.inf
        if self._rate_at is not None and job.spec.batch is not None:
            job.rate, horizon = self._rate_at(job.spec, allocation, job.work_done)
        else:
            job.rate = self.throughput.rate(job.spec, allocation)
        if self.sharing is not None:
            speed = self._speed(job)
            if speed != 1.0:
                job.rate *= speed
        remaining = job.work_total - job.work_done
        if remaining <= 0:
            self.completions.push(start, job.job_id, job.version)
        elif job.rate > 0:
            if horizon < job.work_total:
                at = round(start + max(horizon - job.work_done, 0.0) / job.rate, TIME_DECIMALS)
                self._boundary[job.job_id] = (at, horizon)
                self.completions.push(at, job.job_id, job.version)
            else:
                self.completions.push(start + remaining / job.rate, job.job_id, job.version)
