"""Running jobs' planned ends by job, and whether any is due, without a scan.

The backfill cycle asks, even with nothing to test, whether a running job is past its
limit (then the plan changes as time passes and the next cycle must run). A cluster runs
hundreds of jobs and the replay runs a cycle every ``bf_interval``, so the answer comes
from a heap of ends kept beside the mapping rather than from a pass over all of them."""

from __future__ import annotations

import heapq

import numpy as np

from shapeshift.policies.slurm.plan import Ending


class EndsByJob(dict[str, Ending]):
    """A ``dict`` of job -> ``Ending`` that also keeps a min-heap of the ends set; an entry
    whose job was removed or given another ``Ending`` since is dropped when it surfaces."""

    def __init__(self) -> None:
        super().__init__()
        self._heap: list[tuple[float, int, str, Ending]] = []
        self._seq = 0  # ties in end broken by insertion, never by comparing Endings
        #: Each job's (node, share) entries as flat arrays, for the compiled cycle.
        self.pool = EntryPool()
        #: Whether a job was given a new ``Ending`` in place (its mapping order is then
        #: no longer the order the pool's rows were added in).
        self.reordered = False

    def __setitem__(self, job_id: str, ending: Ending) -> None:
        if job_id in self:
            self.reordered = True
        super().__setitem__(job_id, ending)
        self.pool.add(job_id, ending)
        self._seq += 1
        heapq.heappush(self._heap, (ending.end, self._seq, job_id, ending))
        if len(self._heap) > 2 * len(self) + 1024:  # stale entries under a far end: rebuilt
            self._heap = [(e.end, k, j, e) for k, (j, e) in enumerate(self.items())]
            heapq.heapify(self._heap)

    def __delitem__(self, job_id: str) -> None:
        super().__delitem__(job_id)
        self.pool.drop(job_id)

    def pop(self, job_id: str, *default):  # type: ignore[override]
        self.pool.drop(job_id)
        return super().pop(job_id, *default)

    def __reduce__(self) -> tuple:
        # Copied or pickled as its items: the heap is rebuilt from them.
        return (_restore, (dict(self),))

    def any_by(self, now: float) -> bool:
        """Whether a job's planned end is at or before ``now`` (``any(e.end <= now ...)``)."""
        heap = self._heap
        while heap and self.get(heap[0][2]) is not heap[0][3]:
            heapq.heappop(heap)
        return bool(heap) and heap[0][0] <= now


def _restore(items: dict[str, Ending]) -> EndsByJob:
    ends = EndsByJob()
    for job_id, ending in items.items():
        ends[job_id] = ending
    return ends


class EntryPool:
    """Running jobs' (node, GPUs, CPUs, memory) entries in flat arrays, each job's in one
    slot, written when its ``Ending`` is set: a backfill cycle hands the compiled cycle
    these arrays and each running job's slot instead of flattening a thousand
    ``Ending``s every 30 seconds. Slots of ended jobs are reclaimed when the arrays fill."""

    def __init__(self, capacity: int = 1024) -> None:
        self.node = np.zeros(capacity, np.int64)
        self.gpus = np.zeros(capacity, np.int64)
        self.cpus = np.zeros(capacity, np.float64)
        self.mem = np.zeros(capacity, np.float64)
        self.used = 0  # entries written, live or not
        self.live = 0
        self.slot: dict[str, tuple[int, int]] = {}  # job -> (first entry, entries)
        # One row per job added, in the order added: its end, first entry and entries.
        self.row_end = np.zeros(256, np.float64)
        self.row_first = np.zeros(256, np.int64)
        self.row_count = np.zeros(256, np.int64)
        self.row_live = np.zeros(256, np.bool_)
        self.row_job: list[str] = []
        self.row_of: dict[str, int] = {}

    def add(self, job_id: str, ending: Ending) -> None:
        self.drop(job_id)
        count = len(ending.placement)
        if self.used + count > self.node.size:
            self._make_room(count)
        at = self.used
        for i, (n, r) in enumerate(ending.placement, start=at):
            self.node[i] = n
            self.gpus[i] = r.gpus
            self.cpus[i] = r.cpus
            self.mem[i] = r.mem
        self.used += count
        self.live += count
        self.slot[job_id] = (at, count)
        row = len(self.row_job)
        if row == self.row_end.size:
            self._more_rows()
            row = len(self.row_job)
        self.row_end[row], self.row_first[row], self.row_count[row] = ending.end, at, count
        self.row_live[row] = True
        self.row_job.append(job_id)
        self.row_of[job_id] = row

    def drop(self, job_id: str) -> None:
        old = self.slot.pop(job_id, None)
        if old is not None:
            self.live -= old[1]
            self.row_live[self.row_of.pop(job_id)] = False

    def live_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The jobs' ends, first entries and entry counts, in the order they were added."""
        rows = np.flatnonzero(self.row_live[: len(self.row_job)])
        return self.row_end[rows], self.row_first[rows], self.row_count[rows]

    def _more_rows(self) -> None:
        """Live rows moved to the front, in order, in arrays twice as large where they
        would be more than half full."""
        keep = np.flatnonzero(self.row_live[: len(self.row_job)])
        size = self.row_end.size
        while keep.size + 1 > size // 2:
            size *= 2
        arrays = []
        for old in (self.row_end, self.row_first, self.row_count, self.row_live):
            new = np.zeros(size, old.dtype)
            new[: keep.size] = old[keep]
            arrays.append(new)
        self.row_end, self.row_first, self.row_count, self.row_live = arrays
        self.row_job = [self.row_job[r] for r in keep.tolist()]
        self.row_of = {job: row for row, job in enumerate(self.row_job)}

    def _make_room(self, count: int) -> None:
        """Live slots moved to the front (in slot order), in arrays twice as large where
        they would be more than half full."""
        size = self.node.size
        while self.live + count > size // 2:
            size *= 2
        arrays = [np.zeros(size, a.dtype) for a in (self.node, self.gpus, self.cpus, self.mem)]
        pos = 0
        for job_id, (at, n) in list(self.slot.items()):
            for new, old in zip(arrays, (self.node, self.gpus, self.cpus, self.mem), strict=True):
                new[pos : pos + n] = old[at : at + n]
            self.slot[job_id] = (pos, n)
            self.row_first[self.row_of[job_id]] = pos
            pos += n
        self.node, self.gpus, self.cpus, self.mem = arrays
        self.used = pos
