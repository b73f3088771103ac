"""KAI-Scheduler's scheduling cycle as pure functions: allocate, reclaim, preempt.

Sources, kai-scheduler/KAI-Scheduler v0.17.0-9 (commit d5bc503):

* docs/scheduling-deep-dive/README.md, "The Scheduling Cycle": Allocate (no evictions),
  then Reclaim (between queues), then Preempt (within a queue); "Workload Priority":
  priority below 100 is preemptible, 100 and above is not, and a non-preemptible
  workload only uses in-quota resources; preemption needs the same queue, a preemptible
  victim of strictly lower priority; "Reclaim": different queues, preemptible victims,
  the reclaimer below its fair share or deserved quota, the victim's queue above it.
* pkg/scheduler/plugins/proportion/reclaimable/reclaimable.go and strategies/strategies.go:
  a reclaimer's queue may reclaim when its allocation plus the job stays within its fair
  share; each victim's queue must keep more than its fair share
  (``MaintainFairShare``) or, with the reclaimer within deserved quota, more than its
  deserved quota (``GuaranteeDeservedQuota``); afterwards, at every level, the
  reclaimer's saturation (allocated / fair share) times ``reclaimerUtilizationMultiplier``
  must stay below each sibling's when above 1.
* capacity_policy/max_allowed_check.go: a queue (and each ancestor) never exceeds its
  ``limit``.
* Gang scheduling (docs/batch/README.md, PodGroup ``minMember``): a job's pods start
  together or not at all; here the job's total request must fit the free capacity.

Capacity is counted per resource over the whole cluster (placement on nodes is the
engine's business). Queue order in Allocate follows
pkg/scheduler/plugins/proportion/queue_order/queue_order.go on GPUs: queues within their
fair share first, then those staying within deserved quota with their next job, then
higher queue priority, then the smaller (allocated + next job) / fair share, then name;
jobs within a queue by priority, then age.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shapeshift.k8s.kai_config import UNLIMITED, KaiConfig
from shapeshift.k8s.kai_fairshare import fair_shares

NON_PREEMPTIBLE = 100  # priority at and above which a workload is not preemptible


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "request", {r: v * self.pods for r, v in self.per_pod.items() if v > 0})
        object.__setattr__(self, "preemptible", self.priority < NON_PREEMPTIBLE)


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


def _add(a: dict[str, float], b: Mapping[str, float], sign: float = 1.0) -> None:
    for r, v in b.items():
        a[r] = a.get(r, 0.0) + sign * v


def _allocated(config: KaiConfig, running: Sequence[Running]) -> dict[str, dict[str, float]]:
    """Per queue (ancestors included) what its running jobs hold: summed per leaf queue
    first, then carried up its chain of ancestors once."""
    per_leaf: dict[str, dict[str, float]] = {}
    for r in running:
        _add(per_leaf.setdefault(r.job.queue, {}), r.job.request)
    return _carried(config, per_leaf)


def _carried(config: KaiConfig, per_leaf: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {q: {} for q in config.queues}
    chains = config.chains
    for leaf, amounts in per_leaf.items():
        for node in chains[leaf]:
            _add(out[node], amounts)
    return out


def _ancestors(config: KaiConfig, queue: str) -> tuple[str, ...]:
    return config.chains[queue]


def _within_limits(config, allocated, job: Job) -> bool:
    for q in _ancestors(config, job.queue):
        for r, v in job.request.items():
            limit = config.queues[q].resource(r).limit
            if limit != UNLIMITED and allocated[q].get(r, 0.0) + v > limit + 1e-9:
                return False
    return True


def _within_deserved(config, allocated_np, job: Job) -> bool:
    """A non-preemptible job keeps its queue's non-preemptible allocation within quota."""
    for q in _ancestors(config, job.queue):
        for r, v in job.request.items():
            quota = config.queues[q].resource(r).quota
            if quota != UNLIMITED and allocated_np[q].get(r, 0.0) + v > quota + 1e-9:
                return False
    return True


def _fits(free: Mapping[str, float], job: Job) -> bool:
    return all(free.get(r, 0.0) + 1e-9 >= v for r, v in job.request.items())


def _saturation(alloc: float, fair: float) -> float:
    if fair <= 0:
        return math.inf if alloc > 0 else 0.0
    return alloc / fair


def run_cycle(
    config: KaiConfig,
    capacity: Mapping[str, float],
    pending: Sequence[Job],
    running: Sequence[Running],
    *,
    now: float = 0.0,
    usage: Mapping[str, Mapping[str, float]] | None = None,
) -> Outcome:
    """One cycle: Allocate, then Reclaim, then Preempt, for the jobs that still wait."""
    leaves = config.leaves
    for job in pending:
        if job.queue not in leaves:
            raise ValueError(f"job {job.name}: queue {job.queue!r} is not a leaf queue")
    # One pass over the running jobs: per leaf queue, all and non-preemptible holdings.
    held: dict[str, dict[str, float]] = {}
    held_np: dict[str, dict[str, float]] = {}
    for r in running:
        _add(held.setdefault(r.job.queue, {}), r.job.request)
        if not r.job.preemptible:
            _add(held_np.setdefault(r.job.queue, {}), r.job.request)
    demand: dict[str, dict[str, float]] = {q: dict(a) for q, a in held.items()}
    for item in pending:
        _add(demand.setdefault(item.queue, {}), item.request)
    shares = fair_shares(config, capacity, demand, usage)
    out = Outcome(running=list(running), shares=shares)
    alloc = _carried(config, held)
    alloc_np = _carried(config, held_np)
    free = dict(capacity)
    for amounts in held.values():
        _add(free, amounts, -1.0)
    by_queue: dict[str, list[Job]] = {}
    for job in sorted(pending, key=lambda j: (-j.priority, j.created, j.name)):
        by_queue.setdefault(job.queue, []).append(job)

    def start(job: Job) -> None:
        out.running.append(Running(job, now))
        out.started.append(job.name)
        by_queue[job.queue].remove(job)
        _add(free, job.request, -1.0)
        for q in _ancestors(config, job.queue):
            _add(alloc[q], job.request)
            if not job.preemptible:
                _add(alloc_np[q], job.request)

    def queue_order(q: str) -> tuple:
        """queue_order.go: under fair share first, then under deserved quota with the head
        job, then queue priority, then the smaller share with the head job (GPUs)."""
        head = by_queue[q][0].request.get("gpu", 0.0) if by_queue[q] else 0.0
        held, fair = alloc[q].get("gpu", 0.0), shares[q].get("gpu", 0.0)
        quota = config.queues[q].resource("gpu").quota
        starved = quota == UNLIMITED or held + head <= quota + 1e-9
        return (held > fair + 1e-9, not starved, -config.queues[q].priority, _saturation(held + head, fair), q)

    # Allocate: the most starved queue's first job that fits, again and again
    progress = True
    while progress and any(v > 1e-9 for v in free.values()):
        progress = False
        for q in sorted(by_queue, key=queue_order):
            job = next(
                (
                    j
                    for j in by_queue[q]
                    if _fits(free, j)
                    and _within_limits(config, alloc, j)
                    and (j.preemptible or _within_deserved(config, alloc_np, j))
                ),
                None,
            )
            if job is not None:
                start(job)
                progress = True
                break
    # Reclaim, then Preempt, one job at a time by priority and age
    failed: set[tuple] = set()  # (queue, request, priority) found impossible since the last change
    lowest: dict[str, int] = {}
    for r in out.running:
        if r.job.preemptible:
            lowest[r.job.queue] = min(lowest.get(r.job.queue, NON_PREEMPTIBLE), r.job.priority)
    for job in sorted((j for jobs in by_queue.values() for j in jobs), key=lambda j: (-j.priority, j.created, j.name)):
        key = (job.queue, tuple(sorted(job.request.items())), job.priority)
        if key in failed:
            continue
        may_reclaim = all(
            alloc[job.queue].get(r, 0.0) + v <= shares[job.queue].get(r, 0.0) + 1e-9 for r, v in job.request.items()
        )
        may_preempt = lowest.get(job.queue, NON_PREEMPTIBLE) < job.priority
        victims = _reclaim_victims(config, capacity, shares, out.running, job) if may_reclaim else None
        if victims is None and may_preempt:
            victims = _preempt_victims(config, capacity, out.running, job)
        if victims is None:
            failed.add(key)
            continue
        out.running = [r for r in out.running if all(r is not v for v in victims)]
        out.evicted.extend(v.job.name for v in victims)
        for v in victims:
            _add(free, v.job.request)
            for q in _ancestors(config, v.job.queue):
                _add(alloc[q], v.job.request, -1.0)
                if not v.job.preemptible:
                    _add(alloc_np[q], v.job.request, -1.0)
        start(job)
        failed.clear()
        lowest = {}
        for r in out.running:
            if r.job.preemptible:
                lowest[r.job.queue] = min(lowest.get(r.job.queue, NON_PREEMPTIBLE), r.job.priority)
    return out


def _free(capacity, running) -> dict[str, float]:
    used: dict[str, float] = {}
    for r in running:
        _add(used, r.job.request)
    free = dict(capacity)
    _add(free, used, -1.0)
    return free


def _reclaim_victims(config, capacity, shares, running, job: Job) -> list[Running] | None:
    alloc = _allocated(config, running)
    alloc_np = _allocated(config, [r for r in running if not r.job.preemptible])
    if not _within_limits(config, alloc, job):
        return None
    # CanReclaimResources: allocated + job within fair share (and deserved if non-preemptible)
    for r, v in job.request.items():
        if alloc[job.queue].get(r, 0.0) + v > shares[job.queue].get(r, 0.0) + 1e-9:
            return None
    if not job.preemptible and not _within_deserved(config, alloc_np, job):
        return None
    within_deserved = all(
        config.queues[job.queue].resource(r).quota == UNLIMITED
        or alloc[job.queue].get(r, 0.0) + v <= config.queues[job.queue].resource(r).quota + 1e-9
        for r, v in job.request.items()
    )
    candidates = [r for r in running if r.job.queue != job.queue and r.job.preemptible]
    candidates.sort(
        key=lambda r: (
            -_saturation(alloc[r.job.queue].get("gpu", 0.0), shares[r.job.queue].get("gpu", 0.0)),
            r.job.priority,
            -r.started,
        )
    )
    remaining = {q: dict(a) for q, a in alloc.items()}
    chosen: list[Running] = []
    freed = _free(capacity, running)
    for victim in candidates:
        if _fits(freed, job):
            break
        level = _leveled(config, job.queue, victim.job.queue)[1]
        rem = remaining[level]
        over_fair = any(rem.get(r, 0.0) > shares[level].get(r, 0.0) + 1e-9 for r in victim.job.request)
        quota = config.queues[level].resource
        over_deserved = any(
            quota(r).quota != UNLIMITED and rem.get(r, 0.0) > quota(r).quota + 1e-9 for r in victim.job.request
        )
        if not (over_fair or (within_deserved and over_deserved)):
            continue
        chosen.append(victim)
        _add(freed, victim.job.request)
        for q in _ancestors(config, victim.job.queue):
            _add(remaining[q], victim.job.request, -1.0)
    if not chosen or not _fits(freed, job):
        return None
    # the reclaimer must stay less saturated than each sibling it took from, at every level
    multiplier = config.fairness.reclaimer_utilization_multiplier
    for q in _ancestors(config, job.queue):
        mine = dict(remaining[q])
        _add(mine, job.request)
        parent = config.queues[q].parent
        for sib in config.children(parent):
            if sib == q or remaining[sib] == alloc[sib]:
                continue
            for r in job.request:
                ratio = _saturation(mine.get(r, 0.0), shares[q].get(r, 0.0))
                theirs = _saturation(remaining[sib].get(r, 0.0), shares[sib].get(r, 0.0))
                if ratio > 1 and shares[sib].get(r, 0.0) > 0 and ratio * multiplier >= theirs:
                    return None
    return chosen


def _leveled(config: KaiConfig, a: str, b: str) -> tuple[str, str]:
    """The ancestors of ``a`` and ``b`` that are siblings (children of their common ancestor)."""
    chain_a, chain_b = _ancestors(config, a), _ancestors(config, b)
    common = next((q for q in chain_a if q in chain_b), None)
    below_a = chain_a[chain_a.index(common) - 1] if common else chain_a[-1]
    below_b = chain_b[chain_b.index(common) - 1] if common else chain_b[-1]
    return below_a, below_b


def _preempt_victims(config, capacity, running, job: Job) -> list[Running] | None:
    """Victims in the job's own queue, lowest priority then newest first, until the job
    fits the free capacity *and* its queue's limits (docs/priority/README.md: a queue
    limited to 1 GPU whose train pod is preempted for a build pod)."""
    candidates = [
        r for r in running if r.job.queue == job.queue and r.job.preemptible and r.job.priority < job.priority
    ]
    candidates.sort(key=lambda r: (r.job.priority, -r.started))

    def admits(after: list[Running]) -> bool:
        if not _fits(_free(capacity, after), job) or not _within_limits(config, _allocated(config, after), job):
            return False
        if job.preemptible:
            return True
        return _within_deserved(config, _allocated(config, [r for r in after if not r.job.preemptible]), job)

    chosen: list[Running] = []
    after = list(running)
    for victim in candidates:
        chosen.append(victim)
        after = [r for r in after if r is not victim]
        if admits(after):
            return chosen
    return None
