"""Themis's finish-time fairness of a partition's waiting jobs, as numpy columns.

Themis ranks every active job by rho at every decision, and rho moves with time for
every job (the time since submission grows, the average contention drifts), so the
ranking cannot be kept incrementally. What can: the facts rho is computed from. While a
job waits, its expected duration, GPUs, submission time, remaining work and the
contention mark taken when it was first seen never change. They are kept here in
columns, a row per waiting job, updated by what changed (jobs that entered the queue,
jobs that started), so that a decision computes every waiting job's rho with a dozen
array operations instead of a Python call per job.

The array expressions repeat ``finish_time_fairness``'s floating-point operations in the
same order, so the values, and therefore the ranking, are exactly those of the per-job
rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import numpy as np

from shapeshift.engine.state import progress_on_arrays
from shapeshift.policies.framework.queues import Shape, newcomers, shape_of
from shapeshift.policies.size_based.srtf_table import DONE, ESTIMATE, GPUS, LAST, RATE, STALL, SUBMIT, TOTAL, WIDTH

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


class Contention(Protocol):
    """What the table needs of Themis's contention record (``themis.Contention``)."""

    def average(self, job_id: str, now: float, integral: float, active: int) -> float: ...

    def mark(self, job_id: str) -> tuple[float, float]: ...


class WaitingTable:
    """One partition's waiting jobs: a row each, free rows reused."""

    def __init__(self, partition: str, size: int = 64):
        self.partition = partition
        self.ids: list[str | None] = [None] * size
        self.row: dict[str, int] = {}
        self._free = list(range(size - 1, -1, -1))
        #: expected duration, at least 1e-9 s (as ``finish_time_fairness`` floors it)
        self.duration = np.zeros(size)
        self.gpus = np.zeros(size, dtype=np.int64)
        #: GPUs, at least 1 (the demand ``finish_time_fairness`` divides by the share)
        self.demand = np.zeros(size, dtype=np.int64)
        self.submit = np.zeros(size)
        #: remaining work / rate (1.0 for a stopped job), fixed while the job waits
        self.remaining = np.zeros(size)
        self.mark_integral = np.zeros(size)
        self.mark_time = np.zeros(size)
        self.shape = np.zeros(size, dtype=np.int64)
        self.used = np.zeros(size, dtype=bool)
        self._shapes: dict[Shape, int] = {}
        self.shape_gpus: list[int] = []
        #: waiting jobs of each shape code
        self.shape_rows: list[int] = []

    def __len__(self) -> int:
        return len(self.row)

    def sync(self, view: ClusterView, contention: Contention | None, integral: float, active: int) -> None:
        """Add the jobs that entered the queue since the last sync (arrivals and preempted
        jobs, the suffix of the engine's pending queue the table does not hold), marking
        their contention as Themis's first sight of them. A table that then disagrees with
        the queue's size (a job left it without starting: a cancel) is rebuilt."""
        pending = view.pending(self.partition)
        for job_id in newcomers(pending, self.row):
            self._add(view, job_id, contention, integral, active)
        if len(self.row) != view.pending_count(self.partition):
            for job_id in [j for j in self.row if j not in pending]:
                self.remove(job_id)
            for job_id in pending:
                if job_id not in self.row:
                    self._add(view, job_id, contention, integral, active)

    def _add(self, view: ClusterView, job_id: str, contention: Contention | None, integral: float, active: int) -> None:
        if not self._free:
            self._grow()
        i = self._free.pop()
        status = view.job(job_id)
        spec = status.spec
        self.ids[i] = job_id
        self.row[job_id] = i
        self.duration[i] = max(view.expected_duration(job_id), 1e-9)
        self.gpus[i] = spec.num_gpus
        self.demand[i] = max(spec.num_gpus, 1)
        self.submit[i] = spec.submit_time
        self.remaining[i] = view.remaining(job_id) / (status.rate if status.rate > 0 else 1.0)
        if contention is not None:
            contention.average(job_id, view.now, integral, active)  # marks a first sight
            self.mark_integral[i], self.mark_time[i] = contention.mark(job_id)
        shape = shape_of(spec)
        code = self._shapes.get(shape)
        if code is None:
            code = self._shapes[shape] = len(self.shape_gpus)
            self.shape_gpus.append(spec.num_gpus)
            self.shape_rows.append(0)
        self.shape[i] = code
        self.shape_rows[code] += 1
        self.used[i] = True

    def remove(self, job_id: str) -> None:
        i = self.row.pop(job_id, None)
        if i is None:
            return
        self.ids[i] = None
        self.used[i] = False
        self.shape_rows[int(self.shape[i])] -= 1
        self._free.append(i)

    def _grow(self) -> None:
        size = len(self.ids)
        self.ids.extend([None] * size)
        self._free.extend(range(2 * size - 1, size - 1, -1))
        columns = ("duration", "gpus", "demand", "submit", "remaining", "mark_integral", "mark_time", "shape", "used")
        for name in columns:
            column = getattr(self, name)
            setattr(self, name, np.concatenate([column, np.zeros_like(column)]))

    def rows_within(self, max_gpus: int) -> np.ndarray:
        """Rows of waiting jobs asking for at most ``max_gpus`` GPUs."""
        return np.flatnonzero(self.used & (self.gpus <= max_gpus))

    def rho(self, rows: np.ndarray, now: float, capacity: int, integral: float | None, active: int) -> np.ndarray:
        """rho of the jobs in ``rows``: ``finish_time_fairness`` with the remaining time
        taken when the job entered the queue and contention averaged since its mark
        (``integral`` of the active count up to now), or ``active`` jobs throughout when
        ``integral`` is None (``contention=current``)."""
        if integral is None:
            contention = np.full(rows.size, float(active))
        else:
            span = now - self.mark_time[rows]
            with np.errstate(divide="ignore", invalid="ignore"):
                contention = np.where(span > 0, (integral - self.mark_integral[rows]) / span, float(active))
        share = capacity / np.maximum(contention, 1.0)
        ideal = self.duration[rows] * np.maximum(1.0, self.demand[rows] / share)
        shared = (now - self.submit[rows]) + self.remaining[rows]
        return shared / ideal


def worst_order(rho: np.ndarray, submit: np.ndarray) -> tuple[np.ndarray, bool]:
    """Positions by (-rho, submit time), worst-off first, and whether two of them tie on
    both (rare: Themis then orders those by job id, which only the caller knows)."""
    order = np.lexsort((submit, -rho))
    neg, sub = -rho[order], submit[order]
    return order, bool(((neg[1:] == neg[:-1]) & (sub[1:] == sub[:-1])).any())


def worst_first(ids: list[str], rho: np.ndarray, submit: np.ndarray) -> list[str]:
    """``ids`` by (-rho, submit time, id): Themis's order, the worst-off job first."""
    order, tied = worst_order(rho, submit)
    ranked = [ids[i] for i in order.tolist()]
    if tied:
        ranked = [r[2] for r in sorted(zip((-rho[order]).tolist(), submit[order].tolist(), ranked, strict=True))]
    return ranked


def worst_first_blocks(
    ids: list[str | None], rows: np.ndarray, rho: np.ndarray, submit: np.ndarray, head: int = 64
) -> Iterator[np.ndarray]:
    """``rows`` (table rows, with their ``rho`` and ``submit``) in Themis's order, worst
    first, as consecutive blocks handed out lazily: a hand-out usually stops after a few
    jobs, so only the ``head`` worst (and every job tied with the last of them) are sorted
    up front, the rest only if the walk gets there. The same order as ``worst_first``:
    the blocks split at a value of rho, so no tie spans them."""
    neg = -rho
    if rows.size > 4 * head:
        kth = np.partition(neg, head)[head]
        worst = neg <= kth
        parts = [np.flatnonzero(worst), np.flatnonzero(~worst)]  # NaN rho sorts last, in the rest
    else:
        parts = [np.arange(rows.size)]
    for part in parts:
        within, tied = worst_order(rho[part], submit[part])
        order = part[within]
        ranked = rows[order]
        if tied:  # rare: equal keys, by id
            keyed = zip(
                neg[order].tolist(), submit[order].tolist(), [ids[r] for r in ranked.tolist()], ranked.tolist(),
                strict=True,
            )
            ranked = np.array([t[3] for t in sorted(keyed)], dtype=np.int64)
        yield ranked


#: Themis's columns of a running job after ``srtf_table``'s: its contention mark
#: (``Contention.mark``: the integral and the time when it was first seen).
MARK_INTEGRAL, MARK_TIME = WIDTH, WIDTH + 1
RUNNING_WIDTH = WIDTH + 2


def running_rho(
    columns: np.ndarray, now: float, capacity: int, integral: float | None, active: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rho, submission times and GPUs of the running jobs of a ``RunningTable`` with
    Themis's columns (``finish_time_fairness``'s operations on arrays): contention
    averaged since each job's mark up to ``integral``, or ``active`` jobs throughout
    when ``integral`` is None."""
    done, last, stall, rate, total = columns[DONE], columns[LAST], columns[STALL], columns[RATE], columns[TOTAL]
    submit, gpus = columns[SUBMIT], columns[GPUS]
    if integral is None:
        contention = np.full(submit.size, float(active))
    else:
        span = now - columns[MARK_TIME]
        with np.errstate(divide="ignore", invalid="ignore"):
            contention = np.where(span > 0, (integral - columns[MARK_INTEGRAL]) / span, float(active))
    remaining = np.maximum(total - progress_on_arrays(done, last, stall, rate, total, now), 0.0)
    duration = np.maximum(columns[ESTIMATE], 1e-9)
    share = capacity / np.maximum(contention, 1.0)
    ideal = duration * np.maximum(1.0, np.maximum(gpus, 1) / share)
    shared = (now - submit) + remaining / np.where(rate > 0, rate, 1.0)
    return shared / ideal, submit, gpus
