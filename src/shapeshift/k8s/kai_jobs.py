"""What KAI-Scheduler's cycle works on: jobs (PodGroups), running jobs, the cycle's outcome,
and the per-queue checks a job must pass.

Sources, kai-scheduler/KAI-Scheduler v0.17.0-9 (commit d5bc503):
docs/scheduling-deep-dive/README.md "Workload Priority" (priority below 100 is
preemptible, 100 and above is not, and a non-preemptible workload only uses in-quota
resources); capacity_policy/max_allowed_check.go (a queue and each ancestor never exceed
their ``limit``); docs/batch/README.md (PodGroup ``minMember``: a job's pods start
together, so its whole request must fit).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from shapeshift.k8s.kai_config import UNLIMITED, KaiConfig, QueueResource

NON_PREEMPTIBLE = 100  # priority at and above which a workload is not preemptible
EPS = 1e-9

#: Jobs the cycle cannot tell apart (same queue, request and priority): when one of them
#: can neither reclaim nor preempt, none of them can until something changes.
GroupKey = tuple[str, tuple[tuple[str, float], ...], int]


@dataclass(frozen=True)
class Job:
    name: str
    queue: str
    per_pod: Mapping[str, float]
    pods: int = 1
    priority: int = 50  # KAI's default "train" class
    created: float = 0.0

    request: Mapping[str, float] = field(init=False, compare=False, repr=False)
    preemptible: bool = field(init=False, compare=False, repr=False)
    group: GroupKey = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        request = {r: v * self.pods for r, v in self.per_pod.items() if v > 0}
        object.__setattr__(self, "request", request)
        object.__setattr__(self, "preemptible", self.priority < NON_PREEMPTIBLE)
        object.__setattr__(self, "group", (self.queue, tuple(sorted(request.items())), self.priority))


@dataclass(frozen=True)
class Running:
    job: Job
    started: float = 0.0


@dataclass
class Outcome:
    started: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    running: list[Running] = field(default_factory=list)
    shares: dict[str, dict[str, float]] = field(default_factory=dict)


def add(a: dict[str, float], b: Mapping[str, float], sign: float = 1.0) -> None:
    for r, v in b.items():
        a[r] = a.get(r, 0.0) + sign * v


def _within(
    config: KaiConfig, allocated: Mapping[str, Mapping[str, float]], job: Job, bound: Callable[[QueueResource], float]
) -> bool:
    """Whether ``job`` keeps every queue on its chain within ``bound`` of each resource."""
    for q in config.chains[job.queue]:
        resource = config.queues[q].resource
        for r, v in job.request.items():
            cap = bound(resource(r))
            if cap != UNLIMITED and allocated[q].get(r, 0.0) + v > cap + EPS:
                return False
    return True


def within_limits(config: KaiConfig, allocated: Mapping[str, Mapping[str, float]], job: Job) -> bool:
    return _within(config, allocated, job, lambda res: res.limit)


def within_deserved(config: KaiConfig, allocated_np: Mapping[str, Mapping[str, float]], job: Job) -> bool:
    """A non-preemptible job keeps its queue's non-preemptible allocation within quota."""
    return _within(config, allocated_np, job, lambda res: res.quota)


def fits(free: Mapping[str, float], job: Job) -> bool:
    return all(free.get(r, 0.0) + EPS >= v for r, v in job.request.items())


def saturation(alloc: float, fair: float) -> float:
    if fair <= 0:
        return math.inf if alloc > 0 else 0.0
    return alloc / fair


def leveled(config: KaiConfig, a: str, b: str) -> tuple[str, str]:
    """The ancestors of ``a`` and ``b`` that are siblings (children of their common ancestor)."""
    chain_a, chain_b = config.chains[a], config.chains[b]
    common = next((q for q in chain_a if q in chain_b), None)
    below_a = chain_a[chain_a.index(common) - 1] if common else chain_a[-1]
    below_b = chain_b[chain_b.index(common) - 1] if common else chain_b[-1]
    return below_a, below_b
