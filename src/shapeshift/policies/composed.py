"""Blox-style schedulers built from three small parts.

``ComposedPolicy(admission, ordering, placement)`` decides each partition that changed:

1. *admission* chooses which waiting jobs may be considered at all;
2. *ordering* ranks them (and, when preemptive, the running jobs too);
3. *placement* finds nodes for each job in rank order.

Non-preemptive orderings place waiting jobs on what is free, with strict
head-of-line blocking unless backfilling. Preemptive orderings pick the highest-ranked
jobs that fit the partition's capacity, evict running jobs that lost their rank and
place the newcomers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, Schedule
from shapeshift.policies.base import EVENT_TRIGGERS
from shapeshift.policies.placement import Placement

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

    def admit(self, view: ClusterView, partition: str) -> Iterable[str]:
        return view.pending(partition)


class FifoOrdering:
    """Queue order (first come, first served); never preempts."""

    name = "fifo"
    preemptive = False

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        return jobs


ADMISSIONS: dict[str, Callable[[], Admission]] = {AcceptAll.name: AcceptAll}
ORDERINGS: dict[str, Callable[[], Ordering]] = {FifoOrdering.name: FifoOrdering}


def _where(view: ClusterView, partition: str) -> str:
    return f" in vc {partition}" if partition else ""


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

    def decide(self, view: ClusterView) -> Schedule:
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        scratch: FreeResources | None = None
        for partition in sorted(view.dirty_partitions):
            if view.pending_count(partition) == 0 and not self.ordering.preemptive:
                continue
            scratch = scratch if scratch is not None else view.scratch()
            if self.ordering.preemptive:
                self._decide_preemptive(view, partition, scratch, changes, reasons)
            else:
                self._decide_greedy(view, partition, scratch, changes, reasons)
        default = "waiting behind higher-priority jobs"
        return Schedule(base=view.allocations, changes=changes, reasons=reasons, default_reason=default)

    def _decide_greedy(
        self,
        view: ClusterView,
        partition: str,
        free: FreeResources,
        changes: dict[str, Allocation | None],
        reasons: dict[str, str],
    ) -> None:
        nodes = view.partitions[partition]
        free_gpus = int(free.gpus[nodes].sum())
        candidates = self.admission.admit(view, partition)
        for job_id in self.ordering.order(view, partition, candidates):
            spec = view.job(job_id).spec
            alloc = self.placement.find(spec, nodes, free) if spec.num_gpus <= free_gpus else None
            if alloc is not None:
                changes[job_id] = alloc
                free.take(alloc)
                free_gpus -= alloc.gpus
                continue
            reasons[job_id] = self._explain(view, partition, spec.num_gpus, free_gpus)
            if self.head_of_line_blocking or free_gpus == 0:
                break

    def _decide_preemptive(
        self,
        view: ClusterView,
        partition: str,
        free: FreeResources,
        changes: dict[str, Allocation | None],
        reasons: dict[str, str],
    ) -> None:
        nodes = view.partitions[partition]
        capacity = view.capacity_gpus(partition)
        running = set(view.running(partition))
        candidates = [*running, *self.admission.admit(view, partition)]
        chosen: list[str] = []
        for job_id in self.ordering.order(view, partition, candidates):
            gpus = view.job(job_id).spec.num_gpus
            if gpus <= capacity:
                chosen.append(job_id)
                capacity -= gpus
            elif job_id not in running:
                reasons[job_id] = (
                    f"needs {gpus} GPUs{_where(view, partition)}, {capacity} left after higher-priority jobs"
                )
        keep = set(chosen)
        current = view.allocations
        for job_id in running - keep:
            changes[job_id] = None
            free.give(current[job_id])
        free_gpus = int(free.gpus[nodes].sum())
        for job_id in chosen:
            if job_id in running:
                continue
            spec = view.job(job_id).spec
            alloc = self.placement.find(spec, nodes, free)
            if alloc is None:
                reasons[job_id] = self._explain(view, partition, spec.num_gpus, free_gpus)
                continue
            changes[job_id] = alloc
            free.take(alloc)
            free_gpus -= alloc.gpus

    def _explain(self, view: ClusterView, partition: str, gpus: int, free_gpus: int) -> str:
        if gpus <= free_gpus:
            return (
                f"needs {gpus} GPUs{_where(view, partition)}: {free_gpus} free but fragmented ({self.placement.name})"
            )
        return f"needs {gpus} GPUs{_where(view, partition)}, {free_gpus} free"
