"""``las``: least attained service, single queue, preemptive, as Blox runs it.

The job that has received the least service so far runs first. LAS needs no duration
knowledge yet favours short jobs, because long jobs accumulate service and sink (Rai et
al., "Analysis of LAS scheduling for job size distributions with high variance",
SIGMETRICS 2003). Ties go to the earlier submission.

Default, as in Blox (Agarwal et al., EuroSys 2024; ``schedulers/las.py`` sorts active jobs
by attained service every round, ``grpc_client_rm.py`` adds the round's length to the
service of every job that ran in it, ``las_scheduler.py`` ``--round-duration 300``):

* ``mode="round"``: decisions every ``round`` seconds (300) and only then; a job that
  arrives or a GPU that frees up waits for the next round;
* ``service="time"``: attained service is seconds held, not GPU-seconds;
* a running job keeps its GPUs for at least ``lease`` seconds (the round) before it can
  be preempted.

Our variants, as parameters: ``mode="event"`` decides at every arrival and completion
(the continuous LAS of the first Shapeshift release), ``service="gpu-time"`` counts
GPU-seconds (Tiresias's two-dimensional service), and ``lease=0`` drops the lease. One
difference stays: a job finishes at its exact time, where Blox's simulator ends it at the
end of the round in which its work runs out.

A waiting job's attained service does not change while it waits, so waiting jobs live in
an incremental heap (see ``StaticKeyQueue``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from shapeshift.policies.framework.admission import AdmissionParams, make_admission
from shapeshift.policies.framework.base import ROUND, PartTraits
from shapeshift.policies.framework.composed import ComposedPolicy
from shapeshift.policies.framework.placement import PLACEMENTS, PlacementName
from shapeshift.policies.framework.registry import register

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

#: Blox's round (``las_scheduler.py``), the default round and lease.
BLOX_ROUND = 300.0


class LeastAttainedService:
    """Ranks by attained service: GPU-seconds (``gpu_time``) or seconds held."""

    name = "las"
    preemptive = True
    traits = PartTraits(partition_local=True, static_keys=True)

    def __init__(self, gpu_time: bool = True):
        self.gpu_time = gpu_time

    def key(self, view: ClusterView, job_id: str) -> tuple[float, float]:
        status = view.job(job_id)
        if self.gpu_time:
            service = view.attained(job_id)
        else:
            service = status.run_seconds + (view.now - status.last_update if status.allocation is not None else 0.0)
        return (service, status.spec.submit_time)

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        return sorted(jobs, key=lambda j: (self.key(view, j), j))


class LasParams(AdmissionParams):
    placement: PlacementName = "consolidated"
    #: round: decide only every ``round`` seconds (Blox); event: at arrivals and completions.
    mode: Literal["round", "event"] = "round"
    round: float = Field(BLOX_ROUND, gt=0, allow_inf_nan=False)
    #: time: seconds held (Blox); gpu-time: GPU-seconds held (Tiresias's 2D service).
    service: Literal["time", "gpu-time"] = "time"
    #: Seconds a running job keeps its GPUs before it can be preempted.
    lease: float = Field(BLOX_ROUND, ge=0, allow_inf_nan=False)


@register(
    "las",
    "Least attained service first (Blox): every 300 s round, preemptive with a one-round lease; mode=event for "
    "continuous LAS.",
    LasParams,
)
def make_las(params: LasParams) -> ComposedPolicy:
    round_based = params.mode == "round"
    policy = ComposedPolicy(
        name="las",
        admission=make_admission(params),
        ordering=LeastAttainedService(gpu_time=params.service == "gpu-time"),
        placement=PLACEMENTS[params.placement](),
        lease=params.lease,
    )
    if round_based:
        policy.triggers = frozenset({ROUND})
        policy.default_round = params.round
    return policy
