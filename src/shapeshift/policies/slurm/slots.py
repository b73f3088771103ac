"""Per-job rows kept in reused slots of arrays, for the replay's bulk reads.

The priority calculation (``clock.StaticRows``) and the compiled backfill cycle
(``candidate_rows.CandidateRows``) each read a row per pending job with one index. A job
takes a slot when first seen and gives it back when it leaves the queue; a new job
reuses a given-back slot before the arrays grow (doubling), so the arrays stay about as
long as the queue.
"""

from __future__ import annotations

import numpy as np


class ReusedSlots:
    """``slot``: each job's slot in the arrays named by ``columns`` (attributes of the
    subclass, all of one length)."""

    columns: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.slot: dict[str, int] = {}
        self._free: list[int] = []

    def _claim(self, job_id: str) -> int:
        """A slot for ``job_id``: a given-back one, else the next, the arrays doubled
        when full."""
        if self._free:
            slot = self._free.pop()
        else:
            slot = len(self.slot)
            if slot == len(getattr(self, self.columns[0])):
                for name in self.columns:
                    column = getattr(self, name)
                    setattr(self, name, np.concatenate((column, np.zeros_like(column))))
        self.slot[job_id] = slot
        return slot

    def drop(self, job_id: str) -> None:
        slot = self.slot.pop(job_id, None)
        if slot is not None:
            self._free.append(slot)
