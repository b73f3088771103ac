"""Themis's lease round on arrays.

At every lease round Themis ranks every active job by rho, offers the GPUs to the worst
``1 - f`` of them, then to the running jobs, then to the waiting ones, and takes each job
whose GPUs still fit. The generic preemptive path (``ComposedPolicy``) does this one job
at a time in Python, several passes over every active job; under a long queue that is
O(queue) Python work per round. Here the ranking, the offer order and the walk that
takes jobs are array operations (the walk is ``srtf_rank``'s block walk), and Python
touches only the jobs chosen and the waiting jobs the walk passed over while GPUs were
left (they get their reason).

The same decisions as the generic path: the same rho (``FinishTimeFairness.active_rho``),
the same order, and jobs asking for no GPUs are still taken after the GPUs run out, as
the one-at-a-time walk takes them. When two jobs tie on (rho, submission) the order
falls to job ids, and the round takes the generic path. Waiting jobs the walk never
reaches keep the schedule's default reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation
from shapeshift.policies.composed import ComposedPolicy, _where, left_behind
from shapeshift.policies.srtf_rank import take_block
from shapeshift.policies.themis_table import worst_order

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView
    from shapeshift.policies.themis_table import WaitingTable


class RhoOrdering(Protocol):
    """What the lease round reads of Themis's ordering (``themis.FinishTimeFairness``)."""

    knob: float
    contention: ContentionClock | None
    tables: dict[str, WaitingTable]

    def active_rho(
        self,
        view: ClusterView,
        table: WaitingTable,
        running_ids: list[str],
        capacity: int,
        integral: float | None,
        active: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


class ContentionClock(Protocol):
    """Themis's time-averaged count of active jobs (``themis.Contention``)."""

    def update(self, partition: str, now: float, active: int) -> float: ...


class LeaseRound(ComposedPolicy):
    """``ComposedPolicy`` whose preemptive decision (Themis's lease round) runs on arrays
    when the partition's waiting table is up to date."""

    def _decide_preemptive(
        self,
        view: ClusterView,
        partition: str,
        free: FreeResources,
        changes: dict[str, Allocation | None],
        reasons: dict[str, str],
    ) -> None:
        ordering: RhoOrdering = self.ordering  # type: ignore[assignment]
        table = ordering.tables.get(partition)
        if (
            table is None
            or len(table) != view.pending_count(partition)
            or self._waiting_fit_free(view, partition, free)
        ):
            super()._decide_preemptive(view, partition, free, changes, reasons)
            return
        running_ids = list(view.running(partition))
        capacity = view.capacity_gpus(partition)
        active = view.pending_count(partition) + len(running_ids)
        contention = ordering.contention
        integral = None if contention is None else contention.update(partition, view.now, active)
        rows, rho, submit = ordering.active_rho(view, table, running_ids, capacity, integral, active)
        order, tied = worst_order(rho, submit)
        if tied:  # ties go by job id: the generic path
            super()._decide_preemptive(view, partition, free, changes, reasons)
            return
        n_running = len(running_ids)
        offered = max(1, math.ceil((1.0 - ordering.knob) * order.size - 1e-9))
        head, tail = order[:offered], order[offered:]
        ranked = np.concatenate([head, tail[tail < n_running], tail[tail >= n_running]])
        gpus = np.concatenate([
            np.array([view.job(j).spec.num_gpus for j in running_ids], dtype=np.int64),
            table.gpus[rows].astype(np.int64),
        ])[ranked]

        def job_at(position: int) -> str:
            """The job at ``position`` of the walk: running jobs come first in the arrays."""
            index = int(ranked[position])
            if index < n_running:
                return running_ids[index]
            return table.ids[int(rows[index - n_running])]  # type: ignore[return-value]

        taken: list[int] = []
        end, left = take_block(gpus, 0, ranked.size, capacity, taken)
        if left == 0:  # jobs asking for no GPUs still fit after the GPUs ran out
            taken.extend((end + np.flatnonzero(gpus[end:] == 0)).tolist())
        self._explain_passed_over(view, partition, ranked, gpus, taken, end, capacity, n_running, job_at, reasons)
        chosen = [job_at(p) for p in taken]
        running = set(running_ids)
        running_by_rank = [running_ids[int(i)] for i in ranked[ranked < n_running].tolist()]
        self._place_preemptive(view, partition, free, chosen, running, running_by_rank, changes, reasons)

    @staticmethod
    def _explain_passed_over(
        view: ClusterView,
        partition: str,
        ranked: np.ndarray,
        gpus: np.ndarray,
        taken: list[int],
        end: int,
        capacity: int,
        n_running: int,
        job_at: Callable[[int], str],
        reasons: dict[str, str],
    ) -> None:
        """Waiting jobs the walk passed over before ``end`` get the generic path's reason,
        with the GPUs left when the walk reached them."""
        was_taken = np.zeros(end, dtype=bool)
        early = [p for p in taken if p < end]
        was_taken[early] = True
        passed = np.flatnonzero(~was_taken & (ranked[:end] >= n_running))
        if passed.size == 0:
            return
        used = np.where(was_taken, gpus[:end], 0)
        left_before = capacity - (np.cumsum(used) - used)
        where = _where(view, partition)
        for p, need, left in zip(passed.tolist(), gpus[passed].tolist(), left_before[passed].tolist(), strict=True):
            reasons[job_at(p)] = left_behind(need, where, left)
