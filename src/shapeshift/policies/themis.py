"""``themis``: finish-time fairness with one-round leases.

Themis (Mahajan et al., "Themis: Fair and Efficient GPU Cluster Scheduling", NSDI 2020)
measures unfairness as the finish-time fairness ratio

    rho = T_shared / T_ideal

where ``T_shared`` is the job's estimated finish time under the current sharing (time
since submission plus the remaining work at its requested speed) and ``T_ideal`` is
its run time on an exclusive ``1/N`` share of the cluster (N = active jobs): the
job's duration when its GPU demand fits in ``C/N`` GPUs, stretched by
``demand / (C/N)`` when it does not. rho > 1 means the job is worse off than with its
fair share.

Every round (``--round``, default 600 s), leases expire and the GPUs are offered to the
fraction ``fraction`` of active jobs with the largest rho, worst first; what those jobs
cannot use goes to the others, running jobs first so that leases renew rather than
churn, then waiting jobs by rho. A running job that loses its lease is preempted and
pays the checkpoint-restore penalty when it resumes. Between rounds, arrivals and
completions only hand free GPUs to waiting jobs (largest rho first); nobody is
preempted before its lease ends. Themis's partial-allocation auction among the offered
jobs is simplified to this greedy worst-rho-first offer (the study's own simulator
makes the same simplification for rigid jobs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import Field

from shapeshift.model import Schedule
from shapeshift.policies.base import ARRIVAL, COMPLETION, ROUND
from shapeshift.policies.composed import AcceptAll, ComposedPolicy
from shapeshift.policies.placement import PLACEMENTS, Placement, PlacementName
from shapeshift.policies.registry import PolicyParams, register

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


def finish_time_fairness(view: ClusterView, job_id: str, active: int, capacity: int) -> float:
    """rho of ``job_id`` when ``active`` jobs share ``capacity`` GPUs."""
    status = view.job(job_id)
    duration = max(view.expected_duration(job_id), 1e-9)
    share = capacity / max(active, 1)
    demand = max(status.spec.num_gpus, 1)
    ideal = duration * max(1.0, demand / share)
    rate = status.rate if status.rate > 0 else 1.0
    shared = (view.now - status.spec.submit_time) + view.remaining(job_id) / rate
    return shared / ideal


class FinishTimeFairness:
    """Rank by rho, worst first; on lease renewal, the top ``fraction`` first, then running jobs."""

    name = "themis"

    def __init__(self, fraction: float, preemptive: bool):
        self.fraction = fraction
        self.preemptive = preemptive

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        jobs = list(jobs)
        active = view.pending_count(partition) + sum(1 for _ in view.running(partition))
        capacity = view.capacity_gpus(partition)
        rho = {j: finish_time_fairness(view, j, active, capacity) for j in jobs}
        by_rho = sorted(jobs, key=lambda j: (-rho[j], view.job(j).spec.submit_time, j))
        if not self.preemptive:
            return by_rho
        offered = by_rho[: math.ceil(self.fraction * len(by_rho))]
        chosen = set(offered)
        running = set(view.running(partition))
        rest = [j for j in by_rho if j not in chosen]
        return [*offered, *(j for j in rest if j in running), *(j for j in rest if j not in running)]


class ThemisPolicy:
    """Lease renewal (preemptive) on round timers; free-GPU hand-out on other events."""

    name = "themis"

    def __init__(self, fraction: float, placement: Placement, round_seconds: float):
        self.triggers = frozenset({ARRIVAL, COMPLETION, ROUND})
        self.default_round: float | None = round_seconds
        self._lease = ComposedPolicy("themis", AcceptAll(), FinishTimeFairness(fraction, True), placement)
        self._fill = ComposedPolicy(
            "themis", AcceptAll(), FinishTimeFairness(fraction, False), placement, head_of_line_blocking=False
        )

    def decide(self, view: ClusterView) -> Schedule:
        return (self._lease if view.timer_fired else self._fill).decide(view)


class ThemisParams(PolicyParams):
    fraction: float = Field(0.8, gt=0, le=1)
    round: float = Field(600.0, gt=0)
    placement: PlacementName = "consolidated"


@register(
    "themis",
    "Finish-time fairness: each round, leases go to the fraction of jobs with the worst rho = T_shared/T_ideal.",
    ThemisParams,
)
def make_themis(params: ThemisParams) -> ThemisPolicy:
    return ThemisPolicy(params.fraction, PLACEMENTS[params.placement](), params.round)
