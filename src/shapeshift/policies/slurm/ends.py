"""Running jobs' planned ends by job, and whether any is due, without a scan.

The backfill cycle asks, even with nothing to test, whether a running job is past its
limit (then the plan changes as time passes and the next cycle must run). A cluster runs
hundreds of jobs and the replay runs a cycle every ``bf_interval``, so the answer comes
from a heap of ends kept beside the mapping rather than from a pass over all of them."""

from __future__ import annotations

import heapq

from shapeshift.policies.slurm.plan import Ending


class EndsByJob(dict[str, Ending]):
    """A ``dict`` of job -> ``Ending`` that also keeps a min-heap of the ends set; an entry
    whose job was removed or given another ``Ending`` since is dropped when it surfaces."""

    def __init__(self) -> None:
        super().__init__()
        self._heap: list[tuple[float, int, str, Ending]] = []
        self._seq = 0  # ties in end broken by insertion, never by comparing Endings

    def __setitem__(self, job_id: str, ending: Ending) -> None:
        super().__setitem__(job_id, ending)
        self._seq += 1
        heapq.heappush(self._heap, (ending.end, self._seq, job_id, ending))
        if len(self._heap) > 2 * len(self) + 1024:  # stale entries under a far end: rebuilt
            self._heap = [(e.end, k, j, e) for k, (j, e) in enumerate(self.items())]
            heapq.heapify(self._heap)

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
