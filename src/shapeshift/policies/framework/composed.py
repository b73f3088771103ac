"""Blox-style schedulers built from three small parts.

``ComposedPolicy(admission, ordering, placement)`` decides each partition that changed:

1. *admission* chooses which waiting jobs may be considered at all;
2. *ordering* ranks them (and, when preemptive, the running jobs too);
3. *placement* finds nodes for each job in rank order.

Non-preemptive orderings place waiting jobs on what is free, with strict
head-of-line blocking unless backfilling. Preemptive orderings pick the highest-ranked
jobs that fit the partition's capacity and place the newcomers, evicting running jobs
that lost their rank only as far as a newcomer needs their GPUs: the lowest-ranked go
first, and a running job whose eviction would not let any newcomer start (fragmentation)
keeps running.

Orderings whose key for a *waiting* job never changes while it waits (SJF, SRTF, LAS)
can say so (``traits = PartTraits(static_keys=True)`` plus a ``key(view, job_id)``
method); with an
admission that admits every waiting job, the waiting jobs are then kept in an
incremental heap per partition (``StaticKeyQueue``) instead of being re-sorted at every
event. Both paths give the same decisions.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, Schedule
from shapeshift.policies.framework.base import EVENT_TRIGGERS, ROUND, PartTraits, PolicyTraits, Prepares, part_traits
from shapeshift.policies.framework.decisions import NOTHING, PartitionDecision, decide_partitions
from shapeshift.policies.framework.evictions import Evictions
from shapeshift.policies.framework.placement import Placement, SurelyFails
from shapeshift.policies.framework.queues import ShapeQueue, StaticKeyQueue
from shapeshift.wording import count

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


class Admission(Protocol):
    name: str

    def admit(self, view: ClusterView, partition: str) -> Iterable[str]:
        """The waiting jobs of ``partition`` that may be scheduled now."""
        ...


class Ordering(Protocol):
    name: str
    #: Preemptive orderings rank running jobs too and may evict them.
    preemptive: bool

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        """``jobs`` in scheduling priority order, best first."""
        ...


class AcceptAll:
    """Every waiting job is considered."""

    name = "accept-all"
    #: Admits every waiting job, in queue order, reading only the partition asked about.
    traits = PartTraits(partition_local=True, admits_all=True)

    def admit(self, view: ClusterView, partition: str) -> Iterable[str]:
        return view.pending(partition)


class FifoOrdering:
    """Queue order (first come, first served); never preempts."""

    name = "fifo"
    preemptive = False
    traits = PartTraits(partition_local=True)

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        return jobs


ADMISSIONS: dict[str, Callable[[], Admission]] = {AcceptAll.name: AcceptAll}
ORDERINGS: dict[str, Callable[[], Ordering]] = {FifoOrdering.name: FifoOrdering}


def _where(view: ClusterView, partition: str) -> str:
    return f" in vc {partition}" if partition else ""


#: Why a waiting job that no step explained waits.
_WAITING = "waiting behind higher-priority jobs"


def left_behind(gpus: int, where: str, left: int) -> str:
    """Why a waiting job was passed over in a preemptive walk: ``left`` GPUs remained."""
    return f"needs {count(gpus, 'GPU')}{where}, {left} left after higher-priority jobs"


@dataclass
class ComposedPolicy:
    name: str
    admission: Admission
    ordering: Ordering
    placement: Placement
    #: Non-preemptive only: stop at the first waiting job that does not fit.
    head_of_line_blocking: bool = True
    triggers: frozenset[str] = field(default=EVENT_TRIGGERS)
    default_round: float | None = None
    #: Preemptive only: a running job cannot be evicted before it has run this many seconds
    #: uninterrupted (a lease; Blox's round). The policy asks to decide again when the
    #: first lease that kept a newcomer waiting runs out.
    lease: float = 0.0

    def __post_init__(self) -> None:
        self._queues: dict[str, StaticKeyQueue] | None = None
        self._shapes: dict[str, ShapeQueue] | None = None
        #: partition -> when the first lease keeping one of its newcomers waiting ends. A
        #: partition's request stands until its next decision: a decision elsewhere must
        #: not drop it (the schedule's wake-up is one instant for the whole cluster).
        self._wakes: dict[str, float] = {}
        self._prepare = self.ordering.prepare if isinstance(self.ordering, Prepares) else None
        self._ordering_traits = part_traits(self.ordering)
        #: The admission part whose traits ``_admission_traits`` holds (``auto`` may swap
        #: the part; asking a protocol costs far more than a decision can afford).
        self._traits_of_admission: tuple[Admission, PartTraits] | None = None
        if self._ordering_traits.static_keys and self._admission_traits().admits_all:
            self._queues = {}
        placement = self.placement
        self._cannot_fit = placement.cannot_fit if isinstance(placement, SurelyFails) else None

    @property
    def traits(self) -> PolicyTraits:
        """The lease, and whether the run can be simulated one partition at a time
        (``shapeshift.runs.parallel``): the parts read only the partition they are asked
        about, and the cluster-wide timers change nothing where they were not due. Rounds
        never do (a round in a partition with no job decides nothing). A lease's wake-up
        decides every partition at an instant of its own, unless it falls on a round
        instant: with decisions at rounds only and a lease of whole rounds, every job
        starts on a round instant and its lease ends on one."""
        local = part_traits(self.ordering).partition_local and part_traits(self.admission).partition_local
        if local and self.lease != 0:
            rounds = self.default_round
            local = self.triggers == frozenset({ROUND}) and rounds is not None and (self.lease / rounds).is_integer()
        return PolicyTraits(partition_local=local, lease=self.lease)

    def decide(self, view: ClusterView) -> Schedule:
        if self._prepare is not None:
            self._prepare(view)
        dirty = view.dirty_partitions
        if len(dirty) != 1:
            scratch: list[FreeResources] = []  # one copy of the free resources, made when first needed
            return decide_partitions(
                view, lambda partition: self._decide_partition(view, partition, scratch), _WAITING, self._first_wake
            )
        # One partition (most decisions, once per event): the step of ``_decide_partition``
        # taken here, its result the schedule's, as ``decide_partitions`` would give, without
        # the calls per partition that cost a tenth of a decision.
        (partition,) = dirty
        wakes = self._wakes
        if wakes:
            wakes.pop(partition, None)
        preemptive = self.ordering.preemptive
        if view.pending_count(partition) == 0 and (not preemptive or not view.running(partition)):
            return Schedule(view.allocations, {}, {}, _WAITING, min(wakes.values()) if wakes else None)
        if preemptive:
            decision = self._decide_preemptive(view, partition, view.scratch())
        else:
            decision = self._decide_greedy(view, partition, view.scratch())
        wake = min(wakes.values()) if wakes else None
        return Schedule(view.allocations, decision.changes, decision.reasons, _WAITING, wake)

    def _decide_partition(self, view: ClusterView, partition: str, scratch: list[FreeResources]) -> PartitionDecision:
        """One partition's step; ``scratch`` holds the one copy of the free resources that
        every partition of the decision shares, made when first needed."""
        if self._wakes:
            self._wakes.pop(partition, None)
        preemptive = self.ordering.preemptive
        if view.pending_count(partition) == 0 and (not preemptive or not view.running(partition)):
            return NOTHING  # nothing waits, or nothing at all: no decision can change anything
        if not scratch:
            scratch.append(view.scratch())
        if preemptive:
            return self._decide_preemptive(view, partition, scratch[0])
        return self._decide_greedy(view, partition, scratch[0])

    def _first_wake(self) -> float | None:
        """When the first lease keeping a newcomer waiting runs out, in any partition."""
        return min(self._wakes.values()) if self._wakes else None

    def _admission_traits(self) -> PartTraits:
        known = self._traits_of_admission
        if known is None or known[0] is not self.admission:
            known = self._traits_of_admission = (self.admission, part_traits(self.admission))
        return known[1]

    def _queue(self, view: ClusterView, partition: str) -> StaticKeyQueue | None:
        """The partition's incremental waiting queue, synced; ``None`` when not in use."""
        if self._queues is None:
            return None
        queue = self._queues.get(partition)
        if queue is None:
            queue = self._queues[partition] = StaticKeyQueue(partition, self.ordering.key)  # type: ignore[attr-defined]
        queue.sync(view)
        return queue

    def _shape_queue(self, view: ClusterView, partition: str) -> ShapeQueue | None:
        """The partition's waiting jobs grouped by shape, synced, for backfill (every waiting
        job admitted, ranked in queue order or by a static key); ``None`` when not in use."""
        if self.head_of_line_blocking or not self._admission_traits().admits_all:
            return None
        static = self._ordering_traits.static_keys
        if not static and not isinstance(self.ordering, FifoOrdering):
            return None
        if self._shapes is None:
            self._shapes = {}
        shapes = self._shapes.get(partition)
        if shapes is None:
            key = self.ordering.key if static else None  # type: ignore[attr-defined]
            shapes = self._shapes[partition] = ShapeQueue(partition, key)
        shapes.sync(view)
        return shapes

    def _decide_greedy(self, view: ClusterView, partition: str, free: FreeResources) -> PartitionDecision:
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        nodes = view.partitions[partition]
        free_gpus = free.free_gpus_in(nodes)
        shapes = self._shape_queue(view, partition)
        if shapes is not None:

            def try_start(job_id: str) -> bool:
                spec = view.job(job_id).spec
                alloc = self.placement.find(spec, nodes, free)
                if alloc is None:
                    reasons[job_id] = self._explain(view, partition, spec.num_gpus, free.free_gpus_in(nodes))
                    return False
                changes[job_id] = alloc
                free.take(alloc)
                return True

            if shapes.backfill(view, free_gpus, try_start):
                return PartitionDecision(changes, reasons)
        queue = self._queue(view, partition)
        if queue is not None:
            ranked: Iterable[str] = (job_id for _, job_id in queue.iterate(view))
        else:
            ranked = self.ordering.order(view, partition, self.admission.admit(view, partition))
        for job_id in ranked:
            spec = view.job(job_id).spec
            # A fraction of a GPU may join a GPU in use: idle GPUs do not bound it.
            shared = spec.gpu_milli > 0 and free.milli is not None
            alloc = self.placement.find(spec, nodes, free) if spec.num_gpus <= free_gpus or shared else None
            if alloc is not None:
                changes[job_id] = alloc
                free.take(alloc)
                free_gpus = free_gpus - alloc.gpus if alloc.gpu_milli is None else free.free_gpus_in(nodes)
                continue
            reasons[job_id] = self._explain(view, partition, spec.num_gpus, free_gpus)
            if self.head_of_line_blocking or (free_gpus == 0 and free.milli is None):
                break
        return PartitionDecision(changes, reasons)

    def _decide_preemptive(self, view: ClusterView, partition: str, free: FreeResources) -> PartitionDecision:
        queue = self._queue(view, partition)
        if self._waiting_fit_free(view, partition, free):
            ranked_waiting = (
                (j for _, j in queue.iterate(view))
                if queue is not None
                else self.ordering.order(view, partition, self.admission.admit(view, partition))
            )
            return self._place_waiting(view, partition, free, ranked_waiting)
        capacity = view.capacity_gpus(partition)
        running = set(view.running(partition))
        if queue is not None:
            key = self.ordering.key  # type: ignore[attr-defined]
            by_rank = sorted((key(view, j), j) for j in running)
            # Waiting jobs wider than the GPUs left are skipped unseen (they could only get
            # a reason); ``capacity`` is read as the walk goes.
            waiting = queue.iterate(view, lambda: capacity)
            ranked: Iterable[str] = (j for _, j in heapq.merge(by_rank, waiting))
            running_by_rank = [j for _, j in by_rank]
        else:
            ranked = list(self.ordering.order(view, partition, [*running, *self.admission.admit(view, partition)]))
            running_by_rank = [j for j in ranked if j in running]
        chosen: list[str] = []
        reasons: dict[str, str] = {}
        for job_id in ranked:
            gpus = view.job(job_id).spec.num_gpus
            if gpus <= capacity:
                chosen.append(job_id)
                capacity -= gpus
            elif job_id not in running:
                reasons[job_id] = left_behind(gpus, _where(view, partition), capacity)
            if capacity == 0 and queue is not None:
                break  # nothing else fits; running jobs not chosen yet rank lower
        placed = self._place_preemptive(view, partition, free, chosen, running, running_by_rank)
        return PartitionDecision(reasons=reasons).then(placed)

    @staticmethod
    def _waiting_fit_free(view: ClusterView, partition: str, free: FreeResources) -> bool:
        """Whether the partition's waiting jobs together need no more GPUs than are free.

        Then every job, running or waiting, is within the partition's capacity: all are
        chosen, no running job is a victim, and the preemptive decision is exactly a
        placement of the waiting jobs in rank order (``_place_waiting``), without ranking
        the running jobs. The sum stops as soon as it passes the free GPUs, so the check
        costs O(1) when the queue is long and O(queue) when it is short."""
        left = free.free_gpus_in(view.partitions[partition])
        jobs = view.job
        for job_id in view.pending(partition):
            left -= jobs(job_id).spec.num_gpus
            if left < 0:
                return False
        return True

    def _place_waiting(
        self,
        view: ClusterView,
        partition: str,
        free: FreeResources,
        ranked: Iterable[str],
    ) -> PartitionDecision:
        """Place ``ranked`` waiting jobs in order on what is free, skipping (never
        blocking on) a job that does not fit: what ``_place_preemptive`` does when no
        running job is a victim."""
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        nodes = view.partitions[partition]
        for job_id in ranked:
            spec = view.job(job_id).spec
            alloc = self.placement.find(spec, nodes, free)
            if alloc is None:
                reasons[job_id] = self._explain(view, partition, spec.num_gpus, free.free_gpus_in(nodes))
                continue
            changes[job_id] = alloc
            free.take(alloc)
        return PartitionDecision(changes, reasons)

    def _place_preemptive(
        self,
        view: ClusterView,
        partition: str,
        free: FreeResources,
        chosen: list[str],
        running: set[str],
        running_by_rank: list[str],
    ) -> PartitionDecision:
        """Place the chosen newcomers, evicting lower-ranked running jobs only as needed.

        Running jobs that were not chosen are eviction candidates, worst-ranked first
        (with a lease, only those whose lease has run out)."""
        keep = set(chosen)
        victims = [j for j in reversed(running_by_rank) if j not in keep]
        first_lease: float | None = None
        if self.lease > 0:
            expiry = {j: view.job(j).started_at + self.lease for j in victims}
            leased = [t for t in expiry.values() if t > view.now]
            victims = [j for j in victims if expiry[j] <= view.now]
            first_lease = min(leased) if leased else None
        newcomers = [j for j in chosen if j not in running]
        return self._place_newcomers(view, partition, free, newcomers, victims, first_lease)

    def _place_newcomers(
        self,
        view: ClusterView,
        partition: str,
        free: FreeResources,
        newcomers: list[str],
        victims: Sequence[str],
        first_lease: float | None,
    ) -> PartitionDecision:
        """Place ``newcomers`` in order. One that does not fit evicts ``victims`` (worst
        first) one at a time until it does; a victim evicted for a newcomer that still
        could not be placed is restored at the end if its allocation is still free.
        ``first_lease``: when the first lease keeping another running job ends (a
        newcomer left waiting asks to decide again then). A placement is tried only when
        it could succeed (``Evictions.ready_for``)."""
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        nodes = view.partitions[partition]
        evictions = Evictions(
            free,
            nodes,
            view.allocations,
            changes,
            whole_gpus=view.sharing is None,
            cannot_fit=self._cannot_fit,
        )
        next_victim = 0
        for job_id in newcomers:
            spec = view.job(job_id).spec
            alloc = self.placement.find(spec, nodes, free) if evictions.ready_for(spec.num_gpus) else None
            while alloc is None and next_victim < len(victims):
                evictions.evict(victims[next_victim])
                next_victim += 1
                if evictions.ready_for(spec.num_gpus):
                    alloc = self.placement.find(spec, nodes, free)
            if alloc is None:
                reasons[job_id] = self._explain(view, partition, spec.num_gpus, evictions.free_count())
                if first_lease is not None:  # decide again when the first lease in the way runs out
                    self._wake_when_lease_ends(partition, first_lease)
                    reasons[job_id] += f"; running jobs hold their GPUs until their lease ends ({first_lease:g} s)"
                continue
            changes[job_id] = alloc
            free.take(alloc)
            evictions.took(alloc)
        evictions.restore()
        return PartitionDecision(changes, reasons)

    def _wake_when_lease_ends(self, partition: str, first_lease: float) -> None:
        """``partition`` asks to decide again at ``first_lease`` (a newcomer waits for it)."""
        wake = self._wakes.get(partition)
        self._wakes[partition] = first_lease if wake is None else min(wake, first_lease)

    def _explain(self, view: ClusterView, partition: str, gpus: int, free_gpus: int) -> str:
        if gpus <= free_gpus:
            where = _where(view, partition)
            return f"needs {count(gpus, 'GPU')}{where}: {free_gpus} free but fragmented ({self.placement.name})"
        return f"needs {count(gpus, 'GPU')}{_where(view, partition)}, {free_gpus} free"
