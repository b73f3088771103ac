"""SRTF's choice of jobs, with the running jobs ranked in arrays.

Under a long queue every SRTF decision ranks every running job of the partition (a few
hundred on a large cluster) and merges them with the waiting heap until the partition's
GPUs are spoken for. Done one job at a time in Python that is most of the simulation's
time. Here the running jobs' remaining times are computed and sorted as numpy arrays, and
the merge walks the waiting jobs, taking the running jobs ranked before each one as a
block (``searchsorted``), so a decision costs a few array operations plus O(waiting jobs
looked at) Python steps.

Exactly the choice of the one-at-a-time merge (``SrtfPolicy``'s reference path): the
same floating-point operations give the same keys, ties on (remaining, submit time) are
broken by job id as tuple sorting does, and a block is taken whole only when it fits, else
job by job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

import numpy as np

from shapeshift.engine.state import progress_on_arrays
from shapeshift.policies.size_based.srtf_table import DONE, ESTIMATE, GPUS, LAST, RATE, STALL, STARTED, SUBMIT, TOTAL


@dataclass
class RunningRanking:
    """The running jobs of a partition in rank order (remaining, submit time, job id):
    rank ``k`` is row ``order[k]`` of the table, job ``id_at(k)``."""

    order: np.ndarray
    row_ids: list[str]
    remaining: np.ndarray
    submit: np.ndarray
    gpus: np.ndarray
    started: np.ndarray
    #: GPUs of ranks ``0..k`` together (``cumsum(gpus)``): a block of ranks that fits is
    #: recognised from two of these, without touching the block.
    prefix: np.ndarray

    @classmethod
    def of(cls, row_ids: list[str], columns: np.ndarray, now: float, hint: np.ndarray | None = None) -> RunningRanking:
        """Rank the jobs of a ``RunningTable``. Remaining time is ``max(estimate -
        progress_at(now), 0)`` with ``progress_at``'s operations: ``done + rate * active``
        when ``active = now - max(stall, last) > 0``, capped at the job's total work.

        ``hint``: distinct rows in a likely order (the table's ``hint``), the rows it lacks
        merged in. Its order is used only when the remaining times come out strictly
        increasing, which only the sorted order does, so it changes the cost, never the
        result; otherwise the rows are sorted. A hint of every row (no job started since
        the last ranking) gathers the columns in its order once and ranks them there: the
        same element-wise operations, so the same values."""
        if hint is not None and len(hint) == columns.shape[1]:
            ordered = columns[:, hint]
            remaining = _remaining(ordered, now)
            if (remaining[1:] > remaining[:-1]).all():
                gpus = ordered[GPUS].astype(np.int64)
                return cls(hint, row_ids, remaining, ordered[SUBMIT], gpus, ordered[STARTED], gpus.cumsum())
        left = _remaining(columns, now)
        submit = columns[SUBMIT]
        order = None if hint is None else _from_hint(left, hint)
        if order is not None:
            remaining = left[order]
            if not (remaining[1:] > remaining[:-1]).all():
                order = None
        if order is None:
            order = left.argsort(kind="stable")
            remaining = left[order]
        if not (remaining[1:] > remaining[:-1]).all():  # equal remaining: by submit time, then job id
            order = np.lexsort((submit, left))
            remaining, submit = left[order], submit[order]
            tied = (remaining[1:] == remaining[:-1]) & (submit[1:] == submit[:-1])
            if tied.any():  # rare: equal keys, ranked by job id as tuples would be
                keyed = sorted(zip(remaining.tolist(), submit.tolist(), [row_ids[i] for i in order.tolist()],
                                   order.tolist(), strict=True))
                order = np.array([k[3] for k in keyed], dtype=np.int64)
                remaining = np.array([k[0] for k in keyed])
                submit = np.array([k[1] for k in keyed])
        else:
            submit = submit[order]
        gpus = columns[GPUS][order].astype(np.int64)
        return cls(order, row_ids, remaining, submit, gpus, columns[STARTED][order], gpus.cumsum())

    def __len__(self) -> int:
        return len(self.order)

    def id_at(self, k: int) -> str:
        return self.row_ids[int(self.order[k])]

    def position(self, key: tuple[float, float], job_id: str, start: int) -> int:
        """Index of the first running job ranked after the waiting job (key, job_id)."""
        remaining, submit = key
        k = int(self.remaining.searchsorted(remaining))
        n = len(self.order)
        while k < n and self.remaining[k] == remaining and (self.submit[k], self.id_at(k)) < (submit, job_id):
            k += 1
        return max(k, start)

    def victims(self, chosen: Spans, lease: float, now: float) -> tuple[RankedIds, float | None]:
        """The running jobs not ``chosen``, worst-ranked first, that may be evicted now,
        and the first instant a lease keeping one of the others ends (``None``: no lease
        in the way). A job's lease ends ``lease`` seconds after its current run started.

        The walk takes most running jobs in a few spans, so the ranks left out are read
        off the gaps between them; their leases are checked one by one when they are
        few, on arrays when they are many (the same additions and comparisons)."""
        gaps, at = [], 0
        for start, stop in chosen.spans:  # increasing and disjoint, as the walk takes them
            if start > at:
                gaps.append((at, start))
            at = stop
        if at < len(self.order):
            gaps.append((at, len(self.order)))
        ranks = [k for start, stop in reversed(gaps) for k in range(stop - 1, start - 1, -1)]
        first: float | None = None
        if lease > 0 and ranks:
            if len(ranks) > _FEW:
                picked = np.array(ranks)
                expiry = self.started[picked] + lease
                held = expiry > now
                if held.any():
                    first = float(expiry[held].min())
                    ranks = picked[~held].tolist()
            else:
                started, expired = self.started, []
                for k in ranks:
                    ends = started[k] + lease
                    if ends > now:
                        first = float(ends) if first is None or ends < first else first
                    else:
                        expired.append(k)
                ranks = expired
        return RankedIds(self, ranks), first


#: Up to this many eviction candidates, their leases are checked one by one.
_FEW = 32


def _remaining(columns: np.ndarray, now: float) -> np.ndarray:
    """Each job's ``max(estimate - progress_at(now), 0)``, element-wise (a new array)."""
    left = columns[ESTIMATE] - progress_on_arrays(
        columns[DONE], columns[LAST], columns[STALL], columns[RATE], columns[TOTAL], now
    )
    left[left < 0.0] = 0.0
    return left


def _from_hint(left: np.ndarray, hint: np.ndarray) -> np.ndarray:
    """The rows in ``hint``'s order, with the rows it lacks merged in by ``left`` (a
    binary search each, as if ``hint`` were sorted by ``left``; the caller checks)."""
    if len(hint) == len(left):
        return hint
    fresh = np.ones(len(left), dtype=bool)
    fresh[hint] = False
    new = np.flatnonzero(fresh)
    new = new[left[new].argsort(kind="stable")]
    at = left[hint].searchsorted(left[new]).tolist()
    pieces, start = [], 0
    for k, stop in enumerate(at):  # a few rows: slices beat np.insert's set-up
        pieces += (hint[start:stop], new[k : k + 1])
        start = stop
    pieces.append(hint[start:])
    return np.concatenate(pieces)


class Spans:
    """Rank indexes taken by a walk, kept as runs ``(start, stop)``: the walk takes whole
    blocks of ranks at a time, and the eviction pass wants the complement as a mask."""

    __slots__ = ("spans",)

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []

    def extend(self, ranks: range) -> None:
        if ranks:
            self.spans.append((ranks.start, ranks.stop))


class RankedIds(Sequence[str]):
    """Job ids of some ranks of a ranking, looked up only when read: a decision usually
    reads a few of its eviction candidates, not all of them."""

    __slots__ = ("_ranking", "_ranks")

    def __init__(self, ranking: RunningRanking, ranks: list[int]):
        self._ranking = ranking
        self._ranks = ranks

    def __len__(self) -> int:
        return len(self._ranks)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._ranking.id_at(k) for k in self._ranks[index]]
        return self._ranking.id_at(self._ranks[index])


@dataclass
class Choice:
    """Which jobs the merged ranking keeps: running ones by rank index, waiting ones in order."""

    running: Spans
    newcomers: list[str]
    #: Waiting jobs that did not fit the GPUs left: (job id, GPUs, GPUs left then).
    too_big: list[tuple[str, int, int]]


def choose(
    ranking: RunningRanking,
    waiting_within: Callable[[Callable[[], int]], Iterator[tuple[Any, str]]],
    gpus_of: Callable[[str], int],
    capacity: int,
) -> Choice:
    """Walk the merged ranking (running and waiting jobs by key) taking each job whose GPUs
    fit what is left of ``capacity``, until nothing is left or both lists end.

    ``waiting_within(bound)`` gives the waiting jobs in key order, and may skip those
    wider than ``bound()`` GPUs: they could not be taken, and skipping them only merges
    the running blocks around them into one, which ``take_block`` takes the same way."""
    choice = Choice(Spans(), [], [])
    waiting = waiting_within(lambda: capacity)
    n = len(ranking)
    i = 0
    while capacity > 0:
        entry = next(waiting, None)
        end = n if entry is None else ranking.position(entry[0], entry[1], i)
        i, capacity = _take_ranks(ranking, i, end, capacity, choice.running)
        if capacity == 0 or entry is None:
            break
        job_id = entry[1]
        need = gpus_of(job_id)
        if need <= capacity:
            choice.newcomers.append(job_id)
            capacity -= need
        else:
            choice.too_big.append((job_id, need, capacity))
    return choice


def _take_ranks(ranking: RunningRanking, start: int, end: int, capacity: int, taken: Spans) -> tuple[int, int]:
    """``take_block`` over ranks ``start..end-1``, read off the prefix sums: a block's
    GPUs, the longest run that fits and where the GPUs run out are each a subtraction or
    a binary search, not a pass over the block."""
    if start >= end:
        return start, capacity
    prefix = ranking.prefix
    base = int(prefix[start - 1]) if start else 0
    used = int(prefix[end - 1]) - base
    if used < capacity:
        taken.extend(range(start, end))
        return end, capacity - used
    if used == capacity:  # stops at the first job that uses up the last GPU
        stop = int(prefix.searchsorted(base + capacity)) + 1
        taken.extend(range(start, stop))
        return stop, 0
    g = ranking.gpus
    i = start
    while i < end and capacity > 0:
        # The longest run that fits whole is taken; the job after it does not fit and is
        # skipped, and the walk jumps to the next job that fits what is left.
        base = int(prefix[i - 1]) if i else 0
        stop = int(prefix.searchsorted(base + capacity))
        if stop < end and int(prefix[stop]) == base + capacity:
            stop += 1  # the job that uses up the last GPU ends the walk
        stop = min(stop, end)
        if stop > i:
            taken.extend(range(i, stop))
            capacity -= int(prefix[stop - 1]) - base
            i = stop
            if capacity == 0:
                return i, 0
        fits = g[i:end] <= capacity
        first = int(fits.argmax()) if fits.size else 0
        if not fits.size or not fits[first]:
            return end, capacity
        i += first
    return (end if capacity > 0 else i), capacity


class _Taken(Protocol):
    def extend(self, ranks: range, /) -> None: ...


def take_block(g: np.ndarray, start: int, end: int, capacity: int, taken: _Taken) -> tuple[int, int]:
    """Running jobs ``start..end-1`` in rank order, each taken if its GPUs fit; stops at the
    job that uses up the last GPU. Returns the next index and the GPUs left."""
    if start >= end:
        return start, capacity
    block = g[start:end]
    used = block.cumsum()
    if used[-1] <= capacity:
        full = np.flatnonzero(used == capacity)
        stop = start + int(full[0]) + 1 if full.size else end
        taken.extend(range(start, stop))
        return (end if not full.size else stop), capacity - int(used[stop - start - 1])
    i = start
    while i < end and capacity > 0:
        # The longest run that fits whole is taken; the job after it does not fit and is
        # skipped, and the walk jumps to the next job that fits what is left.
        used = g[i:end].cumsum()
        run = int(used.searchsorted(capacity))
        if run < used.size and used[run] == capacity:
            run += 1  # the job that uses up the last GPU ends the walk
        if run:
            taken.extend(range(i, i + run))
            capacity -= int(used[run - 1])
            i += run
            if capacity == 0:
                return i, 0
        fits = np.flatnonzero(g[i:end] <= capacity)
        if fits.size == 0:
            return end, capacity
        i += int(fits[0])
    return (end if capacity > 0 else i), capacity
