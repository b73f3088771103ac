"""Each backfill candidate's numbers for the compiled cycle, kept while it waits.

The compiled cycle (``plan_compiled``) reads a candidate as a row of numbers: its span,
per-node thresholds and share (``fit._share``), its limit, and its partition. They do
not change while the job waits, and a cycle tests the same few hundred jobs as the one
before it, so the rows are made once per job into reused slots of one array, and a
cycle gathers its candidates' rows with one index instead of a Python call each.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shapeshift.policies.slurm.fit import _cumulative, _share
from shapeshift.policies.slurm.slots import ReusedSlots

__all__ = ["CandidateRows", "partition_arrays", "row_of"]

#: Columns of a row: span, thresholds (GPUs, CPUs, memory), per-node share (GPUs, CPUs,
#: memory), limit.
WIDTH = 8


def row_of(cand: Any) -> tuple[float, ...]:
    """``cand``'s row (see ``WIDTH``)."""
    _, span, share, (tg, tc, tm) = _share(cand.need, cand.largest)
    return (
        float(span), float(tg), float(tc), float(tm), float(share.gpus), float(share.cpus), float(share.mem),
        float(cand.limit),
    )


class CandidateRows(ReusedSlots):
    """Rows of the pending jobs a cycle has tested (``plan.Candidate``s) in reused slots
    (``slots.ReusedSlots``), with each one's partition as an index into ``groups`` (node
    lists by identity, as ``Candidate.groups`` shares them)."""

    columns = ("rows", "part")

    def __init__(self) -> None:
        super().__init__()
        self.rows = np.zeros((256, WIDTH), np.float64)
        self.part = np.zeros(256, np.int64)
        self.groups: list[list[list[int]]] = []
        self._group_index: dict[int, int] = {}

    def slot_of(self, cand: Any) -> int:
        """``cand``'s slot, its row made on first sight."""
        slot = self.slot.get(cand.job_id)
        if slot is not None:
            return slot
        slot = self._claim(cand.job_id)
        index = self._group_index.get(id(cand.groups))
        if index is None:  # the list is kept in ``groups``, so its identity is not reused
            index = self._group_index[id(cand.groups)] = len(self.groups)
            self.groups.append(cand.groups)
        self.rows[slot] = row_of(cand)
        self.part[slot] = index
        return slot


def partition_arrays(
    part_index: np.ndarray, groups: list[list[list[int]]], size: int
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The partitions of a cycle's candidates (``part_index`` into ``groups``), each once:
    each candidate's partition among them, and per partition its node mask, the offsets
    of its cumulative levels (``fit._cumulative``) into the flattened levels, and each
    node's rank, the first level holding it (past the last where it is not in it)."""
    if part_index.size and part_index.min() == part_index.max():  # one partition (most)
        present, inverse = part_index[:1], np.zeros(part_index.size, np.int64)
    else:
        present, inverse = np.unique(part_index, return_inverse=True)
    key = (id(groups), size, *present.tolist())
    hit = _PARTITIONS.get(key)
    if hit is not None and hit[0] is groups:  # the registry only grows: its entries stay
        return inverse.astype(np.int64).reshape(-1), hit[1]
    masks = np.zeros((present.size, size), dtype=bool)
    ranks = np.full((present.size, size), size + 1, np.int64)
    part_lvl, lvl_off, levels = [0], [0], []
    for g, index in enumerate(present.tolist()):
        for rank, grp in reversed(list(enumerate(groups[index]))):
            masks[g, grp] = True
            ranks[g, grp] = rank
        for idx, _ in _cumulative(groups[index]):
            levels.append(idx)
            lvl_off.append(lvl_off[-1] + idx.size)
        part_lvl.append(len(levels))
    flat = np.concatenate(levels).astype(np.int64) if levels else np.zeros(0, np.int64)
    arrays = (masks, np.array(part_lvl, np.int64), np.array(lvl_off, np.int64), flat, ranks)
    if len(_PARTITIONS) >= 64:
        _PARTITIONS.clear()
    _PARTITIONS[key] = (groups, arrays)
    return inverse.astype(np.int64).reshape(-1), arrays


#: ``partition_arrays``' answers per groups registry (by identity, kept to tell a reused
#: identity apart), node count and partitions present: a replay's cycles mostly test the
#: same partitions.
_PARTITIONS: dict[tuple[int, ...], tuple[list[list[list[int]]], tuple[np.ndarray, ...]]] = {}
