"""``themis``: finish-time fairness with one-round leases.

Themis (Mahajan et al., "Themis: Fair and Efficient GPU Cluster Scheduling", NSDI 2020,
Sec. 3 and 5) measures unfairness as the finish-time fairness ratio

    rho = T_shared / T_ideal

where ``T_shared`` is the job's estimated finish time under the current sharing (time
since submission plus the remaining work at its current speed) and ``T_ideal`` is its
run time on an exclusive ``1/N_avg`` share of the cluster, ``N_avg`` being the average
contention over the job's lifetime (the time-average number of active jobs in its
partition since it arrived, as the paper defines it): the job's duration when its GPU
demand fits in ``C/N_avg`` GPUs, stretched by ``demand / (C/N_avg)`` when it does not.
rho > 1 means the job is worse off than with its fair share. ``contention=current``
(ours, the earlier rule) uses the number of active jobs at the decision instead.

Every round (``--round``, default 600 s), leases expire and the GPUs are offered to the
``1 - f`` fraction of active jobs with the worst rho (the paper's fairness knob ``f``,
``knob``, 0.8 in its evaluation: the worst 20%, at least one job), worst first; what
those jobs cannot use goes to the others, running jobs first so that leases renew
rather than churn, then waiting jobs by rho. A running job that loses its lease is
preempted and pays the checkpoint-restore penalty when it resumes. Between rounds,
arrivals and completions only hand free GPUs to waiting jobs (largest rho first);
nobody is preempted before its lease ends. Themis's partial-allocation auction among the
offered jobs is simplified to this greedy worst-rho-first offer (rigid jobs bid for
exactly their GPU count, so the auction has one bundle per job).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, Schedule
from shapeshift.policies.framework.base import ARRIVAL, COMPLETION, ROUND, PolicyTraits
from shapeshift.policies.framework.composed import AcceptAll, ComposedPolicy
from shapeshift.policies.framework.decisions import NOTHING, PartitionDecision, decide_partitions
from shapeshift.policies.framework.placement import PLACEMENTS, Placement, PlacementName
from shapeshift.policies.framework.registry import PolicyParams, register
from shapeshift.policies.size_based.srtf_table import Facts, RunningTable, RunningTables, progress_row
from shapeshift.policies.themis.lease import LeaseRound
from shapeshift.policies.themis.table import (
    MARK_INTEGRAL,
    MARK_TIME,
    RUNNING_WIDTH,
    WaitingTable,
    running_rho,
    worst_first,
    worst_first_blocks,
)

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


def finish_time_fairness(view: ClusterView, job_id: str, contention: float, capacity: int) -> float:
    """rho of ``job_id`` when, on average, ``contention`` jobs share ``capacity`` GPUs."""
    status = view.job(job_id)
    duration = max(view.expected_duration(job_id), 1e-9)
    share = capacity / max(contention, 1.0)
    demand = max(status.spec.num_gpus, 1)
    ideal = duration * max(1.0, demand / share)
    rate = status.rate if status.rate > 0 else 1.0
    shared = (view.now - status.spec.submit_time) + view.remaining(job_id) / rate
    return shared / ideal


class Contention:
    """Time-averaged number of active jobs per partition, and each job's average since it
    was first seen (its arrival: every arrival triggers a decision).

    The count only changes at arrivals and completions, each of which is a decision for
    its partition, so integrating the count recorded at the last decision is exact."""

    def __init__(self) -> None:
        #: partition -> (time of the last update, count since then, integral up to then)
        self._clock: dict[str, tuple[float, int, float]] = {}
        #: job -> (integral, time) when the job was first seen
        self._marks: dict[str, tuple[float, float]] = {}

    def update(self, partition: str, now: float, active: int) -> float:
        """Advance ``partition`` to ``now`` with ``active`` jobs from now on; the integral."""
        last, count, integral = self._clock.get(partition, (now, active, 0.0))
        integral += count * (now - last)
        self._clock[partition] = (now, active, integral)
        return integral

    def average(self, job_id: str, now: float, integral: float, active: int) -> float:
        mark = self._marks.setdefault(job_id, (integral, now))
        span = now - mark[1]
        return (integral - mark[0]) / span if span > 0 else float(active)

    def mark(self, job_id: str) -> tuple[float, float]:
        """(integral, time) when ``job_id`` was first seen."""
        return self._marks[job_id]

    def marked(self, job_id: str) -> tuple[float, float] | None:
        """``mark``, or ``None`` for a job not seen yet."""
        return self._marks.get(job_id)


class FinishTimeFairness:
    """Rank by rho, worst first; on lease renewal, the worst ``1 - knob`` first, then running jobs."""

    name = "themis"

    def __init__(
        self,
        knob: float,
        preemptive: bool,
        contention: Contention | None,
        tables: dict[str, WaitingTable] | None = None,
        running: RunningTables | None = None,
        unmarked: set[str] | None = None,
    ):
        self.knob = knob
        self.preemptive = preemptive
        self.contention = contention
        #: per partition: the waiting jobs' facts as columns, when the policy keeps them
        self.tables: dict[str, WaitingTable] = {} if tables is None else tables
        #: per partition: the running jobs' facts as columns (kept by the policy, which
        #: syncs them at every decision); with ``tables``
        self.running = running
        #: running jobs in ``running`` whose row lacks the contention mark: jobs a live
        #: controller re-adopted running, never seen waiting
        self.unmarked: set[str] = set() if unmarked is None else unmarked

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        jobs = list(jobs)
        running_ids = list(view.running(partition))
        active = view.pending_count(partition) + len(running_ids)
        capacity = view.capacity_gpus(partition)
        integral = None if self.contention is None else self.contention.update(partition, view.now, active)
        table = self.tables.get(partition)
        if (
            table is not None
            and self.running is not None
            and len(table) == view.pending_count(partition) == len(jobs) - len(running_ids)
        ):
            by_rho = self._ranked_with_table(view, partition, table, capacity, integral, active)
        else:
            rho = {j: self._rho(view, j, capacity, integral, active) for j in jobs}
            by_rho = sorted(jobs, key=lambda j: (-rho[j], view.job(j).spec.submit_time, j))
        if not self.preemptive:
            return by_rho
        offered = by_rho[: max(1, math.ceil((1.0 - self.knob) * len(by_rho) - 1e-9))]
        chosen = set(offered)
        running = set(running_ids)
        rest = [j for j in by_rho if j not in chosen]
        return [*offered, *(j for j in rest if j in running), *(j for j in rest if j not in running)]

    def _rho(self, view: ClusterView, job_id: str, capacity: int, integral: float | None, active: int) -> float:
        if integral is None or self.contention is None:
            return finish_time_fairness(view, job_id, active, capacity)
        average = self.contention.average(job_id, view.now, integral, active)
        return finish_time_fairness(view, job_id, average, capacity)

    def _ranked_with_table(
        self,
        view: ClusterView,
        partition: str,
        table: WaitingTable,
        capacity: int,
        integral: float | None,
        active: int,
    ) -> list[str]:
        """Every active job by rho, worst first: the waiting ones' rho from the table's
        columns, the running ones' from the running table's."""
        running_ids, rows, rho, submit, _ = self.active_rho(view, partition, table, capacity, integral, active)
        ids = [*running_ids, *(table.ids[i] for i in rows.tolist())]
        return worst_first(ids, rho, submit)  # type: ignore[arg-type]

    def active_rho(
        self,
        view: ClusterView,
        partition: str,
        table: WaitingTable,
        capacity: int,
        integral: float | None,
        active: int,
    ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The running jobs (in the running table's order) and the waiting jobs' table
        rows; rho and submission times of the running jobs followed by the waiting ones
        (in row order); the running jobs' GPUs."""
        assert self.running is not None
        running = self.running.of(view, partition)
        if self.unmarked:
            self._mark_unseen(view, running, integral, active)
        rows = np.flatnonzero(table.used)
        rho, submitted, gpus = running_rho(running.columns, view.now, capacity, integral, active)
        rho = np.concatenate([rho, table.rho(rows, view.now, capacity, integral, active)])
        submit = np.concatenate([submitted, table.submit[rows]])
        return running.ids, rows, rho, submit, gpus

    def _mark_unseen(self, view: ClusterView, running: RunningTable, integral: float | None, active: int) -> None:
        """Running jobs never seen waiting are first seen now, as the per-job rule sees
        them when it first ranks them: their mark is the integral and time of now."""
        for job_id in [j for j in running.ids if j in self.unmarked]:
            if self.contention is not None and integral is not None:
                self.contention.average(job_id, view.now, integral, active)  # marks a first sight
                integral_then, seen_at = self.contention.mark(job_id)
                running.write(job_id, MARK_INTEGRAL, integral_then)
                running.write(job_id, MARK_TIME, seen_at)
            self.unmarked.discard(job_id)


class ThemisPolicy:
    """Lease renewal (preemptive) on round timers; free-GPU hand-out on other events.

    The waiting jobs' facts live in a ``WaitingTable`` per partition and the running
    jobs' in a ``RunningTable`` (with their contention marks), both updated by what
    changed, so that ranking them costs array operations, not a Python call per job. A
    hand-out ranks only the waiting jobs that could fit the free GPUs (the others fail
    whatever their rank) and, as backfill does (``ShapeQueue``), stops trying a shape
    once a job of it failed to place, until another job starts: same decisions as trying
    each in turn."""

    name = "themis"
    #: Each partition's decisions read its own jobs and contention record; a round in a
    #: partition with no job changes nothing (its contention integral grows by 0 x the
    #: time), and nothing asks for wake-ups: runs split by partition exactly.
    traits = PolicyTraits(partition_local=True)

    def __init__(self, knob: float, placement: Placement, round_seconds: float, average_contention: bool = True):
        self.triggers = frozenset({ARRIVAL, COMPLETION, ROUND})
        self.default_round: float | None = round_seconds
        contention = self._contention = Contention() if average_contention else None
        self._tables: dict[str, WaitingTable] = {}
        self._running = RunningTables(self._running_facts, self._running_row, RUNNING_WIDTH)
        self._unmarked: set[str] = set()
        self._lease = LeaseRound(
            "themis",
            AcceptAll(),
            FinishTimeFairness(knob, True, contention, self._tables, self._running, self._unmarked),
            placement,
        )
        self._fill = ComposedPolicy(
            "themis",
            AcceptAll(),
            FinishTimeFairness(knob, False, contention, self._tables, self._running, self._unmarked),
            placement,
            head_of_line_blocking=False,
        )
        self._placement = placement

    def _running_facts(self, view: ClusterView, job_id: str) -> Facts:
        status = view.job(job_id)
        return (status, status.expected_duration(), status.spec.submit_time, status.spec.num_gpus)

    def _running_row(self, facts: Facts) -> tuple[float, ...]:
        """A running job's row: its progress and facts, then its contention mark, taken
        when it entered the waiting table. A job re-adopted running by a restarted live
        controller was never seen waiting: its mark is left for the next ranking to take
        (``FinishTimeFairness.unmarked``)."""
        mark = None if self._contention is None else self._contention.marked(facts[0].job_id)
        if mark is None:
            if self._contention is not None:
                self._unmarked.add(facts[0].job_id)
            mark = (0.0, 0.0)
        return (*progress_row(facts), *mark)

    def decide(self, view: ClusterView) -> Schedule:
        self._running.sync(view)
        # Record every change of the active count and every arrival, even where the
        # ordering below is not consulted (nothing waiting).
        counts: dict[str, tuple[float | None, int]] = {}  # partition -> (integral, active)
        for partition in sorted(view.dirty_partitions):
            active = view.pending_count(partition) + len(view.running(partition))  # type: ignore[arg-type]
            integral = None
            if self._contention is not None:
                integral = self._contention.update(partition, view.now, active)
            table = self._tables.get(partition)
            if table is None:
                table = self._tables[partition] = WaitingTable(partition)
            table.sync(view, self._contention, 0.0 if integral is None else integral, active)
            counts[partition] = (integral, active)
        schedule = self._lease.decide(view) if view.timer_fired else self._hand_out(view, counts)
        for job_id, alloc in schedule.changes.items():
            if alloc is not None:
                table = self._tables.get(view.job(job_id).partition)
                if table is not None:
                    table.remove(job_id)
        return schedule

    def _hand_out(self, view: ClusterView, counts: dict[str, tuple[float | None, int]]) -> Schedule:
        """Free GPUs to waiting jobs, largest rho first (``self._fill``'s decision)."""
        scratch: list[FreeResources] = []  # one copy of the free resources, made when first needed

        def hand_out(partition: str) -> PartitionDecision:
            if view.pending_count(partition) == 0:
                return NOTHING
            if not scratch:
                scratch.append(view.scratch())
            table = self._tables[partition]
            integral, active = counts[partition]
            if len(table) == view.pending_count(partition):
                decided = self._hand_out_partition(view, partition, table, integral, active, scratch[0])
                if decided is not None:
                    return decided
            return self._fill._decide_greedy(view, partition, scratch[0])

        return decide_partitions(view, hand_out, "waiting behind higher-priority jobs")

    def _hand_out_partition(
        self,
        view: ClusterView,
        partition: str,
        table: WaitingTable,
        integral: float | None,
        active: int,
        free: FreeResources,
    ) -> PartitionDecision | None:
        """Hand the free GPUs out from the table; ``None``, having done nothing, when a
        job that fits asks for no GPUs (it may start after the GPUs ran out, which only the
        plain scan reproduces)."""
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        nodes = view.partitions[partition]
        free_gpus = free.free_gpus_in(nodes)
        widths = np.array(table.shape_gpus, dtype=np.int64)
        # Shapes with a waiting job: those within the free GPUs are the rows' shapes.
        waiting = np.array(table.shape_rows, dtype=np.int64) > 0
        if (waiting & (widths == 0)).any():
            return None
        rows = table.rows_within(free_gpus)
        if rows.size == 0:
            return PartitionDecision(changes, reasons)
        rho = table.rho(rows, view.now, view.capacity_gpus(partition), integral, active)
        # A shape that failed to place since the last start would fail again, and one
        # wider than the free GPUs cannot fit: jobs of those shapes are passed over, in
        # array steps rather than one by one.
        allowed = widths <= free_gpus
        for block in worst_first_blocks(table.ids, rows, rho, table.submit[rows]):
            codes = table.shape[block]
            i = 0
            while i < block.size:
                skip = int(allowed[codes[i:]].argmax())
                if not allowed[codes[i + skip]]:
                    break
                i += skip
                row, code = int(block[i]), int(codes[i])
                i += 1
                job_id = table.ids[row]
                assert job_id is not None
                spec = view.job(job_id).spec
                alloc = self._placement.find(spec, nodes, free)
                if alloc is None:
                    allowed[code] = False
                    reasons[job_id] = self._fill._explain(view, partition, spec.num_gpus, free_gpus)
                    if not (allowed & waiting).any():
                        # no job left could be placed before another one starts (an allowed
                        # shape is within the free GPUs, so among the rows' shapes)
                        return PartitionDecision(changes, reasons)
                    continue
                changes[job_id] = alloc
                free.take(alloc)
                free_gpus -= alloc.gpus
                if free_gpus == 0:
                    return PartitionDecision(changes, reasons)
                allowed = widths <= free_gpus
        return PartitionDecision(changes, reasons)


class ThemisParams(PolicyParams):
    knob: float = Field(0.8, ge=0, lt=1, description="fairness knob f: offer to the worst 1 - f of jobs")
    contention: Literal["average", "current"] = "average"
    round: float = Field(600.0, gt=0)
    placement: PlacementName = "consolidated"


@register(
    "themis",
    "Finish-time fairness: each round, leases go to the 1 - f fraction of jobs with the worst rho = T_shared/T_ideal.",
    ThemisParams,
)
def make_themis(params: ThemisParams) -> ThemisPolicy:
    return ThemisPolicy(
        params.knob, PLACEMENTS[params.placement](), params.round, average_contention=params.contention == "average"
    )
