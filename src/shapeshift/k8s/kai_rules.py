"""KAI-Scheduler's scheduling cycle: allocate, reclaim, preempt.

Sources, kai-scheduler/KAI-Scheduler v0.17.0-9 (commit d5bc503):

* docs/scheduling-deep-dive/README.md, "The Scheduling Cycle": Allocate (no evictions),
  then Reclaim (between queues), then Preempt (within a queue); "Reclaim": different
  queues, preemptible victims, the reclaimer below its fair share or deserved quota, the
  victim's queue above it (``kai_victims``).
* Queue order in Allocate follows pkg/scheduler/plugins/proportion/queue_order/queue_order.go
  on GPUs: queues within their fair share first, then those staying within deserved
  quota with their next job, then higher queue priority, then the smaller (allocated +
  next job) / fair share, then name; jobs within a queue by priority, then age.
* Fair shares: ``kai_fairshare`` (resource_division.go).

Capacity is counted per resource over the whole cluster (placement on nodes is the
engine's business).

``KaiState`` keeps what a cycle needs between cycles, so that a cycle costs what
changed rather than the number of jobs: the waiting jobs of each queue in groups of
jobs the cycle cannot tell apart (same request and priority), each group in job order,
so a queue's first job that fits is the first head among its groups that fits; the
running jobs, the allocation per queue (ancestors included) and the free capacity, kept
as jobs start and stop; and the fair shares, computed again only when the queues'
demand or the historical usage changed. ``run_cycle`` is the same cycle on lists.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right, insort
from collections.abc import Mapping, Sequence

from shapeshift.k8s.kai_config import UNLIMITED, KaiConfig
from shapeshift.k8s.kai_fairshare import fair_shares
from shapeshift.k8s.kai_jobs import (
    EPS,
    NON_PREEMPTIBLE,
    GroupKey,
    Job,
    Outcome,
    Running,
    add,
    fits,
    saturation,
    within_deserved,
    within_limits,
)
from shapeshift.k8s.kai_victims import preempt_victims, reclaim_victims

__all__ = ["NON_PREEMPTIBLE", "Job", "KaiState", "Outcome", "Running", "run_cycle"]


class KaiState:
    """The scheduler's view between cycles: waiting and running jobs and what they hold."""

    def __init__(self, config: KaiConfig, capacity: Mapping[str, float]):
        self.config = config
        self.capacity = dict(capacity)
        self.pending: dict[str, Job] = {}
        self._groups: dict[GroupKey, list[tuple[float, str]]] = {}  # (created, name) of the group's jobs, sorted
        self._queue_groups: dict[str, dict[GroupKey, None]] = {}  # leaf -> its non-empty groups
        self.running: dict[str, Running] = {}  # in the order they started
        self._seq: dict[str, int] = {}
        self._next_seq = 0
        #: per leaf queue, its preemptible running jobs in victim order (kai_victims.VictimKey)
        self.victims: dict[str, list[tuple[int, float, int, str]]] = {}
        self.victim_resources: dict[str, dict[str, int]] = {}
        self.alloc: dict[str, dict[str, float]] = {q: {} for q in config.queues}
        self.alloc_np: dict[str, dict[str, float]] = {q: {} for q in config.queues}
        self._count = dict.fromkeys(config.queues, 0)  # running jobs under each queue
        self._count_np = dict.fromkeys(config.queues, 0)
        self.free = dict(capacity)
        self._pending_demand: dict[str, dict[str, float]] = {}
        self._pending_count: dict[str, int] = {}
        self._shares: dict[str, dict[str, float]] | None = None
        self._shares_for: tuple | None = None

    # ------------------------------------------------------------ bookkeeping
    def add_pending(self, job: Job) -> None:
        if job.queue not in self.config.leaves:
            raise ValueError(f"job {job.name}: queue {job.queue!r} is not a leaf queue")
        self.pending[job.name] = job
        group = self._groups.get(job.group)
        if group is None:
            group = self._groups[job.group] = []
        insort(group, (job.created, job.name))  # arrivals come last: an append
        self._queue_groups.setdefault(job.queue, {})[job.group] = None
        add(self._pending_demand.setdefault(job.queue, {}), job.request)
        self._pending_count[job.queue] = self._pending_count.get(job.queue, 0) + 1

    def remove_pending(self, name: str) -> Job:
        job = self.pending.pop(name)
        group = self._groups[job.group]
        del group[bisect_left(group, (job.created, job.name))]
        if not group:
            del self._groups[job.group]
            del self._queue_groups[job.queue][job.group]
        left = self._pending_count[job.queue] - 1
        self._pending_count[job.queue] = left
        if left:
            add(self._pending_demand[job.queue], job.request, -1.0)
        else:
            del self._pending_demand[job.queue]
        return job

    def add_running(self, run: Running) -> None:
        job = run.job
        self.running[job.name] = run
        seq = self._seq[job.name] = self._next_seq
        self._next_seq += 1
        add(self.free, job.request, -1.0)
        for q in self.config.chains[job.queue]:
            add(self.alloc[q], job.request)
            self._count[q] += 1
            if not job.preemptible:
                add(self.alloc_np[q], job.request)
                self._count_np[q] += 1
        if job.preemptible:
            keys = self.victims.get(job.queue)
            if keys is None:
                keys = self.victims[job.queue] = []
            insort(keys, (job.priority, -run.started, seq, job.name))
            names = self.victim_resources.setdefault(job.queue, {})
            for r in job.request:
                names[r] = names.get(r, 0) + 1

    def remove_running(self, name: str) -> Running:
        run = self.running.pop(name)
        job = run.job
        seq = self._seq.pop(name)
        add(self.free, job.request)
        for q in self.config.chains[job.queue]:
            self._count[q] -= 1
            if self._count[q]:
                add(self.alloc[q], job.request, -1.0)
            else:
                self.alloc[q] = {}
            if not job.preemptible:
                self._count_np[q] -= 1
                if self._count_np[q]:
                    add(self.alloc_np[q], job.request, -1.0)
                else:
                    self.alloc_np[q] = {}
        if not self.running:
            self.free.clear()
            self.free.update(self.capacity)
        if job.preemptible:
            keys = self.victims[job.queue]
            del keys[bisect_left(keys, (job.priority, -run.started, seq, job.name))]
            if not keys:
                del self.victims[job.queue]
            names = self.victim_resources[job.queue]
            for r in job.request:
                names[r] -= 1
                if not names[r]:
                    del names[r]
        return run

    def demand(self) -> dict[str, dict[str, float]]:
        """Per leaf queue, what its running and waiting jobs request."""
        out: dict[str, dict[str, float]] = {}
        for q in self.config.leaves:
            held = self.alloc[q] if self._count[q] else None
            waiting = self._pending_demand.get(q)
            if held is None and waiting is None:
                continue
            total = dict(held) if held is not None else {}
            if waiting is not None:
                add(total, waiting)
            out[q] = total
        return out

    def fair_shares(self, usage: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, dict[str, float]]:
        demand = self.demand()
        key = (demand, usage)
        if self._shares is None or self._shares_for != key:
            self._shares = fair_shares(self.config, self.capacity, demand, usage)
            self._shares_for = key
        return self._shares

    # ------------------------------------------------------------------ cycle
    def cycle(self, now: float = 0.0, usage: Mapping[str, Mapping[str, float]] | None = None) -> Outcome:
        """One cycle: Allocate, then Reclaim, then Preempt, for the jobs that still wait.
        Started jobs run and evicted ones wait again when it returns."""
        shares = self.fair_shares(usage)
        out = Outcome(shares=shares)
        evicted: list[Job] = []
        self._allocate(now, shares, out)
        self._reclaim_and_preempt(now, shares, out, evicted)
        for job in evicted:
            self.add_pending(job)
        return out

    def _start(self, name: str, now: float, out: Outcome) -> None:
        self.add_running(Running(self.remove_pending(name), now))
        out.started.append(name)

    def _head(self, queue: str) -> tuple:
        """The job order key (-priority, created, name) of the queue's first waiting job."""
        return min((-g[2], *self._groups[g][0]) for g in self._queue_groups[queue])

    def _allocate(self, now: float, shares, out: Outcome) -> None:
        """The most starved queue's first job that fits, again and again."""
        config, alloc, alloc_np = self.config, self.alloc, self.alloc_np
        free = self.free
        while self.pending and any(v > EPS for v in free.values()):
            if not any(all(free.get(r, 0.0) + EPS >= v for r, v in g[1]) for g in self._groups):
                return  # no waiting job fits what is free
            order = []
            for q, groups in self._queue_groups.items():
                if not groups:
                    continue
                head = self.pending[self._head(q)[2]].request.get("gpu", 0.0)
                held, fair = alloc[q].get("gpu", 0.0), shares[q].get("gpu", 0.0)
                quota = config.queues[q].resource("gpu").quota
                starved = quota == UNLIMITED or held + head <= quota + EPS
                key = (held > fair + EPS, not starved, -config.queues[q].priority, saturation(held + head, fair), q)
                order.append(key)
            order.sort()
            for key in order:
                q = key[-1]
                best = None
                for g in self._queue_groups[q]:
                    created, name = self._groups[g][0]
                    job = self.pending[name]
                    if (
                        fits(self.free, job)
                        and within_limits(config, alloc, job)
                        and (job.preemptible or within_deserved(config, alloc_np, job))
                    ):
                        rank = (-g[2], created, name)
                        if best is None or rank < best:
                            best = rank
                if best is not None:
                    self._start(best[2], now, out)
                    break
            else:
                return

    def _reclaim_and_preempt(self, now: float, shares, out: Outcome, evicted: list[Job]) -> None:
        """The waiting jobs one at a time by priority and age: reclaim for it, else preempt.
        When a job finds no victims, neither do the later ones of its group until some
        job does (what they could take is the same), so its group sits out until then."""
        config = self.config
        groups = self._groups
        heap = [((-g[2], *jobs[0]), g) for g, jobs in groups.items()]
        heapq.heapify(heap)
        resting: list[GroupKey] = []
        while heap:
            rank, g = heapq.heappop(heap)
            job = self.pending[rank[2]]
            q = job.queue
            may_reclaim = all(
                self.alloc[q].get(r, 0.0) + v <= shares[q].get(r, 0.0) + EPS for r, v in job.request.items()
            )
            keys = self.victims.get(q)
            may_preempt = (keys[0][0] if keys else NON_PREEMPTIBLE) < job.priority
            victims = None
            if may_reclaim:
                victims = reclaim_victims(
                    config,
                    shares,
                    self.alloc,
                    self.alloc_np,
                    self.free,
                    self.victims,
                    self.victim_resources,
                    self.running,
                    job,
                )
            if victims is None and may_preempt:
                victims = preempt_victims(config, self.alloc, self.alloc_np, self.free, self.victims, self.running, job)
            if victims is None:
                resting.append(g)
                continue
            for v in victims:
                self.remove_running(v.job.name)
                evicted.append(v.job)
                out.evicted.append(v.job.name)
            self._start(job.name, now, out)
            resting.append(g)
            for g in resting:  # every group may try again, from the jobs after this one
                jobs = groups.get(g)
                if not jobs:
                    continue
                if -g[2] > rank[0]:
                    at = 0
                elif -g[2] < rank[0]:
                    continue
                else:
                    at = bisect_right(jobs, rank[1:])
                if at < len(jobs):
                    heapq.heappush(heap, ((-g[2], *jobs[at]), g))
            resting = []


def run_cycle(
    config: KaiConfig,
    capacity: Mapping[str, float],
    pending: Sequence[Job],
    running: Sequence[Running],
    *,
    now: float = 0.0,
    usage: Mapping[str, Mapping[str, float]] | None = None,
) -> Outcome:
    """One cycle over ``pending`` and ``running`` (in the order they started)."""
    state = KaiState(config, capacity)
    for job in pending:
        if job.queue not in config.leaves:
            raise ValueError(f"job {job.name}: queue {job.queue!r} is not a leaf queue")
    for run in running:
        state.add_running(run)
    for job in pending:
        state.add_pending(job)
    out = state.cycle(now, usage)
    out.running = list(state.running.values())
    return out
