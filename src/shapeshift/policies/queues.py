"""An incremental priority queue of one partition's waiting jobs.

Size- and service-based orderings (SJF, SRTF, LAS) rank waiting jobs by a key that
cannot change while the job waits: its estimated duration, its remaining work or its
attained service only move while it runs. Re-sorting the whole queue at every event is
O(n log n) per event, which hurts on 80k-job traces with long queues. This queue keeps
waiting jobs in a heap and, at each decision, only

* pushes the jobs that entered the partition's queue since the last decision (new
  arrivals and preempted jobs). The engine's pending queue is insertion-ordered and a
  job re-entering it goes to the end, so the newcomers are exactly its suffix of jobs the
  heap does not know: a reverse scan that stops at the first known job finds them in
  O(new);
* pushes back the jobs it handed out last time that are still waiting.

Jobs are handed out lazily in key order (``iterate``), so a decision that stops at the
first job that does not fit (head-of-line blocking) or when the partition is full pays
O(k log n) for the k jobs it looked at.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

KeyFn = Callable[["ClusterView", str], Any]


class StaticKeyQueue:
    """Waiting jobs of one partition, by ``(key(view, job), job_id)``, smallest first."""

    __slots__ = ("_heap", "_key", "_known", "_partition", "_taken")

    def __init__(self, partition: str, key: KeyFn):
        self._partition = partition
        self._key = key
        self._heap: list[tuple[Any, str]] = []
        self._known: set[str] = set()
        self._taken: list[tuple[Any, str]] = []

    def __len__(self) -> int:
        return len(self._known)

    def sync(self, view: ClusterView) -> None:
        """Catch up with the engine's queue (call once per decision, before ``iterate``)."""
        pending = view.pending(self._partition)
        for entry in self._taken:
            if entry[1] in pending:
                heapq.heappush(self._heap, entry)
            else:
                self._known.discard(entry[1])
        self._taken.clear()
        fresh: list[str] = []
        for job_id in reversed(pending):  # type: ignore[call-overload]
            if job_id in self._known:
                break
            fresh.append(job_id)
        for job_id in reversed(fresh):
            heapq.heappush(self._heap, (self._key(view, job_id), job_id))
            self._known.add(job_id)

    def iterate(self, view: ClusterView) -> Iterator[tuple[Any, str]]:
        """Waiting jobs in key order, popped lazily; what is not launched comes back at the next ``sync``."""
        pending = view.pending(self._partition)
        heap = self._heap
        while heap:
            entry = heapq.heappop(heap)
            if entry[1] not in pending:  # defensive: left the queue without being handed out
                self._known.discard(entry[1])
                continue
            self._taken.append(entry)
            yield entry
