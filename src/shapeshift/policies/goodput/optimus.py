"""``optimus``: elastic GPU allocation by greedy marginal gain.

Optimus (Peng et al., "Optimus: An Efficient Dynamic Resource Scheduler for Deep
Learning Clusters", EuroSys 2018) sizes jobs instead of queueing them at a fixed size.
Every admitted job first gets one GPU (oldest first while GPUs last); then, one GPU at
a time, the next GPU goes to the job whose estimated remaining time drops the most:

    gain(j) = W_j * S_j(r_j) * (1 / S_j(g_j) - 1 / S_j(g_j + 1))

where ``W_j`` is the job's remaining work (seconds at its requested ``r_j`` GPUs),
``g_j`` its current tentative GPU count and ``S_j(g)`` its throughput scaling curve
relative to one GPU: the model catalog's curve when the model is catalogued, else
linear with ``efficiency`` (``S(g) = 1 + efficiency * (g - 1)``). A job grows to at most
``max_factor`` x its request (default 1: shrink under load, never past the request).
Optimus fits ``S`` online from training progress; the catalog curve stands in for that fit.

The full re-allocation runs every round (default 600 s, as Optimus's scheduling
interval): jobs whose GPU count changes are resized (a reconfiguration: the engine
charges the restore penalty and counts it), shrinking in place and growing with
consolidated placement. Between rounds, arrivals and completions only share the free
GPUs among waiting jobs by the same greedy rule; running jobs are left alone. The
simulated executor scales a job's progress by its throughput at the allocated count
(``TraceSpeedModel``: catalog curve, or its own configurable efficiency).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation
from shapeshift.perf.throughput import job_speedup
from shapeshift.policies.framework.decisions import NOTHING, PartitionDecision
from shapeshift.policies.framework.placement import Consolidated, allocation_for
from shapeshift.policies.framework.queues import StaticKeyQueue
from shapeshift.policies.framework.registry import PolicyParams, register
from shapeshift.policies.framework.rounds import RoundOrFillPolicy
from shapeshift.workloads.catalog import lookup

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


def _submitted(view: ClusterView, job_id: str) -> float:
    return view.job(job_id).spec.submit_time


class OptimusPolicy(RoundOrFillPolicy):
    name = "optimus"
    waiting_reason = "no GPU left"

    def __init__(self, efficiency: float, max_factor: float, round_seconds: float):
        super().__init__(round_seconds)
        self.efficiency = efficiency
        self.max_factor = max_factor
        self._placement = Consolidated()
        #: Per partition, the waiting jobs by (submission, id), kept incrementally: a
        #: decision reads only the few at the head that can get a GPU.
        self._waiting: dict[str, StaticKeyQueue] = {}
        self._speedups: dict[tuple[str, int], float] = {}

    # ------------------------------------------------------------ allocation
    def speedup(self, model: str, gpus: int) -> float:
        """``S(gpus)`` of the model (fixed per model and count: looked up once)."""
        known = self._speedups.get((model, gpus))
        if known is None:
            known = self._speedups[(model, gpus)] = job_speedup(lookup(model), gpus, self.efficiency)
        return known

    def max_gpus(self, requested: int, capacity: int) -> int:
        return max(1, min(capacity, math.ceil(self.max_factor * max(requested, 1))))

    def targets(self, view: ClusterView, jobs: list[str], pool: int, capacity: int) -> dict[str, int]:
        """GPU count per job: one each (in the given order) while GPUs last, then greedy by gain."""
        target: dict[str, int] = {}
        for job_id in jobs:
            if pool == 0:
                break
            target[job_id] = 1
            pool -= 1
        heap: list[tuple[float, float, str]] = []

        def push(job_id: str) -> None:
            spec = view.job(job_id).spec
            g = target[job_id]
            if g >= self.max_gpus(spec.num_gpus, capacity):
                return
            work = view.remaining(job_id) * self.speedup(spec.model, max(spec.num_gpus, 1))
            gain = work * (1.0 / self.speedup(spec.model, g) - 1.0 / self.speedup(spec.model, g + 1))
            heapq.heappush(heap, (-gain, spec.submit_time, job_id))

        for job_id in target:
            push(job_id)
        while pool > 0 and heap:
            _, _, job_id = heapq.heappop(heap)
            target[job_id] += 1
            pool -= 1
            push(job_id)
        return target

    # ------------------------------------------------------------- placement
    def _resize_in_place(self, view: ClusterView, job_id: str, gpus: int, free: FreeResources) -> Allocation:
        """Keep ``gpus`` of the job's current GPUs, dropping them from its smallest shares first."""
        current = view.allocations[job_id]
        shares = sorted(((r.gpus, n) for n, r in current.placement), reverse=True)
        keep: dict[int, int] = {}
        need = gpus
        for count, node in shares:
            if need == 0:
                break
            take = min(count, need)
            keep[node] = take
            need -= take
        alloc = allocation_for(view.job(job_id).spec, dict(sorted(keep.items())), free)
        assert alloc is not None  # the job's own freed resources cover it
        return alloc

    def _place(
        self, view: ClusterView, job_id: str, gpus: int, nodes: np.ndarray, free: FreeResources
    ) -> Allocation | None:
        spec = dataclasses.replace(view.job(job_id).spec, num_gpus=gpus, plan=None)
        return self._placement.find(spec, nodes, free)

    def _order(self, view: ClusterView, jobs: list[str]) -> list[str]:
        return sorted(jobs, key=lambda j: (view.job(j).spec.submit_time, j))

    def _oldest_waiting(self, view: ClusterView, partition: str, count: int) -> list[str]:
        """The ``count`` oldest waiting jobs (by submission, then id): the only ones that
        can get a GPU when every job in age order gets one first and ``count`` GPUs are
        left for the waiting ones. Read off an incremental queue, not a sort of the queue."""
        queue = self._waiting.get(partition)
        if queue is None:
            queue = self._waiting[partition] = StaticKeyQueue(partition, _submitted)
        queue.sync(view)
        return [job_id for _, job_id in itertools.islice(queue.iterate(view), max(count, 0))]

    def plan_round(self, view: ClusterView, partition: str, free: FreeResources) -> PartitionDecision:
        changes: dict[str, Allocation | None] = {}
        nodes = view.partitions[partition]
        capacity = view.capacity_gpus(partition)
        running = self._order(view, list(view.running(partition)))
        waiting = self._oldest_waiting(view, partition, capacity - len(running))
        target = self.targets(view, [*running, *waiting], capacity, capacity)
        current = view.allocations
        growing: list[str] = []
        for job_id in running:  # shrink and stop first, so growth finds the GPUs
            want, have = target.get(job_id, 0), current[job_id].gpus
            if want == 0:
                free.give(current[job_id])
                changes[job_id] = None
            elif want < have:
                free.give(current[job_id])
                alloc = self._resize_in_place(view, job_id, want, free)
                free.take(alloc)
                changes[job_id] = alloc
            elif want > have:
                growing.append(job_id)
        for job_id in growing:
            old = current[job_id]
            free.give(old)
            alloc = self._place(view, job_id, target[job_id], nodes, free) or old
            free.take(alloc)
            if alloc is not old:
                changes[job_id] = alloc
        return PartitionDecision(changes).then(
            self._start(view, [j for j in waiting if j in target], target, nodes, free)
        )

    def fill_free(self, view: ClusterView, partition: str, free: FreeResources) -> PartitionDecision:
        nodes = view.partitions[partition]
        pool = free.free_gpus_in(nodes)
        if pool == 0:
            return NOTHING
        waiting = self._oldest_waiting(view, partition, pool)
        target = self.targets(view, waiting, pool, view.capacity_gpus(partition))
        return self._start(view, [j for j in waiting if j in target], target, nodes, free)

    def _start(
        self,
        view: ClusterView,
        jobs: list[str],
        target: dict[str, int],
        nodes: np.ndarray,
        free: FreeResources,
    ) -> PartitionDecision:
        """Start ``jobs`` with their target GPUs, or fewer where the target is fragmented."""
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        for job_id in jobs:
            for gpus in range(target[job_id], 0, -1):  # fragmentation: settle for fewer
                alloc = self._place(view, job_id, gpus, nodes, free)
                if alloc is not None:
                    changes[job_id] = alloc
                    free.take(alloc)
                    break
            else:
                reasons[job_id] = "no placement for even one GPU"
        return PartitionDecision(changes, reasons)


class OptimusParams(PolicyParams):
    efficiency: float = Field(1.0, gt=0, le=1)
    #: 1.0 keeps every job at or below its request (the trace's duration stays a lower
    #: bound on JCT); larger values let jobs grow past what they asked for.
    max_factor: float = Field(1.0, ge=1)
    round: float = Field(600.0, gt=0)


@register(
    "optimus",
    "Elastic: every job starts at 1 GPU, each next GPU goes to the job whose remaining time drops most.",
    OptimusParams,
)
def make_optimus(params: OptimusParams) -> OptimusPolicy:
    return OptimusPolicy(params.efficiency, params.max_factor, params.round)
