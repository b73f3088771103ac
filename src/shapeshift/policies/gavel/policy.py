"""``gavel``: heterogeneity-aware max-min fairness over GPU types, in rounds, as Gavel.

Gavel (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for Deep
Learning Workloads", OSDI 2020, Sec. 4.1 and 5) expresses a policy as an optimisation
over an *allocation* ``X[j, k]``: the fraction of time job ``j`` spends on GPU type
``k``. The LP is its ``MaxMinFairnessPolicyWithPerf`` (``lp.max_min_allocation``):

    maximise  min_j  s_j * sum_k T[j, k] X[j, k] / T_prop[j]
    s.t.      sum_k X[j, k] <= 1, sum_j s_j X[j, k] <= G_k, X >= 0

with ``s_j`` the job's GPU count and ``T_prop`` its throughput under the
heterogeneity-agnostic split. ``objective=max-sum-throughput`` solves Gavel's
``max_sum_throughput_perf`` instead (``lp.max_sum_throughput_allocation``: the total
``sum T X`` under the same constraints), the objective the Sia artifact runs its Gavel
baseline with (``sia-simulator/simulator_config.py``, ``gavel_default_policy``); it is
meant for ``profiles`` (steps per second, as Gavel weighs them). Throughputs: a job's own
``gpu_speed`` (a column per GPU type in the workload, 0 = it cannot run there) when it
gives one, else the model catalog (Gavel's measured throughputs), else each type's mean.

The round mechanism follows Gavel's simulator (``scheduler/scheduler.py``, ``simulate``
and ``_schedule_jobs_on_workers``), checked job by job against it
(docs/peer-agreement.md): every ``round`` seconds (360, its ``time_per_iteration``) the
partition is re-planned; a round ends early once every job it started has finished, and
an idle partition starts one when a job arrives (``rounds=gavel``; ``rounds=grid`` is our
earlier fixed timer). Jobs arriving mid-round wait for the next round. The allocation is
recomputed, the time received reset and deficits updated only when the job set changed
and ``reset_interval`` seconds (1,920) passed since the last reset; the grant order is
Gavel's per-type priority ``X / fraction of the type's time received`` with types visited
fastest first (``rounds``). ``priority=sia-artifact`` is the Sia artifact's round
mechanism for its Gavel baseline (:mod:`.artifact_rounds`); ``priority=age`` is ours (time
received since submission, one order, LP re-solved at every change of the job set). A
job granted the type it runs on keeps its GPUs; the others are preempted at the round
boundary and the granted ones placed, largest first, consolidated (``priority=sia-artifact``:
on the next free GPUs in node order, as the artifact, :mod:`.artifact_workers`).

``fill=true`` (ours, off as in Gavel) hands free GPUs to waiting jobs between rounds, each
on the free type where it is fastest relative to that type's catalog-wide mean speed.
Differences left, measured in docs/peer-agreement.md: among tied LP optima Gavel returns
ECOS's interior point and we HiGHS's vertex; Gavel runs whole steps per round
(``int(throughput x round)``), we run exact work.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from shapeshift.engine.fractions import whole_gpu_spec
from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, JobSpec, Schedule
from shapeshift.policies.framework.base import ARRIVAL, COMPLETION, PolicyTraits
from shapeshift.policies.framework.decisions import NOTHING, PartitionDecision, decide_partitions
from shapeshift.policies.framework.placement import Consolidated
from shapeshift.policies.framework.registry import PolicyParams, register
from shapeshift.policies.framework.rounds import RoundOrFillPolicy
from shapeshift.policies.gavel.artifact_rounds import ArtifactLedger
from shapeshift.policies.gavel.artifact_workers import place_granted
from shapeshift.policies.gavel.lp import job_speed, max_min_allocation, max_sum_throughput_allocation, type_speed
from shapeshift.policies.gavel.profiled import profiled_speed, profiles_root
from shapeshift.policies.gavel.rounds import GAVEL_RESET_INTERVAL, GavelLedger, fastest_first, grant_greedily
from shapeshift.policies.gavel.table import GavelJobs, GpuTypes

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

__all__ = ["GavelPolicy", "job_speed", "max_min_allocation", "type_speed"]

_EPS = 1e-6


class GavelPolicy(RoundOrFillPolicy):
    name = "gavel"
    waiting_reason = "waiting for a round"

    @property
    def traits(self) -> PolicyTraits:
        """Runs split by partition exactly (``shapeshift.runs.parallel``): each
        partition has its own rounds, table, ledger and LP. With Gavel's rounds, another
        partition's round end decides this one mid-round, which only hands out free GPUs
        (``fill``, off by default); ranks are handed out across partitions, but only their
        order within a partition is read. Gavel allocates whole GPUs of a type: a job asking
        for a fraction of one gets a whole GPU (ours; Gavel has no fractions)."""
        return PolicyTraits(partition_local=self._rounds == "grid" or not self._fill, whole_gpus=True)

    def __init__(
        self,
        round_seconds: float,
        fill: bool = False,
        fill_spare: bool = False,
        objective: str = "gavel",
        rounds: str = "gavel",
        priority: str = "gavel",
        reset_interval: float = GAVEL_RESET_INTERVAL,
        profiles: str | None = None,
    ):
        super().__init__(round_seconds)
        self._profiles = profiles
        self._round = round_seconds
        self._rounds = rounds
        if rounds == "gavel":
            # Rounds start when the last one ends or every job of it has finished: our own
            # wake-ups, not the simulator's fixed timer (so a run-level round setting does
            # not apply; the ``round`` parameter sets the length).
            self.triggers = frozenset({ARRIVAL, COMPLETION})
        self._fill = fill
        self._fill_spare = fill_spare
        self._objective = objective
        self._priority = priority
        self._reset_interval = reset_interval
        #: per partition: the job list of the last LP and its solution (re-solved on change)
        self._solved: dict[str, tuple[list[str], np.ndarray]] = {}
        #: LP solves so far (the benchmark prints it)
        self.solves = 0
        self._placement = Consolidated()
        self._types: dict[str, GpuTypes] = {}
        #: per partition: its jobs as rows of arrays (speeds, time received, what runs
        #: where since when; ``table``)
        self._jobs: dict[str, GavelJobs] = {}
        #: per partition: Gavel's time received, deficits and allocation since the last reset
        self._ledgers: dict[str, GavelLedger] = {}
        #: Gavel's job ids: arrival ranks, handed out in the order rounds first see jobs
        #: (its tie-break)
        self._ranks = itertools.count()
        #: per partition: when the current round ends (rounds=gavel)
        self._round_end: dict[str, float] = {}
        #: per partition: the Sia artifact's time received (priority=sia-artifact)
        self._artifact: dict[str, ArtifactLedger] = {}

    # ------------------------------------------------------------------ helpers
    def _types_of(self, view: ClusterView, partition: str) -> GpuTypes:
        types = self._types.get(partition)
        if types is None:
            types = self._types[partition] = GpuTypes.of(view.cluster, view.partitions[partition])
        return types

    def _table(self, view: ClusterView, partition: str) -> GavelJobs:
        table = self._jobs.get(partition)
        if table is None:
            types = self._types_of(view, partition)

            per_node = [max(view.cluster.nodes[int(n)].gpus for n in ns) for ns in types.nodes]

            def speeds(spec: JobSpec) -> tuple[float, ...]:
                # A job's speed on each GPU type of its partition, 0 where it does not fit.
                return tuple(
                    self._speed(spec, name, per_node[k]) if spec.num_gpus <= types.gpus[k] else 0.0
                    for k, name in enumerate(types.names)
                )

            table = self._jobs[partition] = GavelJobs(partition, len(types.names), speeds)
        return table

    def _speed(self, spec: JobSpec, gpu_type: str, per_node: int) -> float:
        """``job_speed``, or with ``profiles`` a Pollux job's speed from the type's profile;
        0 (cannot run there, as for a type a job's throughputs leave out) on a GPU type the
        job's type constraint excludes."""
        if not spec.allows(gpu_type):
            return 0.0
        found = profiled_speed(self._profiles, spec, gpu_type, per_node) if self._profiles else None
        return job_speed(spec, gpu_type) if found is None else found

    def _type_time(self, partition: str) -> np.ndarray | None:
        ledger = self._ledgers.get(partition)
        return None if ledger is None else ledger.type_time

    def _note_touched(self, view: ClusterView) -> None:
        for job_id in view.touched:
            table = self._jobs.get(view.job(job_id).partition)
            if table is not None:
                table.note_touched(view, job_id)

    def _after_decision(self, view: ClusterView, changes: Mapping[str, Allocation | None]) -> None:
        """Remember which type every job whose allocation changed runs on from now; a job
        stopped or moved is first credited with the time it ran before (Gavel credits a
        job when its micro-task ends; running jobs are credited when a round is planned,
        ``GavelJobs.credit_all``, since only a round reads the time received)."""
        for job_id, alloc in changes.items():
            partition = view.job(job_id).partition
            table = self._table(view, partition)
            if table.is_on(job_id):
                table.credit_one(view, job_id, self._type_time(partition))
            if alloc is None:
                table.stopped(job_id)
            else:
                table.started(view, job_id, self._type_of(self._types_of(view, partition), alloc))

    def _type_of(self, types: GpuTypes, alloc: Allocation) -> int:
        return types.node_type[alloc.placement[0][0]]

    def _running_rows(self, view: ClusterView, table: GavelJobs, types: GpuTypes, running: list[str]) -> np.ndarray:
        """The rows of the partition's running jobs, each known to run where it does: a
        controller that restarted finds jobs running that this policy never placed; they
        are adopted as if placed between rounds (the round ranks them after the waiting
        jobs, as it does those) and credited from now. The per-job bookkeeping never
        credited such jobs while they stayed in place, so after a restart decisions differ
        from it; in simulation nothing runs unplaced."""
        try:
            rows = table.existing_rows(running, len(running))
        except KeyError:
            rows = np.array([table.row_of(view, j) for j in running], dtype=np.int64)
        for row in rows[table.on_type[rows] < 0].tolist():
            job_id = table.ids[row]
            assert job_id is not None
            table.started(view, job_id, self._type_of(types, view.allocations[job_id]))
        return rows

    # ----------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Schedule:
        self._note_touched(view)
        if self._rounds != "gavel":
            schedule = super().decide(view)
            self._after_decision(view, schedule.changes)
            return schedule
        free = view.scratch()

        def decide_partition(partition: str) -> PartitionDecision:
            end = self._round_end.get(partition)
            busy = next(iter(view.running(partition)), None) is not None
            # Gavel's round ends at its end time, or earlier once every job of it has
            # finished; an idle partition starts one as soon as a job is there. The end
            # is on the 1 us grid, where the wake-up it asks for fires: a wake-up of
            # another partition a microsecond earlier does not end it.
            if end is None or view.now >= end or not busy:
                self._round_end.pop(partition, None)
                if busy or view.pending_count(partition):
                    planned = self.plan_round(view, partition, free)
                    self._round_end[partition] = round(view.now + self._round, 6)
                    return planned
            elif view.pending_count(partition):
                return self.fill_free(view, partition, free)
            return NOTHING

        def first_round_end() -> float | None:
            return min(self._round_end.values(), default=None)

        schedule = decide_partitions(view, decide_partition, self.waiting_reason, first_round_end)
        self._after_decision(view, schedule.changes)
        return schedule

    def _solve(self, table: GavelJobs, types: GpuTypes, rows: np.ndarray) -> np.ndarray:
        self.solves += 1
        demand = table.gpus[rows].astype(float)
        if self._objective == "max-sum-throughput":
            return max_sum_throughput_allocation(table.speed[rows], demand, types.gpus)
        return max_min_allocation(
            table.speed[rows], demand, types.gpus, fill_spare=self._fill_spare, objective=self._objective
        )

    def _grants_gavel(
        self, view: ClusterView, partition: str, table: GavelJobs, types: GpuTypes, fresh: list[str], running: list[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gavel's grants: (the active rows in arrival order, each row's granted type, the
        granted rows in grant order)."""
        ledger = self._ledgers.get(partition)
        if ledger is None:
            ledger = self._ledgers[partition] = GavelLedger(table, len(types.names), self._round, self._reset_interval)
        active = len(running) + view.pending_count(partition)
        ledger.sync(fresh)
        if ledger.count != active:
            # Safety net: a job came or went without the ledger seeing it (nothing known
            # does this; the count alone would miss one leaving as another came): one
            # full pass, as the per-job bookkeeping made every round.
            ledger.sync(table.sight(view, self._ranks, everyone=True))
            ledger.keep_only({*running, *view.pending(partition)})
        rows = ledger.rows()
        ledger.maybe_reset(view.now, rows, lambda rows: self._solve(table, types, rows))
        orders = ledger.grant_order(rows, fastest_first(types.names))
        return rows, *grant_greedily(orders, table.gpus, types.gpus.copy(), table.size)

    def _grants_by_age(
        self, view: ClusterView, partition: str, table: GavelJobs, types: GpuTypes, running: list[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Our earlier rule (``priority=age``), job by job: LP re-solved whenever the job
        set changed, one global order by time received since submission."""
        table.gone.clear()  # no ledger to leave: the active set is read whole
        table.sight(view, self._ranks, everyone=True)
        ids = [*running, *view.pending(partition)]
        rows = table.existing_rows(ids, len(ids))
        rows = rows[np.argsort(table.rank[rows], kind="stable")]
        jobs = [table.ids[r] for r in rows.tolist()]
        last = self._solved.get(partition)
        if last is not None and last[0] == jobs:
            x = last[1]
        else:
            x = self._solve(table, types, rows)
            self._solved[partition] = (jobs, x)
        pairs = []
        for i, row in enumerate(rows.tolist()):
            job_id = jobs[i]
            submit = view.job(job_id).spec.submit_time  # type: ignore[arg-type]
            age = max(view.now - submit, _EPS)
            for k in range(len(types.names)):
                if x[i, k] <= _EPS:
                    continue
                fraction = table.received[row, k] / age
                priority = x[i, k] / fraction if fraction > 0 else math.inf
                pairs.append((-priority, -x[i, k], submit, int(table.rank[row]), job_id, row, k))
        pairs.sort()
        left = types.gpus.copy()
        granted = np.full(table.size, -1, dtype=np.int64)
        sequence = []
        for *_, row, k in pairs:
            if granted[row] >= 0 or table.gpus[row] > left[k]:
                continue
            granted[row] = k
            sequence.append(row)
            left[k] -= table.gpus[row]
        return rows, granted, np.array(sequence, dtype=np.int64)

    def plan_round(self, view: ClusterView, partition: str, free: FreeResources) -> PartitionDecision:
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        table = self._table(view, partition)
        table.credit_all(view, self._type_time(partition))
        types = self._types_of(view, partition)
        running = list(view.running(partition))
        if not running and not view.pending_count(partition):
            return NOTHING
        run_rows = self._running_rows(view, table, types, running)
        if self._priority == "gavel":
            fresh = table.sight(view, self._ranks)
            rows, granted, grant_sequence = self._grants_gavel(view, partition, table, types, fresh, running)
        elif self._priority == "sia-artifact":
            ledger = self._artifact.setdefault(partition, ArtifactLedger(len(types.names), self._round))
            rows = ledger.rows(view, partition, table, running, self._ranks)
            granted, grant_sequence = ledger.grant_rows(table, rows, self._solve(table, types, rows), types.gpus)
        else:
            rows, granted, grant_sequence = self._grants_by_age(view, partition, table, types, running)
        current = view.allocations
        is_running = np.zeros(granted.size, dtype=bool)
        is_running[run_rows] = True
        if self._priority == "sia-artifact":
            workers = self._artifact[partition].workers
            place_granted(view, types, table, granted, grant_sequence, running, free, workers, changes, reasons)
        else:
            stays = granted[run_rows] == table.on_type[run_rows]
            kept = np.zeros(granted.size, dtype=bool)
            kept[run_rows[stays]] = True
            # Free everything that is not kept in place, then place the rest, largest first
            # (Gavel assigns by decreasing scale factor to limit fragmentation).
            for i in np.flatnonzero(~stays).tolist():
                job_id = running[i]
                free.give(current[job_id])
                changes[job_id] = None
            order = grant_sequence[np.argsort(-table.gpus[grant_sequence], kind="stable")]
            for row in order[~kept[order]].tolist():
                job_id = table.ids[row]
                assert job_id is not None
                k = int(granted[row])
                alloc = self._placement.find(whole_gpu_spec(view.job(job_id).spec), types.nodes[k], free)
                if alloc is None:
                    reasons[job_id] = f"granted {types.names[k]} GPUs this round but they are fragmented"
                    continue
                free.take(alloc)
                if job_id in current and alloc == current[job_id]:
                    del changes[job_id]
                else:
                    changes[job_id] = alloc
        waiting = rows[(granted[rows] < 0) & ~is_running[rows]]
        not_granted = "not granted GPUs this round (max-min fair share)"
        reasons.update(dict.fromkeys([table.ids[r] for r in waiting.tolist()], not_granted))  # type: ignore[misc]
        table.release()
        return PartitionDecision(changes, reasons)

    def fill_free(self, view: ClusterView, partition: str, free: FreeResources) -> PartitionDecision:
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        if not self._fill:
            return NOTHING
        types = self._types_of(view, partition)
        nodes = view.partitions[partition]
        free_gpus = free.free_gpus_in(nodes)
        for job_id in view.pending(partition):
            if free_gpus == 0:
                break
            spec = view.job(job_id).spec
            if spec.num_gpus > free_gpus:
                continue
            table = self._table(view, partition)
            row = table.row_of(view, job_id)  # first: it may grow the arrays
            speed = table.speed[row]
            # Comparative advantage: prefer the type where this job is fast relative to the
            # typical job (a3c gains little from a V100, so it should leave it to a CNN).
            mean = [type_speed("", name) for name in types.names]
            for k in sorted(range(len(types.names)), key=lambda k: (-speed[k] / mean[k], -speed[k], k)):
                if speed[k] <= 0:
                    continue
                alloc = self._placement.find(whole_gpu_spec(spec), types.nodes[k], free)
                if alloc is not None:
                    changes[job_id] = alloc
                    free.take(alloc)
                    free_gpus -= alloc.gpus
                    break
            else:
                reasons[job_id] = "no free GPUs of a usable type until the next round"
        return PartitionDecision(changes, reasons)


class GavelParams(PolicyParams):
    round: float = Field(360.0, gt=0)
    rounds: Literal["gavel", "grid"] = Field(
        "gavel", description="gavel: a round ends early once all its jobs finished; grid: a fixed timer (ours)"
    )
    priority: Literal["gavel", "age", "sia-artifact"] = Field(
        "gavel",
        description="gavel: time per type since the last reset, types fastest first; age: ours; sia-artifact: "
        "the Sia artifact's Gavel baseline (LP every round, one order of all job-type pairs; with rounds=grid)",
    )
    reset_interval: float = Field(
        GAVEL_RESET_INTERVAL, ge=0, description="least seconds between allocation recomputations (priority=gavel)"
    )
    fill: bool = Field(False, description="hand free GPUs to waiting jobs between rounds (ours)")
    fill_spare: bool = Field(False, description="LP tie-break: maximise total normalised throughput (ours)")
    objective: Literal["gavel", "max-sum-throughput", "best-type"] = Field(
        "gavel",
        description="gavel: MaxMinFairnessPolicyWithPerf; max-sum-throughput: Gavel's max_sum_throughput_perf "
        "(the Sia artifact's Gavel baseline); best-type: our earlier objective",
    )
    profiles: str | None = Field(
        None,
        description="Pollux profiles (a directory or data set): Pollux jobs' speed per GPU type from its "
        "own profile at their GPU count and batch, as the Sia artifact feeds Gavel (default: the job's own "
        "or catalog speeds)",
    )


@register(
    "gavel",
    "Heterogeneity-aware max-min fairness as Gavel (scale factors, normalised by the proportional split): "
    "LP over GPU-type time fractions (HiGHS), recomputed as Gavel resets it; Gavel's round mechanism.",
    GavelParams,
)
def make_gavel(params: GavelParams) -> GavelPolicy:
    return GavelPolicy(
        params.round,
        params.fill,
        params.fill_spare,
        params.objective,
        rounds=params.rounds,
        priority=params.priority,
        reset_interval=params.reset_interval,
        profiles=profiles_root(params.profiles),
    )
