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
from shapeshift.policies.framework.composed import ComposedPolicy, _where, left_behind
from shapeshift.policies.framework.decisions import PartitionDecision
from shapeshift.policies.size_based.srtf_rank import take_block
from shapeshift.policies.themis.table import worst_order

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView
    from shapeshift.policies.themis.table import WaitingTable


class RhoOrdering(Protocol):
    """What the lease round reads of Themis's ordering (``themis.FinishTimeFairness``)."""

    knob: float
    contention: ContentionClock | None
    tables: dict[str, WaitingTable]

    def active_rho(
        self,
        view: ClusterView,
        partition: str,
        table: WaitingTable,
        capacity: int,
        integral: float | None,
        active: int,
    ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...


class ContentionClock(Protocol):
    """Themis's time-averaged count of active jobs (``themis.Contention``)."""

    def update(self, partition: str, now: float, active: int) -> float: ...


class LeaseRound(ComposedPolicy):
    """``ComposedPolicy`` whose preemptive decision (Themis's lease round) runs on arrays
    when the partition's waiting table is up to date."""

    def _decide_preemptive(self, view: ClusterView, partition: str, free: FreeResources) -> PartitionDecision:
        ordering: RhoOrdering = self.ordering  # type: ignore[assignment]
        table = ordering.tables.get(partition)
        if (
            table is None
            or len(table) != view.pending_count(partition)
            or self._waiting_fit_free(view, partition, free)
        ):
            return super()._decide_preemptive(view, partition, free)
        capacity = view.capacity_gpus(partition)
        active = view.pending_count(partition) + len(view.running(partition))  # type: ignore[arg-type]
        contention = ordering.contention
        integral = None if contention is None else contention.update(partition, view.now, active)
        running_ids, rows, rho, submit, running_gpus = ordering.active_rho(
            view, partition, table, capacity, integral, active
        )
        n_running = len(running_ids)
        offered = max(1, math.ceil((1.0 - ordering.knob) * rho.size - 1e-9))
        all_gpus = np.concatenate([running_gpus.astype(np.int64), table.gpus[rows].astype(np.int64)])
        ranked = lease_order(rho, submit, n_running, offered, whole=False)
        taken: list[int] = []
        if ranked is not None:
            gpus = all_gpus[ranked]
            end, left = take_block(gpus, 0, ranked.size, capacity, taken)
            if ranked.size < rho.size and (left > 0 or not all_gpus[n_running:].all()):
                # The walk could go on into the waiting jobs left unordered (GPUs left, or
                # jobs asking for none, taken after the GPUs run out): order them all.
                ranked = lease_order(rho, submit, n_running, offered, whole=True)
                taken.clear()
                if ranked is not None:
                    gpus = all_gpus[ranked]
                    end, left = take_block(gpus, 0, ranked.size, capacity, taken)
        if ranked is None:  # ties go by job id: the generic path
            return super()._decide_preemptive(view, partition, free)

        def job_at(position: int) -> str:
            """The job at ``position`` of the walk: running jobs come first in the arrays."""
            index = int(ranked[position])
            if index < n_running:
                return running_ids[index]
            return table.ids[int(rows[index - n_running])]  # type: ignore[return-value]

        if left == 0:  # jobs asking for no GPUs still fit after the GPUs ran out
            taken.extend((end + np.flatnonzero(gpus[end:] == 0)).tolist())
        reasons = self._explain_passed_over(view, partition, ranked, gpus, taken, end, capacity, n_running, job_at)
        chosen = [job_at(p) for p in taken]
        running = set(running_ids)
        running_by_rank = [running_ids[int(i)] for i in ranked[ranked < n_running].tolist()]
        placed = self._place_preemptive(view, partition, free, chosen, running, running_by_rank)
        return PartitionDecision(reasons=reasons).then(placed)

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
    ) -> dict[str, str]:
        """The generic path's reason for each waiting job the walk passed over before
        ``end``, with the GPUs left when the walk reached it."""
        was_taken = np.zeros(end, dtype=bool)
        early = [p for p in taken if p < end]
        was_taken[early] = True
        passed = np.flatnonzero(~was_taken & (ranked[:end] >= n_running))
        if passed.size == 0:
            return {}
        used = np.where(was_taken, gpus[:end], 0)
        left_before = capacity - (np.cumsum(used) - used)
        where = _where(view, partition)
        return {
            job_at(p): left_behind(need, where, left)
            for p, need, left in zip(passed.tolist(), gpus[passed].tolist(), left_before[passed].tolist(), strict=True)
        }


def lease_order(
    rho: np.ndarray, submit: np.ndarray, n_running: int, offered: int, whole: bool
) -> np.ndarray | None:
    """Positions of the active jobs (the running ones first in the arrays) in the lease
    round's order: the ``offered`` worst by (-rho, submission), then the other running
    jobs, then the other waiting ones, each by the same key; ``None`` when two jobs tie on
    both (Themis then orders them by id, which only the generic path knows).

    Unless ``whole``, a long queue's order stops short of the waiting jobs whose rho is
    better than every offered job's: they come last, and the round's walk seldom gets
    there, as the offered jobs alone usually ask for more GPUs than the partition has.
    Only the jobs within the offered jobs' rho (``offered`` or a few more, on a tie at
    the last) and the running ones are sorted, rather than every waiting job; a tie
    among the unsorted ones is not looked for (it changes nothing before them)."""
    if whole or rho.size < 1024:
        order, tied = worst_order(rho, submit)
        if tied:
            return None
        head, tail = order[:offered], order[offered:]
        return np.concatenate([head, tail[tail < n_running], tail[tail >= n_running]])
    neg = -rho
    last = np.partition(neg, offered - 1)[offered - 1]
    within = neg <= last  # the offered jobs and any tied with the last of them
    inside = np.flatnonzero(within)
    if inside.size < offered:  # NaN rho (sorted last by the partition): order everything
        return lease_order(rho, submit, n_running, offered, whole=True)
    order, tied = worst_order(rho[inside], submit[inside])
    beyond = np.flatnonzero(~within[:n_running])  # running jobs better off than every offered one
    later, tied_later = worst_order(rho[beyond], submit[beyond])
    if tied or tied_later:
        return None
    ranked = inside[order]
    spill = ranked[offered:]  # tied on rho with the last offered job, later by submission
    return np.concatenate([ranked[:offered], spill[spill < n_running], beyond[later], spill[spill >= n_running]])
