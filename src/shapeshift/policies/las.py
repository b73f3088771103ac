"""``las``: least attained service, single queue, preemptive.

The job that has received the least service so far runs first; service is measured in
GPU-seconds (GPUs held x time held, restore pauses included), so a wide job ages
faster than a narrow one. LAS needs no duration knowledge yet favours short jobs,
because long jobs accumulate service and sink. It is the continuous, single-queue form
of Tiresias's 2D-LAS (Gu et al., NSDI 2019, §3.2) and goes back to Rai et al.,
"Analysis of LAS scheduling for job size distributions with high variance" (SIGMETRICS
2003). Decisions happen on arrivals and completions; ties go to the earlier submission.

A waiting job's attained service does not change while it waits, so waiting jobs live
in an incremental heap (see ``StaticKeyQueue``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from shapeshift.policies.admission import AdmissionParams, make_admission
from shapeshift.policies.composed import ComposedPolicy
from shapeshift.policies.placement import PLACEMENTS
from shapeshift.policies.registry import register

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


class LeastAttainedService:
    name = "las"
    preemptive = True
    static_keys = True

    def key(self, view: ClusterView, job_id: str) -> tuple[float, float]:
        return (view.attained(job_id), view.job(job_id).spec.submit_time)

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        return sorted(jobs, key=lambda j: (self.key(view, j), j))


class LasParams(AdmissionParams):
    placement: Literal["consolidated", "first-fit", "scattered"] = "consolidated"


@register("las", "Least attained service (GPU-seconds) first; preemptive, single queue.", LasParams)
def make_las(params: LasParams) -> ComposedPolicy:
    return ComposedPolicy(
        name="las",
        admission=make_admission(params),
        ordering=LeastAttainedService(),
        placement=PLACEMENTS[params.placement](),
    )
