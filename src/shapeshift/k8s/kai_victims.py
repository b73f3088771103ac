"""Whom KAI-Scheduler evicts for a waiting job: reclaim (from other queues) and preempt
(within the job's queue).

Sources, kai-scheduler/KAI-Scheduler v0.17.0-9 (commit d5bc503):

* pkg/scheduler/plugins/proportion/reclaimable/reclaimable.go and strategies/strategies.go:
  a reclaimer's queue may reclaim when its allocation plus the job stays within its fair
  share; each victim's queue must keep more than its fair share (``MaintainFairShare``)
  or, with the reclaimer within deserved quota, more than its deserved quota
  (``GuaranteeDeservedQuota``); afterwards, at every level, the reclaimer's saturation
  (allocated / fair share) times ``reclaimerUtilizationMultiplier`` must stay below each
  sibling's when above 1.
* docs/scheduling-deep-dive/README.md "Preempt": same queue, a preemptible victim of
  strictly lower priority; docs/priority/README.md: victims are taken until the job fits
  the free capacity *and* its queue's limits (a queue limited to 1 GPU whose ``train``
  pod is preempted for a ``build`` pod).

Both searches read the cycle's live state rather than recounting the running jobs: the
allocation per queue (``alloc``, ancestors included; ``alloc_np`` for non-preemptible
jobs), the free capacity, and per leaf queue its preemptible running jobs in victim
order (lowest priority, then newest, then the order they started in).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence

from shapeshift.k8s.kai_config import UNLIMITED, KaiConfig
from shapeshift.k8s.kai_jobs import EPS, Job, Running, add, fits, leveled, saturation, within_deserved, within_limits

Amounts = Mapping[str, Mapping[str, float]]
#: A preemptible running job as victims are ordered within its queue:
#: (priority, -started, start sequence, name).
VictimKey = tuple[int, float, int, str]


def reclaim_victims(
    config: KaiConfig,
    shares: Amounts,
    alloc: Amounts,
    alloc_np: Amounts,
    free: Mapping[str, float],
    victims: Mapping[str, Sequence[VictimKey]],
    resources: Mapping[str, Mapping[str, int]],
    running: Mapping[str, Running],
    job: Job,
) -> list[Running] | None:
    """Running jobs of other queues whose eviction lets ``job`` start, or None.

    Candidates come queue by queue in the source's order (most saturated queue first,
    then lowest priority, newest); ``victims`` holds each leaf queue's in that order and
    ``resources`` the resources they request. A queue whose level (its ancestor beside the
    reclaimer's) keeps no resource above its fair share or deserved quota yields no
    victim for the rest of the search (what it keeps only shrinks), so it is dropped
    whole rather than walked job by job."""
    if not within_limits(config, alloc, job):
        return None
    mine = job.queue
    for r, v in job.request.items():
        if alloc[mine].get(r, 0.0) + v > shares[mine].get(r, 0.0) + EPS:
            return None
    if not job.preemptible and not within_deserved(config, alloc_np, job):
        return None
    own = config.queues[mine].resource
    within_deserved_quota = all(
        own(r).quota == UNLIMITED or alloc[mine].get(r, 0.0) + v <= own(r).quota + EPS for r, v in job.request.items()
    )
    heap: list[tuple[float, int, float, int, str, str]] = []
    walks: dict[str, Iterator[VictimKey]] = {}
    for q, keys in victims.items():
        if q == mine or not keys:
            continue
        walk = iter(keys)
        first = next(walk)
        walks[q] = walk
        heap.append((-saturation(alloc[q].get("gpu", 0.0), shares[q].get("gpu", 0.0)), *first, q))
    heapq.heapify(heap)
    changed: dict[str, dict[str, float]] = {}  # queues' allocation after the chosen victims

    def remaining(q: str) -> Mapping[str, float]:
        return changed.get(q, alloc[q])

    def keeps_more(level: str, names) -> bool:
        rem = remaining(level)
        fair = shares[level]
        if any(rem.get(r, 0.0) > fair.get(r, 0.0) + EPS for r in names):
            return True
        if not within_deserved_quota:
            return False
        quota = config.queues[level].resource
        return any(quota(r).quota != UNLIMITED and rem.get(r, 0.0) > quota(r).quota + EPS for r in names)

    chosen: list[Running] = []
    freed = dict(free)
    levels: dict[str, str] = {}
    while heap:
        if fits(freed, job):
            break
        neg_sat, *_, name, q = heapq.heappop(heap)
        level = levels.get(q)
        if level is None:
            level = levels[q] = leveled(config, mine, q)[1]
        if not keeps_more(level, resources[q]):
            continue  # nothing more from this queue
        victim = running[name]
        if keeps_more(level, victim.job.request):
            chosen.append(victim)
            add(freed, victim.job.request)
            for a in config.chains[q]:
                rem = changed.get(a)
                if rem is None:
                    rem = changed[a] = dict(alloc[a])
                add(rem, victim.job.request, -1.0)
        following = next(walks[q], None)
        if following is not None:
            heapq.heappush(heap, (neg_sat, *following, q))
    if not chosen or not fits(freed, job):
        return None
    # the reclaimer must stay less saturated than each sibling it took from, at every level
    multiplier = config.fairness.reclaimer_utilization_multiplier
    for q in config.chains[mine]:
        after = dict(remaining(q))
        add(after, job.request)
        for sib in config.children(config.queues[q].parent):
            if sib == q or remaining(sib) == alloc[sib]:
                continue
            for r in job.request:
                ratio = saturation(after.get(r, 0.0), shares[q].get(r, 0.0))
                theirs = saturation(remaining(sib).get(r, 0.0), shares[sib].get(r, 0.0))
                if ratio > 1 and shares[sib].get(r, 0.0) > 0 and ratio * multiplier >= theirs:
                    return None
    return chosen


def preempt_victims(
    config: KaiConfig,
    alloc: Amounts,
    alloc_np: Amounts,
    free: Mapping[str, float],
    victims: Mapping[str, Sequence[VictimKey]],
    running: Mapping[str, Running],
    job: Job,
) -> list[Running] | None:
    """Victims in the job's own queue, lowest priority then newest first, until the job
    fits the free capacity and its queue's limits. Victims are preemptible, so the
    queue's non-preemptible allocation, which a non-preemptible job must keep within its
    deserved quota, is the same before and after."""
    if not job.preemptible and not within_deserved(config, alloc_np, job):
        return None
    chain = config.chains[job.queue]
    rem = {q: dict(alloc[q]) for q in chain}
    freed = dict(free)
    chosen: list[Running] = []
    for key in victims.get(job.queue, ()):
        if key[0] >= job.priority:
            break
        victim = running[key[3]]
        chosen.append(victim)
        add(freed, victim.job.request)
        for q in chain:
            add(rem[q], victim.job.request, -1.0)
        if fits(freed, job) and within_limits(config, rem, job):
            return chosen
    return None
