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
from collections.abc import Callable, Container, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView
    from shapeshift.model import JobSpec

KeyFn = Callable[["ClusterView", str], Any]


def newcomers(pending: Iterable[str], known: Container[str], moved: Container[str] = ()) -> list[str]:
    """The jobs that entered the queue since the last sync, in queue order: the suffix of
    the engine's insertion-ordered pending queue that ``known`` does not hold (a job
    re-entering the queue goes to its end), found by a reverse scan in O(new).

    ``moved`` are known jobs that may have left the queue and come back since the last
    sync (the ones handed out): the scan passes over them instead of stopping. A job
    that failed and was re-queued between two decisions (the live runtime) lands behind
    jobs submitted meanwhile, which the scan must not stop short of."""
    fresh: list[str] = []
    for job_id in reversed(pending):  # type: ignore[call-overload]
        if job_id in known:
            if job_id in moved:
                continue
            break
        fresh.append(job_id)
    fresh.reverse()
    return fresh


class StaticKeyQueue:
    """Waiting jobs of one partition, by ``(key(view, job), job_id)``, smallest first.

    The jobs are kept in one heap per GPU count, so that a walk that only wants jobs
    within the GPUs it has left (``iterate(view, max_gpus)``) skips every larger job
    without looking at it: on a long queue of wide jobs and a nearly full partition that
    is the difference between O(queue) and O(log queue) per decision."""

    __slots__ = ("_heaps", "_key", "_known", "_partition", "_taken")

    def __init__(self, partition: str, key: KeyFn):
        self._partition = partition
        self._key = key
        #: GPUs -> heap of (key, job id)
        self._heaps: dict[int, list[tuple[Any, str]]] = {}
        self._known: set[str] = set()
        self._taken: list[tuple[int, tuple[Any, str]]] = []

    def __len__(self) -> int:
        return len(self._known)

    def sync(self, view: ClusterView) -> None:
        """Catch up with the engine's queue (call once per decision, before ``iterate``)."""
        pending = view.pending(self._partition)
        handed = {entry[1] for _, entry in self._taken}
        for gpus, entry in self._taken:
            if entry[1] in pending:
                heapq.heappush(self._heaps[gpus], entry)
            else:
                self._known.discard(entry[1])
        self._taken.clear()
        for job_id in newcomers(pending, self._known, handed):
            gpus = view.job(job_id).spec.num_gpus
            heapq.heappush(self._heaps.setdefault(gpus, []), (self._key(view, job_id), job_id))
            self._known.add(job_id)

    def iterate(self, view: ClusterView, max_gpus: Callable[[], int] | None = None) -> Iterator[tuple[Any, str]]:
        """Waiting jobs in key order, popped lazily; what is not launched comes back at the next ``sync``.

        With ``max_gpus``, only jobs asking for at most ``max_gpus()`` GPUs, read before
        each job is handed out: the bound may only shrink during the walk (a partition's
        GPUs being spoken for), so a size once above it stays skipped."""
        pending = view.pending(self._partition)
        heads = [(heap[0], gpus) for gpus, heap in self._heaps.items() if heap]
        heapq.heapify(heads)
        while heads:
            entry, gpus = heads[0]
            if max_gpus is not None and gpus > max_gpus():
                heapq.heappop(heads)
                continue
            heap = self._heaps[gpus]
            heapq.heappop(heap)
            if heap:
                heapq.heapreplace(heads, (heap[0], gpus))
            else:
                heapq.heappop(heads)
            if entry[1] not in pending:  # defensive: left the queue without being handed out
                self._known.discard(entry[1])
                continue
            self._taken.append((gpus, entry))
            yield entry


#: What a placement's success depends on: GPUs, CPUs, memory and model (placements may
#: read the model's catalogue entry). Two waiting jobs of one shape either both fit a
#: given free state or both do not.
Shape = tuple[int, float, float, str]


def shape_of(spec: JobSpec) -> Shape:
    """A job's shape: what decides whether a placement finds room for it."""
    return (spec.num_gpus, spec.num_cpus, spec.mem_gb, spec.model)


class ShapeQueue:
    """Waiting jobs of one partition grouped by shape, each group sorted by rank key.

    Backfill looks at every waiting job in rank order and starts each one that fits. On a
    long queue most of them cannot fit, and looking costs O(queue) per decision. Grouped
    by shape, a decision skips whole groups instead: a job that fails to place means every
    job of its shape fails too *until the free resources change*, so the group sleeps
    until the next job starts anywhere, and then resumes after that job's rank (its jobs
    ranked in between would have failed against the same free resources). A group whose
    GPUs exceed what is free is never looked at. The decisions are exactly those of the
    full scan; only the waiting reasons of jobs never looked at fall back to the
    schedule's default.

    ``key(view, job_id)`` ranks jobs (smaller first) and must not change while a job
    waits; ``None`` ranks in queue order (FIFO).
    """

    __slots__ = ("_groups", "_handed", "_key", "_known", "_partition", "_seq")

    def __init__(self, partition: str, key: KeyFn | None):
        from sortedcontainers import SortedList

        self._partition = partition
        self._key = key
        self._groups: dict[Shape, SortedList] = {}
        #: job id -> (shape, entry) for every job in a group.
        self._known: dict[str, tuple[Shape, tuple[Any, str]]] = {}
        self._handed: list[str] = []
        self._seq = 0

    def sync(self, view: ClusterView) -> None:
        """Catch up with the engine's queue (once per decision, before ``candidates``)."""
        pending = view.pending(self._partition)
        handed = set(self._handed)
        for job_id in self._handed:
            if job_id not in pending:
                self._drop(job_id)
        self._handed.clear()
        from sortedcontainers import SortedList

        for job_id in newcomers(pending, self._known, handed):
            spec = view.job(job_id).spec
            shape = shape_of(spec)
            self._seq += 1
            entry = ((self._seq if self._key is None else self._key(view, job_id)), job_id)
            group = self._groups.get(shape)
            if group is None:
                group = self._groups[shape] = SortedList()
            group.add(entry)
            self._known[job_id] = (shape, entry)

    def _drop(self, job_id: str) -> None:
        shape, entry = self._known.pop(job_id)
        group = self._groups[shape]
        group.remove(entry)
        if not group:
            del self._groups[shape]

    def backfill(self, view: ClusterView, free_gpus: int, try_start: Callable[[str], bool]) -> bool:
        """Offer waiting jobs to ``try_start`` in rank order, as a full backfill scan would,
        while ``free_gpus`` GPUs remain; ``try_start`` returns whether the job started.

        Returns ``False``, having offered nothing, when a waiting job asks for no GPUs: a
        full scan keeps starting such jobs after the GPUs run out, which grouping by shape
        does not reproduce, so the caller scans instead."""
        if any(shape[0] == 0 for shape in self._groups):
            return False
        pending = view.pending(self._partition)
        heads: list[tuple[tuple[Any, str], Shape, int]] = []  # (entry, shape, index in group)
        for shape, group in self._groups.items():
            if shape[0] <= free_gpus:
                heads.append((group[0], shape, 0))
        heapq.heapify(heads)
        asleep: dict[Shape, int] = {}  # shape -> index of its first job not yet looked at
        while heads and free_gpus > 0:
            entry, shape, index = heapq.heappop(heads)
            job_id = entry[1]
            group = self._groups[shape]
            if job_id not in pending:  # left the queue outside a decision (a cancel)
                self._handed.append(job_id)
            elif shape[0] <= free_gpus and try_start(job_id):
                self._handed.append(job_id)
                free_gpus -= shape[0]
                for other, start in asleep.items():  # free resources changed: wake the others
                    at = max(start, self._groups[other].bisect_right(entry))  # first job ranked after it
                    if at < len(self._groups[other]) and other[0] <= free_gpus:
                        heapq.heappush(heads, (self._groups[other][at], other, at))
                asleep.clear()
            else:
                if shape[0] <= free_gpus:
                    asleep[shape] = index + 1
                continue
            if index + 1 < len(group) and shape[0] <= free_gpus:
                heapq.heappush(heads, (group[index + 1], shape, index + 1))
        return True
