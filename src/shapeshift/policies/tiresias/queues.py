"""Tiresias's queues for one partition, kept so that a decision costs what changed.

The rule (``policy.py``) visits the jobs of queue 0, 1, ... in order, keeps or
starts each job whose GPUs fit what is left of the capacity while any is left, and then
puts every queue's waiting jobs behind its running ones. Walked as lists, that costs every
active job per decision: hundreds of running jobs and, under load, tens of thousands of
waiting ones. Three facts of the rule let a decision skip them:

* **The running part of a queue** is kept whole when its GPUs fit what is left (its jobs
  hold those GPUs now), so only the sum is read; it is walked only when jobs ahead took
  capacity from it (then those it no longer fits are preempted: what changed).
* **The waiting part** is visited in order, but a job whose GPUs exceed what is left is
  passed over and never taken later in the walk (capacity only shrinks). One heap per GPU
  count, merged by queue position, hands out exactly the jobs the walk would take, never
  visiting the ones it passes over.
* **Positions** are numbers: a job entering the end of a queue (an arrival, a demotion, a
  promotion) gets the next number from a rising counter; the jobs a decision preempts go
  ahead of the queue's waiting jobs, in their order, with numbers from a falling counter.
  Heap entries whose number no longer matches the job's are dropped lazily.

A job moving between queues during a decision (a running job demoted, a waiting job
promoted) joins the waiting part of its new queue at the end, as the list rule appends
it; if it was running, the decision keeps it when the walk reaches it and preempts it
otherwise.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Visit:
    """A job the walk took from a queue's waiting part, with its position."""

    job_id: str
    gpus: int
    seq: int


@dataclass
class Walk:
    """What one decision's walk found: running jobs it no longer fits (to preempt) and,
    per queue, the jobs it took from the waiting part, in walk order."""

    preempt: list[tuple[int, str, int]] = field(default_factory=list)  # (queue, job, GPUs), in walk order
    taken: list[list[Visit]] = field(default_factory=list)


class LevelQueues:
    """The queues of one partition: per queue, the running part in order and the waiting
    part as one heap of ``(position, job)`` per GPU count."""

    def __init__(self, levels: int):
        self.running: list[dict[str, int]] = [{} for _ in range(levels)]  # job -> GPUs, in order
        self._running_gpus = [0] * levels
        self._zero_gpu = [0] * levels  # running jobs that hold no GPU (the walk can stop before them)
        self._waiting: list[dict[int, list[tuple[int, str]]]] = [{} for _ in range(levels)]
        #: Every job in a waiting part (running movers included until the walk): (queue, position).
        self.position: dict[str, tuple[int, int]] = {}
        self._back = 0
        self._front = 0
        self._stale = 0  # heap entries whose job moved or left

    def __len__(self) -> int:
        """Jobs in the queues, running and waiting."""
        return len(self.position) + sum(map(len, self.running))

    # ------------------------------------------------------------ membership
    def add_running(self, level: int, job_id: str, gpus: int) -> None:
        self.running[level][job_id] = gpus
        self._running_gpus[level] += gpus
        self._zero_gpu[level] += gpus == 0

    def drop_running(self, level: int, job_id: str) -> None:
        gpus = self.running[level].pop(job_id)
        self._running_gpus[level] -= gpus
        self._zero_gpu[level] -= gpus == 0

    def append(self, level: int, job_id: str, gpus: int) -> None:
        """``job_id`` enters the end of queue ``level`` (to its waiting part)."""
        self._push(level, job_id, gpus, self._back)
        self._back += 1

    def put_back(self, level: int, visit: Visit) -> None:
        """A job the walk took returns where it was (its start failed)."""
        self._push(level, visit.job_id, visit.gpus, visit.seq)

    def prepend(self, level: int, jobs: list[tuple[str, int]]) -> None:
        """``jobs`` (id, GPUs), in order, go ahead of queue ``level``'s waiting jobs."""
        first = self._front - len(jobs)
        for i, (job_id, gpus) in enumerate(jobs):
            self._push(level, job_id, gpus, first + i)
        self._front = first

    def forget(self, job_id: str) -> None:
        """A waiting job left (finished, cancelled); its heap entry is dropped lazily."""
        self._leave(job_id)

    def _leave(self, job_id: str) -> None:
        where = self.position.pop(job_id, None)
        if where is not None:
            self._stale += 1

    def _push(self, level: int, job_id: str, gpus: int, seq: int) -> None:
        self._leave(job_id)  # a job moving between queues: its old entry goes stale
        self.position[job_id] = (level, seq)
        heapq.heappush(self._waiting[level].setdefault(gpus, []), (seq, job_id))
        if self._stale > len(self.position) + 1024:  # mostly stale (promotions): compact
            self._compact()

    def _compact(self) -> None:
        for level, heaps in enumerate(self._waiting):
            for heap in heaps.values():
                heap[:] = [entry for entry in heap if self.position.get(entry[1]) == (level, entry[0])]
                heapq.heapify(heap)
        self._stale = 0

    def _head(self, level: int, gpus: int) -> tuple[int, str] | None:
        heap = self._waiting[level][gpus]
        while heap and self.position.get(heap[0][1]) != (level, heap[0][0]):
            heapq.heappop(heap)
        return heap[0] if heap else None

    # ------------------------------------------------------------ walk
    def walk(self, capacity: int) -> Walk:
        """The list rule's walk over every queue with ``capacity`` GPUs. Running jobs it
        no longer fits leave their running part (the caller preempts them and puts them
        ahead of the waiting jobs, see ``prepend``); the jobs it takes from waiting parts
        leave them (the caller starts them, or keeps running movers)."""
        walk = Walk(taken=[[] for _ in self.running])
        for level, running in enumerate(self.running):
            total = self._running_gpus[level]
            if total < capacity or (total == capacity and total > 0 and not self._zero_gpu[level]):
                capacity -= total  # every running job fits in turn: kept, nothing to walk
            elif running:
                capacity = self._walk_running(level, capacity, walk)
            if capacity > 0:
                capacity = self._walk_waiting(level, capacity, walk)
        return walk

    def _walk_running(self, level: int, capacity: int, walk: Walk) -> int:
        dropped: list[tuple[int, str, int]] = []
        for job_id, gpus in self.running[level].items():
            if capacity > 0 and gpus <= capacity:
                capacity -= gpus
            else:
                dropped.append((level, job_id, gpus))
        for _, job_id, _ in dropped:
            self.drop_running(level, job_id)
        walk.preempt.extend(dropped)
        return capacity

    def _walk_waiting(self, level: int, capacity: int, walk: Walk) -> int:
        heads = []
        for gpus in self._waiting[level]:
            head = self._head(level, gpus) if gpus <= capacity else None
            if head is not None:
                heads.append((head[0], gpus))
        heapq.heapify(heads)
        taken = walk.taken[level]
        while heads and capacity > 0:
            seq, gpus = heads[0]
            if gpus > capacity:  # this size and every job of it: passed over for good
                heapq.heappop(heads)
                continue
            _, job_id = heapq.heappop(self._waiting[level][gpus])
            del self.position[job_id]
            taken.append(Visit(job_id, gpus, seq))
            capacity -= gpus
            head = self._head(level, gpus)
            if head is None:
                heapq.heappop(heads)
            else:
                heapq.heapreplace(heads, (head[0], gpus))
        return capacity
