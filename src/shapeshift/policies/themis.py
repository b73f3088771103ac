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

from pydantic import Field

from shapeshift.model import Schedule
from shapeshift.policies.base import ARRIVAL, COMPLETION, ROUND
from shapeshift.policies.composed import AcceptAll, ComposedPolicy
from shapeshift.policies.placement import PLACEMENTS, Placement, PlacementName
from shapeshift.policies.registry import PolicyParams, register

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


class FinishTimeFairness:
    """Rank by rho, worst first; on lease renewal, the worst ``1 - knob`` first, then running jobs."""

    name = "themis"

    def __init__(self, knob: float, preemptive: bool, contention: Contention | None):
        self.knob = knob
        self.preemptive = preemptive
        self.contention = contention

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        jobs = list(jobs)
        active = view.pending_count(partition) + sum(1 for _ in view.running(partition))
        capacity = view.capacity_gpus(partition)
        if self.contention is None:
            rho = {j: finish_time_fairness(view, j, active, capacity) for j in jobs}
        else:
            integral = self.contention.update(partition, view.now, active)
            rho = {
                j: finish_time_fairness(view, j, self.contention.average(j, view.now, integral, active), capacity)
                for j in jobs
            }
        by_rho = sorted(jobs, key=lambda j: (-rho[j], view.job(j).spec.submit_time, j))
        if not self.preemptive:
            return by_rho
        offered = by_rho[: max(1, math.ceil((1.0 - self.knob) * len(by_rho) - 1e-9))]
        chosen = set(offered)
        running = set(view.running(partition))
        rest = [j for j in by_rho if j not in chosen]
        return [*offered, *(j for j in rest if j in running), *(j for j in rest if j not in running)]


class ThemisPolicy:
    """Lease renewal (preemptive) on round timers; free-GPU hand-out on other events."""

    name = "themis"

    def __init__(self, knob: float, placement: Placement, round_seconds: float, average_contention: bool = True):
        self.triggers = frozenset({ARRIVAL, COMPLETION, ROUND})
        self.default_round: float | None = round_seconds
        contention = self._contention = Contention() if average_contention else None
        self._lease = ComposedPolicy("themis", AcceptAll(), FinishTimeFairness(knob, True, contention), placement)
        self._fill = ComposedPolicy(
            "themis",
            AcceptAll(),
            FinishTimeFairness(knob, False, contention),
            placement,
            head_of_line_blocking=False,
        )

    def decide(self, view: ClusterView) -> Schedule:
        if self._contention is not None:
            # Record every change of the active count and every arrival, even where the
            # ordering below is not consulted (nothing waiting).
            for partition in sorted(view.dirty_partitions):
                running = list(view.running(partition))
                pending = list(view.pending(partition))
                integral = self._contention.update(partition, view.now, len(running) + len(pending))
                for job_id in pending:
                    self._contention.average(job_id, view.now, integral, len(running) + len(pending))
        return (self._lease if view.timer_fired else self._fill).decide(view)


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
