"""``ClusterView``: what a policy may see when it decides.

The view is a thin read-only façade over the engine's live state, not a copy, so
building one costs nothing per event. Policies must not mutate what it returns;
to try placements they take ``scratch()``, a private copy of the free resources.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Protocol

import numpy as np

from shapeshift.engine.sharing import GpuLedger
from shapeshift.engine.state import FreeResources, JobStatus
from shapeshift.model import Allocation, ClusterSpec


class EngineState(Protocol):
    """What a view reads from the engine's live state (the engine satisfies it). Naming
    the state rather than the ``Engine`` keeps the view free of the engine module."""

    cluster: ClusterSpec
    partition_nodes: dict[str, np.ndarray]
    partition_gpus: dict[str, int]
    free: FreeResources
    jobs: dict[str, JobStatus]
    allocations: dict[str, Allocation]
    pending: dict[str, OrderedDict[str, None]]
    running: dict[str, dict[str, None]]
    sharing: GpuLedger | None


class ClusterView:
    """Read-only access to cluster and job state at ``now``."""

    __slots__ = ("_engine", "dirty_partitions", "finished", "now", "timer_fired", "touched")

    def __init__(
        self,
        engine: EngineState,
        now: float,
        dirty_partitions: frozenset[str],
        timer_fired: bool,
        finished: tuple[str, ...] = (),
        touched: tuple[str, ...] = (),
    ):
        self._engine = engine
        self.now = now
        #: Partitions where something happened since the last decision. A policy whose
        #: decision depends only on queue contents and free resources may skip the rest.
        self.dirty_partitions = dirty_partitions
        self.timer_fired = timer_fired
        #: Jobs that completed since the previous decision, in completion order: what
        #: history-based predictors learn from, without scanning every job.
        self.finished = finished
        #: Jobs whose progress state (allocation, rate, work done, pause) may have changed
        #: since the previous decision, in the order they changed: launched, moved,
        #: preempted and finished jobs, jobs whose GPU partners changed, jobs past a rate
        #: boundary, jobs whose progress a worker reported and jobs withdrawn from the
        #: queue (cancelled, failed for good). A running job not listed
        #: progresses exactly as it did at the previous decision, so a policy may keep
        #: its running jobs' facts between decisions and re-read only these.
        self.touched = touched

    @property
    def cluster(self) -> ClusterSpec:
        return self._engine.cluster

    @property
    def partitions(self) -> Mapping[str, np.ndarray]:
        """Node indexes per partition (``""`` is the unpartitioned pool)."""
        return self._engine.partition_nodes

    @property
    def allocations(self) -> Mapping[str, Allocation]:
        """Current allocation of every running job."""
        return MappingProxyType(self._engine.allocations)

    def pending(self, partition: str) -> Iterable[str]:
        """Waiting job ids of a partition, in the order they (re-)entered the queue."""
        return self._engine.pending[partition].keys()

    def running(self, partition: str) -> Iterable[str]:
        return self._engine.running[partition].keys()

    def pending_count(self, partition: str) -> int:
        return len(self._engine.pending[partition])

    def job(self, job_id: str) -> JobStatus:
        return self._engine.jobs[job_id]

    @property
    def sharing(self) -> GpuLedger | None:
        """Which jobs hold which GPU and their GPU memory, on clusters that let jobs share
        GPUs (``gpu_share_limit`` above 1); ``None`` elsewhere. Read-only."""
        return self._engine.sharing

    def free(self) -> FreeResources:
        """The engine's free resources. Read-only: use ``scratch()`` to plan."""
        return self._engine.free

    def scratch(self) -> FreeResources:
        return self._engine.free.copy()

    def free_gpus(self, partition: str) -> int:
        return self._engine.free.free_gpus_in(self._engine.partition_nodes[partition])

    def capacity_gpus(self, partition: str) -> int:
        return self._engine.partition_gpus[partition]

    def remaining(self, job_id: str) -> float:
        """Work units left (the executor's throughput model defines the unit)."""
        return self._engine.jobs[job_id].remaining_at(self.now)

    def attained(self, job_id: str) -> float:
        """GPU-seconds of service received so far."""
        return self._engine.jobs[job_id].attained_at(self.now)

    def expected_duration(self, job_id: str) -> float:
        """Run time at the requested resources, from the trace (oracle knowledge)."""
        return self._engine.jobs[job_id].expected_duration()
