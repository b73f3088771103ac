"""When Tiresias jobs change queue, kept in heaps.

A running job is demoted when its service reaches its queue's limit: its instant is
fixed while it runs, so it sits in a heap per partition (``QueueInstants.demotions``).

With ``starvation = k > 0`` a job changes queue at one of two instants: a running job is
demoted when its service reaches its queue's limit, and a waiting job that has run is
promoted back to queue 0 when its pending time reaches k times its run time since its
last promotion. The rule as written checks every job at every decision and takes the
earliest next instant over every job: O(active jobs) per decision, which under a long
queue is the whole simulation's cost.

Both instants are fixed while the job stays running or stays waiting: service grows at a
constant rate while a job runs, and neither its service nor its run time changes while it
waits. So each is computed when the job's state changes and kept in a heap. A decision
looks only at the jobs whose instant has come (within ``WINDOW``: the rule's own tests
use exact arithmetic and a 1 us tolerance, and looking at a job early changes nothing),
and recomputes the next instant only for the jobs nearest the front of each heap, as the
rule recomputes it (the same floating-point operations at the same instant).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView
    from shapeshift.policies.tiresias.queues import LevelQueues

#: Jobs whose stored instant is within this many seconds are looked at: far wider than
#: the rounding between an instant computed at one decision and at another (nanoseconds),
#: and than the rule's tolerance on a limit (1e-6 GPU-seconds).
WINDOW = 1e-3


class Instants:
    """One instant per job, in a heap with lazy deletion (an entry counts only while it
    is the job's current instant)."""

    __slots__ = ("_at", "_heap")

    def __init__(self) -> None:
        self._at: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._at)

    def set(self, job_id: str, at: float) -> None:
        """``job_id``'s instant is now ``at`` (none when infinite)."""
        if math.isinf(at):
            self._at.pop(job_id, None)
            return
        if self._at.get(job_id) == at:
            return
        self._at[job_id] = at
        heapq.heappush(self._heap, (at, job_id))
        if len(self._heap) > 2 * len(self._at) + 1024:  # mostly stale: rebuild
            self._heap = [(t, j) for j, t in self._at.items()]
            heapq.heapify(self._heap)

    def drop(self, job_id: str) -> None:
        self._at.pop(job_id, None)

    def _live_top(self) -> tuple[float, str] | None:
        heap, at = self._heap, self._at
        while heap and at.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def until(self, until: float) -> list[str]:
        """Jobs whose instant is at most ``until``, earliest first; their instants stay."""
        return self._popped_while(lambda t: t <= until)

    def take_until(self, until: float) -> list[str]:
        """Jobs whose instant is at most ``until``, earliest first; their instants go."""
        heap, at = self._heap, self._at
        due: list[str] = []
        while heap and heap[0][0] <= until:
            instant, job_id = heapq.heappop(heap)
            if at.get(job_id) == instant:
                del at[job_id]
                due.append(job_id)
        return due

    def first(self) -> float:
        """The earliest instant (infinite when none)."""
        top = self._live_top()
        return math.inf if top is None else top[0]

    def nearest(self) -> list[str]:
        """Jobs whose instant is within ``WINDOW`` of the earliest one."""
        top = self._live_top()
        if top is None:
            return []
        limit = top[0] + WINDOW
        return self._popped_while(lambda t: t <= limit)

    def _popped_while(self, keep_going: Callable[[float], bool]) -> list[str]:
        popped: list[tuple[float, str]] = []
        while (top := self._live_top()) is not None and keep_going(top[0]):
            popped.append(heapq.heappop(self._heap))
        for entry in popped:
            heapq.heappush(self._heap, entry)
        return list(dict.fromkeys(job_id for _, job_id in popped))


#: ``TiresiasPolicy._next_change(view, job_id, track, runs)``: when the job changes queue
#: next if nothing else happens (``runs``: it runs after this decision).
NextChange = Callable[["ClusterView", str, Any, bool], float]


class QueueInstants:
    """Per partition, the running jobs' demotion instants and, with the starvation rule,
    the waiting jobs' promotion instants, for ``TiresiasPolicy``. ``tracks`` is the
    policy's job -> track (``queue`` and ``partition`` are read)."""

    def __init__(self, tracks: dict[str, Any], next_change: NextChange):
        self._tracks = tracks
        self._next_change = next_change
        self._by_partition: dict[str, tuple[Instants, Instants]] = {}

    def _of(self, partition: str) -> tuple[Instants, Instants]:
        return self._by_partition.setdefault(partition, (Instants(), Instants()))

    def demotions(self, partition: str) -> Instants:
        return self._of(partition)[0]

    def forget(self, partition: str, job_id: str) -> None:
        """``job_id`` left (finished, withdrawn): it changes queue no more."""
        demote, promote = self._of(partition)
        demote.drop(job_id)
        promote.drop(job_id)

    def movers(
        self,
        view: ClusterView,
        partition: str,
        queues: LevelQueues,
        new_running: Collection[str],
    ) -> list[str]:
        """The jobs whose queue may change now (their instant has come, or they are new
        and already running), in the order the rule visits every job: queue by queue,
        the running part in its order, then the waiting part by position."""
        demote, promote = self._of(partition)
        until = view.now + WINDOW
        tracks = self._tracks
        due = [j for j in dict.fromkeys([*demote.until(until), *promote.until(until), *new_running]) if j in tracks]
        index: dict[int, dict[str, int]] = {}

        def visit_order(job_id: str) -> tuple[int, int, int]:
            level = tracks[job_id].queue
            if job_id in queues.running[level]:
                if level not in index:
                    index[level] = {j: i for i, j in enumerate(queues.running[level])}
                return (level, 0, index[level][job_id])
            return (level, 1, queues.position[job_id][1])

        return sorted(due, key=visit_order)

    def refresh(self, view: ClusterView, partition: str, queues: LevelQueues, changed: list[str]) -> float:
        """After a decision: new instants for the jobs whose state or queue may have
        changed (``changed``, and those stopped outside a decision, in ``view.touched``);
        returns the partition's next instant, recomputed as the rule does, for the jobs
        nearest the front of each heap (the rule recomputes it for every job)."""
        demote, promote = self._of(partition)
        tracks, next_change = self._tracks, self._next_change
        touched = [j for j in view.touched if view.job(j).partition == partition]
        for job_id in dict.fromkeys([*changed, *touched]):
            track = tracks.get(job_id)
            if track is not None and job_id in queues.running[track.queue]:
                promote.drop(job_id)
                demote.set(job_id, next_change(view, job_id, track, True))
            elif track is not None and job_id in queues.position:
                demote.drop(job_id)
                promote.set(job_id, next_change(view, job_id, track, False))
            else:
                demote.drop(job_id)
                promote.drop(job_id)
        nearest = [j for j in dict.fromkeys([*demote.nearest(), *promote.nearest()]) if j in tracks]
        return min(
            (next_change(view, j, tracks[j], j in queues.running[tracks[j].queue]) for j in nearest),
            default=math.inf,
        )
