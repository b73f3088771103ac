"""``sjf`` and ``srtf``: size-based scheduling with a pluggable duration estimate.

* ``sjf`` (shortest job first): waiting jobs start in order of estimated duration,
  shortest first; running jobs are never preempted. With the oracle estimate this is
  the classic non-preemptive SJF baseline of Tiresias and Helios.
* ``srtf`` (shortest remaining time first): running and waiting jobs are ranked by
  estimated remaining time (estimate minus work done); a shorter arrival preempts the
  longest-remaining running jobs as far as it needs their GPUs, and every relaunch
  pays the checkpoint-restore penalty. This is the preemptive oracle baseline of the
  Tiresias paper (Gu et al., NSDI 2019, §6) and of Helios (Hu et al., SC 2021).

Both take ``estimator=NAME`` (see ``shapeshift.policies.estimators``; built in:
``oracle``). Ties go to the earlier submission. Waiting jobs keep a fixed key while they
wait (a job's estimate and progress do not move while it waits), so with a static
estimator they live in an incremental heap, not re-sorted per event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from pydantic import field_validator

from shapeshift.policies.admission import AdmissionParams, make_admission
from shapeshift.policies.composed import ComposedPolicy
from shapeshift.policies.estimators import CompletionFeed, DurationEstimator, check_estimator, make_estimator
from shapeshift.policies.placement import PLACEMENTS
from shapeshift.policies.registry import register

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


class _EstimatedOrdering:
    """Shared by SJF and SRTF: an estimator, fed finished jobs when it learns from them."""

    name = "estimated"
    preemptive = False

    def __init__(self, estimator: DurationEstimator):
        self.estimator = estimator
        self.static_keys = estimator.static
        self._feed = CompletionFeed() if estimator.needs_history else None

    def prepare(self, view: ClusterView) -> None:
        if self._feed is not None:
            for status in self._feed.finished(view):
                self.estimator.observe(status)

    def key(self, view: ClusterView, job_id: str) -> tuple[float, float]:
        if self._feed is not None:
            self._feed.watch(job_id)
        return self._key(view, job_id)

    def _key(self, view: ClusterView, job_id: str) -> tuple[float, float]:
        raise NotImplementedError

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        return sorted(jobs, key=lambda j: (self.key(view, j), j))


class ShortestJobFirst(_EstimatedOrdering):
    """Estimated duration, shortest first; non-preemptive."""

    name = "sjf"
    preemptive = False

    def _key(self, view: ClusterView, job_id: str) -> tuple[float, float]:
        status = view.job(job_id)
        return (self.estimator.estimate(status), status.spec.submit_time)


class ShortestRemainingFirst(_EstimatedOrdering):
    """Estimated remaining time (estimate - work done), shortest first; preemptive."""

    name = "srtf"
    preemptive = True

    def _key(self, view: ClusterView, job_id: str) -> tuple[float, float]:
        status = view.job(job_id)
        remaining = max(self.estimator.estimate(status) - status.progress_at(view.now), 0.0)
        return (remaining, status.spec.submit_time)


class SizeParams(AdmissionParams):
    estimator: str = "oracle"
    placement: Literal["consolidated", "first-fit", "scattered"] = "consolidated"

    @field_validator("estimator")
    @classmethod
    def _known(cls, value: str) -> str:
        return check_estimator(value)


class SjfParams(SizeParams):
    backfill: bool = True


@register(
    "sjf",
    "Shortest job first by estimated duration (estimator=oracle); non-preemptive, backfills unless backfill=false.",
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
    "Shortest remaining time first (estimator=oracle); preempts the longest-remaining jobs for shorter ones.",
    SizeParams,
)
def make_srtf(params: SizeParams) -> ComposedPolicy:
    return ComposedPolicy(
        name="srtf",
        admission=make_admission(params),
        ordering=ShortestRemainingFirst(make_estimator(params.estimator)),
        placement=PLACEMENTS[params.placement](),
    )
