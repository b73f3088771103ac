"""The pending queue in priority order, kept from one decision to the next.

The main scheduler and backfill take pending jobs by (partition tier, priority,
submission order) (``job_scheduler.c``, ``sort_job_queue``). Between two priority
recalculations no pending job's key changes: only arrivals and departures move the
queue. Sorting all pending jobs again at every decision costs a Python key call per job
(milliseconds with thousands waiting, at every submission and completion); this keeps
the sorted jobs and places an arrival by binary search. The keys are unique (the
submission order is), so the order is the one a full sort gives.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

Key = tuple[int, int, int]


class PriorityOrder:
    """Pending jobs sorted by key; rebuilt after a recalculation, updated otherwise.

    Only the jobs are kept: an arrival is placed by binary search over the kept jobs'
    keys, computed when compared (``key`` reads the policy's kept tiers, priorities and
    submission orders, which do not change between recalculations), and a departure is
    found by its place in the list (most leave from near the front). Keeping each job's
    key too cost a tuple and a dictionary entry per waiting job at every recalculation.
    ``rebuild``, ``update`` and ``extend`` return the kept list itself, not a copy (a
    decision reads it before it starts a job, which ``discard``s it; a copy cost a pass
    over the whole queue at every decision): read it before the order changes."""

    def __init__(self) -> None:
        self.jobs: list[str] = []
        self.valid = False

    def rebuild(self, pending: list[str], keys: list[Key]) -> list[str]:
        """Every pending job sorted anew by its key in ``keys`` (after a priority
        recalculation)."""
        columns = tuple(map(list, zip(*keys, strict=True))) if keys else ([], [], [])
        return self.rebuild_columns(pending, *columns)

    def rebuild_columns(
        self, pending: list[str], tiers: Sequence[int] | np.ndarray, prios: Sequence[int] | np.ndarray,
        orders: Sequence[int] | np.ndarray,
    ) -> list[str]:
        """``rebuild`` with the keys given as their three columns (lists or arrays)."""
        if not pending:
            self.jobs = []
        else:
            # The keys are unique, so numpy's lexicographic sort of their three columns
            # (the last column given first) is the tuples' sort.
            t, p, o = (np.asarray(c, np.int64) for c in (tiers, prios, orders))
            self.jobs = list(map(pending.__getitem__, np.lexsort((o, p, t)).tolist()))
        self.valid = True
        return self.jobs

    def update(self, pending: list[str], key: Callable[[str], Key]) -> list[str]:
        """``pending`` in order, from the kept order: jobs no longer pending leave it,
        new ones are placed by their key (computed now)."""
        kept = set(self.jobs)
        new = [j for j in pending if j not in kept]
        if len(kept) + len(new) != len(pending):  # some kept job is no longer pending
            present = set(pending)
            self.jobs = [j for j in self.jobs if j in present]
        for job_id in new:  # keys are unique: any order of insertion
            self._insert(job_id, key)
        return self.jobs

    def extend(
        self, fresh: list[str], count: int, key: Callable[[str], Key], pending: Callable[[], list[str]]
    ) -> list[str]:
        """The order with ``fresh`` (jobs queued since the last decision) placed, when the
        kept jobs are exactly the rest of the ``count`` pending ones; otherwise (a job
        left the queue without starting) ``update`` over ``pending()``."""
        if len(self.jobs) + len(fresh) != count:
            return self.update(pending(), key)
        for job_id in fresh:
            self._insert(job_id, key)
        return self.jobs

    def _insert(self, job_id: str, key: Callable[[str], Key]) -> None:
        self.jobs.insert(bisect.bisect_left(self.jobs, key(job_id), key=key), job_id)

    def discard(self, job_id: str) -> None:
        """``job_id`` out of the order (it started; if it comes back, its key is new)."""
        with contextlib.suppress(ValueError):
            self.jobs.remove(job_id)


def fresh_jobs(view: ClusterView, prio: Mapping[str, int]) -> list[str]:
    """Pending jobs without a priority yet: those queued since the last decision. The
    engine appends a job to its partition's queue when it is submitted or requeued, and
    every decision gives a priority to each pending job that stays, so they are each
    partition's last jobs (found from its end, in queue order)."""
    fresh: list[str] = []
    for part in view.partitions:
        tail: list[str] = []
        for job_id in reversed(view.pending(part)):
            if job_id in prio:
                break
            tail.append(job_id)
        fresh.extend(reversed(tail))
    return fresh


def bulk_keys(
    jobs: list[str],
    tiers: Mapping[str, int],
    prio: Mapping[str, int],
    order: Mapping[str, int],
    key: Callable[[str], Key],
) -> tuple[list[int], list[int], list[int]]:
    """The sort key (-tier, -priority, submission order) of each of ``jobs`` as three
    columns, read in bulk from the kept tiers, priorities and orders (a recalculation
    re-sorts the whole queue); ``key`` gives, and keeps, the tier of a job whose tier
    is not kept yet."""
    negated = [-t if t is not None else key(j)[0] for j, t in zip(jobs, map(tiers.get, jobs), strict=True)]
    return negated, [-p for p in map(prio.__getitem__, jobs)], list(map(order.__getitem__, jobs))


class TailReasons(Mapping[str, str]):
    """A decision's reasons: those given job by job (``given``, still written to after
    this is made), with one reason for a run of the queue (``tail``: the jobs the main
    scheduler did not reach once every partition had stopped). The whole mapping is made
    only when read, in the order a dict written in turn would have: ``given``'s entries
    written before the run, the run, then the later ones (which replace a run job's
    reason); the jobs in ``started`` keep none but a given one. A replay never reads
    the reasons, and writing the run out cost a dict entry per waiting job at every
    decision."""

    def __init__(self, given: dict[str, str], tail: list[str], reason: str, started: Collection[str]) -> None:
        self._given, self._tail, self._reason, self._started = given, tail, reason, started
        self._before = list(given)
        self._made: dict[str, str] | None = None

    def _all(self) -> dict[str, str]:
        if self._made is None:
            given = self._given
            made = {k: given[k] for k in self._before if k in given}
            made.update(dict.fromkeys(self._tail, self._reason))
            made.update(given)
            for job_id in self._started:
                if job_id not in given:
                    made.pop(job_id, None)
            self._made = made
        return self._made

    def __getitem__(self, job_id: str) -> str:
        return self._all()[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())
