"""``gavel``'s jobs of one partition as rows of arrays, so a round costs array operations,
not Python work per active job.

A round reads, for every active job, its speed on each GPU type, its GPU count, its
arrival rank, the time it received per type and its allocation; and it credits every
running job with the time it ran since the last round. Kept per job in dicts, that was a
few microseconds of interpreter per job per round, and a round comes every 360 s for as
long as anything runs: at 100k jobs, most of the run. Here each job is one row, created
when the policy first sees it; the round's bookkeeping is a handful of vector operations
over the rows.

The arithmetic is the per-job code's, operation for operation (the same sums in the same
order where order matters: a type's time received is a sequential sum in the order jobs
started running, ``add_in_order``), so decisions are bit for bit those of the per-job
bookkeeping it replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from shapeshift.engine.state import JobState
from shapeshift.model import ClusterSpec, JobSpec

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

_LIVE = (JobState.PENDING, JobState.RUNNING)


def add_in_order(total: float, values: np.ndarray) -> float:
    """``total + values[0] + values[1] + ...`` left to right, as a loop adding one by one
    would (``np.cumsum`` accumulates sequentially; ``np.sum`` pairs and rounds otherwise)."""
    if values.size <= 32:  # a short loop costs less than the array calls
        for value in values.tolist():
            total += value
        return total
    return float(np.cumsum(np.concatenate(([total], values)))[-1])


class GavelJobs:
    """One partition's jobs: a row per job the policy has seen, arrays per fact.

    Rows are handed out as jobs appear, freed once a job is gone and nothing refers to
    it, and reused (as ``themis.table.WaitingTable`` does), so the arrays stay as long as
    the most jobs the partition held at once. Rows carry no order: arrival order is
    ``rank`` (Gavel's job id, its tie-break) and the order jobs started running is
    ``on_seq``.
    """

    def __init__(self, partition: str, types: int, speeds: Callable[[JobSpec], tuple[float, ...]]):
        self.partition = partition
        self._types = types
        self._speeds = speeds
        self.row: dict[str, int] = {}
        self.ids: list[str | None] = []
        #: jobs given an arrival rank (seen in a round)
        self.sighted: set[str] = set()
        #: running jobs no round has seen yet: placed between rounds (``fill``) or
        #: adopted from a restarted controller
        self._placed_unsighted: set[str] = set()
        #: jobs touched since the last credit whose run may have ended
        self._check: set[str] = set()
        #: jobs a round had seen that left the partition (finished, withdrawn) since the
        #: ledger's last sync (``priority=age`` keeps no ledger and clears it)
        self.gone: list[str] = []
        #: jobs gone for good whose rows are not freed yet
        self._leaving: list[str] = []
        self._on_counter = 0
        self._free: list[int] = []
        self._allocate(64)

    # ------------------------------------------------------------------ storage
    def _allocate(self, capacity: int) -> None:
        t = self._types
        self.rank = np.full(capacity, -1, dtype=np.int64)
        self.gpus = np.zeros(capacity, dtype=np.int64)
        self.speed = np.zeros((capacity, t))
        #: seconds run on each type since submission (``priority=age``)
        self.received = np.zeros((capacity, t))
        #: Gavel's time received per type since the last reset, its deficits and the
        #: allocation X of the last reset (0 for a job that was not part of it)
        self.job_time = np.zeros((capacity, t))
        self.deficit = np.zeros((capacity, t))
        self.alloc = np.zeros((capacity, t))
        self.in_ledger = np.zeros(capacity, dtype=bool)
        #: the type a job runs on (-1: not running), since when it was last credited, and
        #: when it started running (the order Gavel's bookkeeping credits jobs in)
        self.on_type = np.full(capacity, -1, dtype=np.int64)
        self.on_since = np.zeros(capacity)
        self.on_seq = np.zeros(capacity, dtype=np.int64)

    _COLUMNS = (
        "rank", "gpus", "speed", "received", "job_time", "deficit", "alloc",
        "in_ledger", "on_type", "on_since", "on_seq",
    )  # fmt: skip
    #: what a fresh row holds where it is not 0: no rank yet, not running
    _UNSET: ClassVar[dict[str, int]] = {"rank": -1, "on_type": -1}

    def _grow(self) -> None:
        old = {name: getattr(self, name) for name in self._COLUMNS}
        n = len(self.ids)
        self._allocate(2 * old["rank"].size)
        for name, column in old.items():
            getattr(self, name)[:n] = column[:n]

    @property
    def size(self) -> int:
        """Rows handed out so far, free ones included."""
        return len(self.ids)

    def row_of(self, view: ClusterView, job_id: str) -> int:
        """``job_id``'s row, created (with its speeds and GPU count) on first use."""
        row = self.row.get(job_id)
        if row is not None:
            return row
        if self._free:
            row = self._free.pop()
            for name in self._COLUMNS:  # a reused row starts as a fresh one
                getattr(self, name)[row] = self._UNSET.get(name, 0)
            self.ids[row] = job_id
        else:
            row = len(self.ids)
            if row == self.rank.size:
                self._grow()
            self.ids.append(job_id)
        spec = view.job(job_id).spec
        self.row[job_id] = row
        self.gpus[row] = spec.num_gpus
        self.speed[row] = self._speeds(spec)
        return row

    def existing_rows(self, job_ids: Iterable[str], count: int) -> np.ndarray:
        """The rows of ``count`` jobs that already have one (``KeyError`` otherwise)."""
        return np.fromiter(map(self.row.__getitem__, job_ids), np.int64, count)

    # ------------------------------------------------------------------ arrivals
    def sight(self, view: ClusterView, ranks: Iterator[int], everyone: bool = False) -> list[str]:
        """Give the partition's jobs not seen in a round yet their arrival ranks: waiting
        jobs in queue order, then running ones in running order; returns them. Running
        jobs are looked at only when some were placed or adopted unseen, or with
        ``everyone`` (a full pass: ``priority=age``, or the ledger's safety net)."""
        fresh = [j for j in view.pending(self.partition) if j not in self.sighted]
        if everyone or self._placed_unsighted:
            fresh += [j for j in view.running(self.partition) if j not in self.sighted]
            self._placed_unsighted.clear()
        for job_id in fresh:
            row = self.row_of(view, job_id)  # first: it may grow the arrays
            self.rank[row] = next(ranks)
        self.sighted.update(fresh)
        return fresh

    def note_touched(self, view: ClusterView, job_id: str) -> None:
        """A job of this partition whose state changed since the last decision."""
        row = self.row.get(job_id)
        if row is None:
            return
        if self.on_type[row] >= 0:
            self._check.add(job_id)
        if view.job(job_id).state not in _LIVE:
            self._leaving.append(job_id)
            if job_id in self.sighted:
                self.gone.append(job_id)

    # ------------------------------------------------------------------ running
    def started(self, view: ClusterView, job_id: str, k: int) -> None:
        """``job_id`` runs on type ``k`` from now (credited before, if it ran)."""
        row = self.row_of(view, job_id)
        if job_id not in self.sighted:
            self._placed_unsighted.add(job_id)
        if self.on_type[row] < 0:
            self.on_seq[row] = self._on_counter
            self._on_counter += 1
        self.on_type[row] = k
        self.on_since[row] = view.now

    def stopped(self, job_id: str) -> None:
        row = self.row.get(job_id)
        if row is not None:
            self.on_type[row] = -1
            self._placed_unsighted.discard(job_id)

    def is_on(self, job_id: str) -> bool:
        row = self.row.get(job_id)
        return row is not None and self.on_type[row] >= 0

    def credit_one(self, view: ClusterView, job_id: str, type_time: np.ndarray | None) -> None:
        """Credit one running job with the time since it was last credited (it is about
        to stop or move)."""
        row = self.row[job_id]
        k, since = int(self.on_type[row]), self.on_since[row]
        status = view.job(job_id)
        until = view.now if status.end_time is None else min(view.now, status.end_time)
        if until > since:
            self.received[row, k] = self.received[row, k] + until - since
            if self.in_ledger[row]:
                self.job_time[row, k] += until - since
            if type_time is not None:
                type_time[k] += until - since
        self.on_since[row] = view.now

    def credit_all(self, view: ClusterView, type_time: np.ndarray | None) -> None:
        """Credit every job that ran since it was last credited, in the order they started
        running (a job that finished meanwhile up to its end, as Gavel counts a
        micro-task), and forget the ones that stopped. Only jobs touched since the last
        credit are checked for having stopped: this relies on the engine's contract that
        every stop and completion lists the job in ``ClusterView.touched``."""
        n = self.size
        on = np.flatnonzero(self.on_type[:n] >= 0)
        check, self._check = self._check, set()
        if on.size == 0:
            return
        on = on[np.argsort(self.on_seq[on], kind="stable")]
        now = view.now
        until = np.full(on.size, now)
        ended: list[int] = []
        if check:
            position = np.full(n, -1, dtype=np.int64)
            position[on] = np.arange(on.size)
            allocations = view.allocations
            for job_id in check:
                row = self.row.get(job_id, -1)
                if row < 0 or position[row] < 0:
                    continue
                end = view.job(job_id).end_time
                if end is not None:
                    until[position[row]] = min(now, end)
                if end is not None or job_id not in allocations:
                    ended.append(row)
        k = self.on_type[on]
        since = self.on_since[on]
        ran = until > since
        rows, k, until, since = on[ran], k[ran], until[ran], since[ran]
        self.received[rows, k] = self.received[rows, k] + until - since
        seconds = until - since
        ledgered = self.in_ledger[rows]
        self.job_time[rows[ledgered], k[ledgered]] += seconds[ledgered]
        if type_time is not None:
            for t in range(type_time.size):
                type_time[t] = add_in_order(float(type_time[t]), seconds[k == t])
        self.on_since[on] = now
        for row in ended:
            self.on_type[row] = -1
            self._placed_unsighted.discard(self.ids[row])  # type: ignore[arg-type]

    # ------------------------------------------------------------------ leaving
    def release(self) -> None:
        """Free the rows of jobs gone for good that nothing refers to any more (out of the
        ledger, not running), for reuse."""
        waiting = []
        for job_id in self._leaving:
            row = self.row.get(job_id)
            if row is None:
                continue
            if self.in_ledger[row] or self.on_type[row] >= 0:
                waiting.append(job_id)
            else:
                self._free_row(row)
        self._leaving = waiting

    def _free_row(self, row: int) -> None:
        job_id = self.ids[row]
        assert job_id is not None
        del self.row[job_id]
        self.sighted.discard(job_id)
        self.ids[row] = None
        self._free.append(row)


@dataclass(frozen=True)
class GpuTypes:
    """The GPU types of one partition: names, node indexes per type, GPUs per type."""

    names: tuple[str, ...]
    nodes: tuple[np.ndarray, ...]
    gpus: np.ndarray
    node_type: Mapping[int, int]

    @classmethod
    def of(cls, cluster: ClusterSpec, nodes: np.ndarray) -> GpuTypes:
        names = tuple(sorted({cluster.nodes[int(n)].gpu_type for n in nodes}))
        index = {name: i for i, name in enumerate(names)}
        per = [np.array([int(n) for n in nodes if cluster.nodes[int(n)].gpu_type == t], dtype=np.int64) for t in names]
        if len(per) == 1:
            # One type: its nodes are the partition's, and placing on the partition's own
            # array reads the free-GPU counts kept for it instead of scanning the nodes.
            per = [nodes]
        gpus = np.array([sum(cluster.nodes[int(n)].gpus for n in p) for p in per], dtype=np.int64)
        node_type = {int(n): index[cluster.nodes[int(n)].gpu_type] for n in nodes}
        return cls(names, tuple(per), gpus, node_type)
