"""``sjf`` and ``srtf``: size-based scheduling with a pluggable duration estimate.

* ``sjf`` (shortest job first): waiting jobs start in order of estimated duration,
  shortest first; running jobs are never preempted. With the oracle estimate this is
  the classic non-preemptive SJF baseline of Tiresias and Helios.
* ``srtf`` (shortest remaining time first): running and waiting jobs are ranked by
  estimated remaining time (estimate minus work done); a shorter arrival preempts the
  longest-remaining running jobs as far as it needs their GPUs, and every relaunch
  pays the checkpoint-restore penalty. This is the preemptive oracle baseline of the
  Tiresias paper (Gu et al., NSDI 2019, §6) and of Helios (Hu et al., SC 2021).

Both take ``estimator=NAME`` (see ``shapeshift.policies.framework.estimators``; built in:
``oracle``, ``noise``, ``rolling``, ``gbdt``, ``helios``). Ties go to the earlier
submission. Waiting jobs keep a fixed key while they wait (a job's estimate and progress
do not move while it waits), so with a static estimator they live in an incremental heap,
not re-sorted per event.

SRTF with a static estimator decides through ``SrtfPolicy``, which gives exactly the
decisions of ``ComposedPolicy``'s preemptive path at a fraction of the cost on large
traces (the full Philly trace went from ~60 s to the time SJF takes): a partition with no
waiting job is skipped (all its running jobs fit, nothing can change); when the waiting
jobs together fit the free GPUs, nobody can be evicted and they are placed in rank order
without ranking the running jobs (``ComposedPolicy._waiting_fit_free``); otherwise the
running jobs are ranked in arrays and merged with the waiting heap block by block
(``srtf_rank``) from a table of their facts that is rewritten only for the jobs whose
progress changed since the previous decision (``srtf_table``, fed by the engine's
``ClusterView.touched``); and the eviction pass runs only when a waiting job was actually
chosen, over the running jobs left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from shapeshift.engine.state import FreeResources, JobStatus
from shapeshift.model import Schedule
from shapeshift.policies.framework.admission import AdmissionParams, make_admission
from shapeshift.policies.framework.composed import ComposedPolicy, _where, left_behind
from shapeshift.policies.framework.decisions import NOTHING, PartitionDecision
from shapeshift.policies.framework.estimators import (
    DurationEstimator,
    EstimatedOrdering,
    check_estimator,
    make_estimator,
)
from shapeshift.policies.framework.placement import PLACEMENTS, PlacementName
from shapeshift.policies.framework.registry import register
from shapeshift.policies.size_based.srtf_rank import RunningRanking, choose
from shapeshift.policies.size_based.srtf_table import RunningTables

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


class ShortestJobFirst(EstimatedOrdering):
    """Estimated duration, shortest first; non-preemptive."""

    name = "sjf"
    preemptive = False

    def key(self, view: ClusterView, job_id: str) -> tuple[float, float]:
        status = view.job(job_id)
        return (self.estimator.estimate(status), status.spec.submit_time)


class ShortestRemainingFirst(EstimatedOrdering):
    """Estimated remaining time (estimate - work done), shortest first; preemptive."""

    name = "srtf"
    preemptive = True

    def __init__(self, estimator: DurationEstimator):
        super().__init__(estimator)
        #: job id -> (status, estimate, submit time, GPUs), filled when a job is first ranked.
        #: Only used with a static estimator, whose estimate of a job never changes.
        self._known: dict[str, tuple[JobStatus, float, float, int]] = {}

    def key(self, view: ClusterView, job_id: str) -> tuple[float, float]:
        status = view.job(job_id)
        remaining = max(self.estimator.estimate(status) - status.progress_at(view.now), 0.0)
        return (remaining, status.spec.submit_time)

    def _facts(self, view: ClusterView, job_id: str) -> tuple[JobStatus, float, float, int]:
        facts = self._known.get(job_id)
        if facts is None:
            status = view.job(job_id)
            spec = status.spec
            facts = self._known[job_id] = (status, self.estimator.estimate(status), spec.submit_time, spec.num_gpus)
        return facts


class SrtfPolicy(ComposedPolicy):
    """``ComposedPolicy`` with a faster preemptive decision for SRTF and a static estimator.

    Same decisions (allocations, evictions and waiting reasons) as the generic path; see
    the module docstring for what it avoids."""

    def __post_init__(self) -> None:
        super().__post_init__()
        ordering = self.ordering
        self._tables = RunningTables(ordering._facts) if isinstance(ordering, ShortestRemainingFirst) else None

    def decide(self, view: ClusterView) -> Schedule:
        if self._tables is not None:
            self._tables.sync(view)
        return super().decide(view)

    def _decide_preemptive(self, view: ClusterView, partition: str, free: FreeResources) -> PartitionDecision:
        queue = self._queue(view, partition)
        ordering = self.ordering
        if queue is None or self._tables is None or not isinstance(ordering, ShortestRemainingFirst):
            return super()._decide_preemptive(view, partition, free)
        if view.pending_count(partition) == 0:
            return NOTHING  # every running job fits its partition: nothing to start, nobody to evict
        if self._waiting_fit_free(view, partition, free):
            # everyone fits: no running job needs ranking, nobody is evicted
            return self._place_waiting(view, partition, free, (j for _, j in queue.iterate(view)))
        table = self._tables.of(view, partition)
        ranking = RunningRanking.of(table.ids, table.columns, view.now, table.hint)
        table.hint = ranking.order
        capacity = view.capacity_gpus(partition)
        choice = choose(
            ranking, lambda bound: queue.iterate(view, bound), lambda j: ordering._facts(view, j)[3], capacity
        )
        where = _where(view, partition)
        passed_over = PartitionDecision(reasons={j: left_behind(gpus, where, left) for j, gpus, left in choice.too_big})
        if not choice.newcomers:
            return passed_over  # only running jobs chosen: nothing is placed, so nothing is evicted
        victims, first_lease = ranking.victims(choice.running, self.lease, view.now)
        return passed_over.then(self._place_newcomers(view, partition, free, choice.newcomers, victims, first_lease))


class SizeParams(AdmissionParams):
    estimator: str = "oracle"
    placement: PlacementName = "consolidated"

    @field_validator("estimator")
    @classmethod
    def _known(cls, value: str) -> str:
        return check_estimator(value)


class SjfParams(SizeParams):
    #: Helios Algorithm 1 (line 11) and its artifact's ``sjf.py`` stop at the first waiting
    #: job that does not fit: no backfill. ``backfill=true`` lets later jobs start.
    backfill: bool = False


class SrtfParams(SizeParams):
    #: Seconds a running job keeps its GPUs before it can be preempted (Blox's 300 s round);
    #: 0 preempts at once, as the Helios simulator's ``srtf.py`` does.
    lease: float = Field(300.0, ge=0, allow_inf_nan=False)


@register(
    "sjf",
    "Shortest job first by estimated duration (estimator=oracle); non-preemptive, stops at the first job that does "
    "not fit (Helios) unless backfill=true.",
    SjfParams,
)
def make_sjf(params: SjfParams) -> ComposedPolicy:
    return ComposedPolicy(
        name="sjf",
        admission=make_admission(params),
        ordering=ShortestJobFirst(make_estimator(params.estimator)),
        placement=PLACEMENTS[params.placement](),
        head_of_line_blocking=not params.backfill,
    )


@register(
    "srtf",
    "Shortest remaining time first (estimator=oracle); preempts the longest-remaining jobs for shorter ones once "
    "their 300 s lease has run (lease=0: at once, as Helios).",
    SrtfParams,
)
def make_srtf(params: SrtfParams) -> ComposedPolicy:
    return SrtfPolicy(
        name="srtf",
        admission=make_admission(params),
        ordering=ShortestRemainingFirst(make_estimator(params.estimator)),
        placement=PLACEMENTS[params.placement](),
        lease=params.lease,
    )
