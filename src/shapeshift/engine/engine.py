"""The clock-agnostic scheduling engine.

The engine keeps the cluster's actual state, asks the policy for the desired state
when something changed, and reconciles the two into launch / stop / reconfigure
actions on an executor. It is driven from outside with explicit timestamps
(``submit``, ``complete``, ``step``), so it neither knows nor cares whether time is
simulated or read from a wall clock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from shapeshift.engine.batching import rebatch_only
from shapeshift.engine.contract import (
    ARRIVAL,
    COMPLETION,
    Policy,
    PolicyError,
    PreemptKind,
    TracksSharing,
    traits_of,
)
from shapeshift.engine.executor import Executor
from shapeshift.engine.overheads import Overheads
from shapeshift.engine.sharing import GpuLedger, never_fits_shaped
from shapeshift.engine.state import FreeResources, JobState, JobStatus
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, ClusterSpec, JobSpec, Schedule
from shapeshift.wording import count


@dataclass(frozen=True)
class Rejection:
    job_id: str
    reason: str


class Engine:
    """Actual state + policy + executor. One instance per run."""

    def __init__(
        self,
        cluster: ClusterSpec,
        policy: Policy,
        executor: Executor,
        overheads: Overheads | None = None,
        on_decision: Callable[[float, Schedule], None] | None = None,
    ):
        self.cluster = cluster
        self.policy = policy
        #: The policy's own "never placeable" rule, where its traits declare one.
        self._refuses = traits_of(policy).refuses
        #: Whether the policy gives a fractional job a whole GPU (``PolicyTraits.whole_gpus``).
        self._whole_gpus = traits_of(policy).whole_gpus
        #: The policy's rule for what a preemption does to a job, where it declares one.
        self._preempts_as = traits_of(policy).preempts_as
        self.executor = executor
        self.overheads = overheads or Overheads()
        self.on_decision = on_decision
        #: Each node's GPU type, by node index: a move to another type is never free.
        self._node_types = tuple(node.gpu_type for node in cluster.nodes)
        self.partition_nodes: dict[str, np.ndarray] = {
            p: np.asarray(nodes, dtype=np.int64) for p, nodes in cluster.partition_nodes().items()
        }
        self._node_partition = {int(n): p for p, nodes in self.partition_nodes.items() for n in nodes}
        self.partition_gpus = {
            p: int(sum(cluster.nodes[n].gpus for n in nodes)) for p, nodes in self.partition_nodes.items()
        }
        self._partition_cpus = {
            p: float(sum(cluster.nodes[n].cpus for n in nodes)) for p, nodes in self.partition_nodes.items()
        }
        self._partition_mem = {
            p: float(sum(cluster.nodes[n].mem_gb for n in nodes)) for p, nodes in self.partition_nodes.items()
        }
        self.free = FreeResources.of(cluster, self.partition_nodes)
        #: Each partition's node indexes as the policy's refusal rule is handed them: the
        #: same tuple at every arrival, built once.
        self._refusal_nodes = (
            {p: tuple(int(n) for n in nodes) for p, nodes in self.partition_nodes.items()} if self._refuses else {}
        )
        #: GPU identity and sharing; only on clusters that let jobs share GPUs.
        self.sharing = GpuLedger(cluster) if cluster.gpu_share_limit > 1 or cluster.gpu_fractions else None
        #: Running jobs whose GPU partners changed since their speed was last set.
        self._reshared: dict[str, None] = {}
        #: The executor's ``sharing_changed``, where it models jobs slowing each other.
        self._sharing_changed: Callable[[JobStatus, float], None] | None = None
        if isinstance(executor, TracksSharing):
            self._sharing_changed = executor.sharing_changed
            if self.sharing is not None:
                executor.use_sharing(self.sharing)
        self.jobs: dict[str, JobStatus] = {}
        # Insertion-ordered dicts used as ordered sets: O(1) add/remove, stable order. The
        # waiting queues are OrderedDicts: they lose jobs from the front (FIFO starts) and
        # a plain dict then walks over every deleted slot to reach its first key (O(queue)
        # per decision on a long queue, until the next resize), where OrderedDict follows
        # its linked list (O(1)).
        self.pending: dict[str, OrderedDict[str, None]] = {p: OrderedDict() for p in self.partition_nodes}
        self.running: dict[str, dict[str, None]] = {p: {} for p in self.partition_nodes}
        self.allocations: dict[str, Allocation] = {}
        self.rejections: list[Rejection] = []
        self._dirty: set[str] = set()
        #: Jobs completed since the last decision, in completion order.
        self._finished: list[str] = []
        #: Jobs whose progress state changed since the last decision (``ClusterView.touched``).
        self._touched: dict[str, None] = {}
        self._timer_fired = False
        #: The instant the policy asked to decide again at (``Schedule.wake_at``), if any.
        self.wake_at: float | None = None
        self._wants_arrivals = ARRIVAL in policy.triggers
        self._wants_completions = COMPLETION in policy.triggers
        self.decisions = 0

    # ----------------------------------------------------------------- inputs
    def submit(self, spec: JobSpec, now: float) -> JobStatus:
        """A job arrives. Jobs that can never fit are rejected here, with a reason."""
        if spec.job_id in self.jobs:
            raise ValueError(f"job {spec.job_id!r} submitted twice")
        partition = self._partition_of(spec)
        status = JobStatus(spec=spec, partition=partition, last_update=now, queued_since=now)
        self.jobs[spec.job_id] = status
        reason = self._never_fits(spec, partition)
        if reason:
            status.state = JobState.REJECTED
            status.reject_reason = reason
            self.rejections.append(Rejection(spec.job_id, reason))
            return status
        self.executor.on_submit(status)
        self.pending[partition][spec.job_id] = None
        if self._wants_arrivals:
            self._dirty.add(partition)
        return status

    def complete(self, job_id: str, now: float) -> None:
        """The executor reports that a job finished all its work."""
        status = self.jobs[job_id]
        if status.state is not JobState.RUNNING or status.allocation is None:
            raise PolicyError(f"job {job_id} reported complete but is {status.state}")
        status.advance(now)
        status.work_done = status.work_total
        self._release(status)
        status.state = JobState.COMPLETED
        status.end_time = now
        status.version += 1
        self._finished.append(job_id)
        self._touched[job_id] = None
        if self._reshared:
            self._apply_sharing(now)
        if self._wants_completions:
            self._dirty.add(status.partition)

    def progress_changed(self, job_id: str) -> None:
        """A job's progress fields or state were changed outside the engine (an executor's
        rate boundary, a worker's progress report, a job withdrawn from the queue for
        good): the next decision lists it in ``ClusterView.touched``."""
        self._touched[job_id] = None

    def fire_timer(self) -> None:
        """A scheduling round is due: every partition is up for a new decision."""
        self._timer_fired = True
        self._dirty.update(self.partition_nodes)

    def fire_wakeup(self) -> None:
        """The instant the policy asked for (``wake_at``) has come: decide everywhere."""
        self.wake_at = None
        self._dirty.update(self.partition_nodes)

    @property
    def has_work(self) -> bool:
        return bool(self.allocations) or any(self.pending.values())

    # ------------------------------------------------------------- decisions
    def step(self, now: float) -> Schedule | None:
        """Ask the policy for the desired state if anything changed, and reconcile."""
        if not self._dirty:
            return None
        view = ClusterView(
            self, now, frozenset(self._dirty), self._timer_fired, tuple(self._finished), tuple(self._touched)
        )
        self._dirty.clear()
        self._finished.clear()
        self._touched.clear()
        self._timer_fired = False
        schedule = self.policy.decide(view)
        self.decisions += 1
        wake = schedule.wake_at
        # Exact to 1 us like every event time, and always in the future: rounding is
        # monotone, so the later of the two rounded is the later one rounded.
        soonest = now + 1e-6
        self.wake_at = None if wake is None else round(wake if wake >= soonest else soonest, 6)
        self.reconcile(schedule, now)
        if self.on_decision is not None:
            self.on_decision(now, schedule)
        return schedule

    def reconcile(self, schedule: Schedule, now: float) -> None:
        """Turn the desired state into actions: first everything that frees resources,
        then everything that takes them, so a schedule that moves resources from one job
        to another in the same decision is valid."""
        if not schedule.changes:
            if self._reshared:
                self._apply_sharing(now)
            return
        launches: list[tuple[JobStatus, Allocation]] = []
        moves: list[tuple[JobStatus, Allocation, Allocation]] = []
        for job_id, desired in schedule.changes.items():
            status = self.jobs.get(job_id)
            if status is None:
                raise PolicyError(f"{self.policy.name}: schedule names unknown job {job_id!r}")
            current = status.allocation
            if desired is None:
                if current is not None:
                    self._preempt(status, now)
                    self._touched[job_id] = None
            elif current is None:
                if status.state is not JobState.PENDING:
                    raise PolicyError(f"{self.policy.name}: cannot run job {job_id} in state {status.state}")
                launches.append((status, desired))
                self._touched[job_id] = None
            elif desired is not current and desired != current:
                self._touched[job_id] = None
                status.advance(now)
                self._release(status, keep_state=True)
                moves.append((status, desired, current))
        for status, desired, previous in moves:
            self._hold(status, desired)
            if rebatch_only(previous, desired):
                # Same GPUs, new batch size: adapted in place (AdaptDL), not a restart.
                status.version += 1
                self.executor.reconfigure(status, desired, now, self.overheads.rebatch_penalty)
                continue
            status.started_at = now
            status.reconfigurations += 1
            status.version += 1
            countdown = status.stall_until - now  # what is left of a restart pause
            pause = self.overheads.move(previous, desired, status.spec.model, self._node_types, countdown)
            self.executor.reconfigure(status, desired, now, pause)
        for status, desired in launches:
            self._hold(status, desired)
            del self.pending[status.partition][status.job_id]
            pause = self.overheads.start(desired.gpus, status.spec.model, status.has_checkpoint)
            status.state = JobState.RUNNING
            status.last_update = now
            status.started_at = now
            status.has_checkpoint = True
            status.version += 1
            if status.first_start is None:
                status.first_start = now
            self.executor.launch(status, desired, now, pause)
        if self._reshared:
            self._apply_sharing(now)

    # -------------------------------------------------------------- helpers
    def never_fits(self, spec: JobSpec) -> str:
        """Why ``spec`` can never run on this cluster ('' if it can); reads only the
        cluster's fixed shape, so a live controller may ask from another thread."""
        return self._never_fits(spec, self._partition_of(spec))

    def _partition_of(self, spec: JobSpec) -> str:
        if not self.cluster.partitions:
            return ""
        return spec.vc

    def _never_fits(self, spec: JobSpec, partition: str) -> str:
        if partition not in self.partition_nodes:
            if not partition:
                return "job names no partition (vc) and every node belongs to a named partition"
            known = ", ".join(sorted(p for p in self.partition_nodes if p))
            return f"unknown partition (vc) {partition!r}; known: {known}"
        where = f" in vc {partition}" if partition else ""
        if spec.num_gpus == 0 and spec.num_cpus == 0 and spec.mem_gb == 0:
            return "job requests no resources"
        if spec.num_gpus > self.partition_gpus[partition]:
            return f"needs {count(spec.num_gpus, 'GPU')} but the cluster has {self.partition_gpus[partition]}{where}"
        if spec.num_cpus > self._partition_cpus[partition] or spec.mem_gb > self._partition_mem[partition]:
            return f"needs more CPUs or memory than the cluster has{where}"
        if spec.gpu_types or spec.gpu_milli or self.cluster.gpu_fractions:
            reason = never_fits_shaped(self.cluster, self.partition_nodes[partition], spec, where)
            if reason:
                return reason
        if self._refuses is not None:
            return self._refuses(spec, self.cluster, self._refusal_nodes[partition])
        return ""

    def _hold(self, status: JobStatus, alloc: Allocation) -> None:
        """Give ``alloc`` to ``status``'s job, or raise ``PolicyError`` (nothing taken) if
        it lies outside the job's partition, on a GPU type the job excludes, or
        over-commits what is free. On clusters that share GPUs the ledger is asked here,
        and only here and at ``_release``."""
        spec = status.spec
        for node, res in alloc.placement:
            if self._node_partition.get(node) != status.partition:
                raise PolicyError(
                    f"{self.policy.name}: job {status.job_id} placed on node {node} outside its partition"
                )
            if res.gpus and spec.gpu_types and not spec.allows(self.cluster.nodes[node].gpu_type):
                raise PolicyError(
                    f"{self.policy.name}: job {status.job_id} placed on {self.cluster.nodes[node].gpu_type} GPUs,"
                    f" a type it excludes"
                )
        if spec.gpu_milli and self.free.milli is not None and (alloc.gpu_milli is None) != self._whole_gpus:
            rule = "a share of a GPU, but declares whole_gpus" if self._whole_gpus else "a whole GPU for its fraction"
            raise PolicyError(f"{self.policy.name}: allocation for job {status.job_id} gives {rule}")
        shared = alloc.devices is not None or (alloc.gpu_milli is not None and self.free.milli is not None)
        if shared and self.sharing is None:
            raise PolicyError(
                f"{self.policy.name}: job {status.job_id} names GPUs but the cluster allows one job per GPU"
                " (gpu_share_limit: 1)"
            )
        if not shared and not self.free.fits(alloc):
            raise PolicyError(f"{self.policy.name}: allocation for job {status.job_id} over-allocates a node")
        if self.sharing is None:
            self.free.take(alloc)
        else:
            if shared:
                problem = self.sharing.problem(alloc) or (
                    "" if self.free.fits_host(alloc) else "over-allocates a node's CPUs or memory"
                )
                if problem:
                    raise PolicyError(f"{self.policy.name}: allocation for job {status.job_id} {problem}")
            newly, joined = self.sharing.take(status, alloc)
            self.free.take(alloc, newly, self.sharing.devices[status.job_id])
            if self.free.held is not None:
                self.free.held[id(alloc)] = (alloc, self.sharing.devices[status.job_id])
            self._reshared.update(dict.fromkeys(joined))
            self._reshared[status.job_id] = None
        status.allocation = alloc
        self.allocations[status.job_id] = alloc
        self.running[status.partition][status.job_id] = None

    def _release(self, status: JobStatus, keep_state: bool = False) -> None:
        assert status.allocation is not None
        if self.sharing is None:
            self.free.give(status.allocation)
        else:
            devices = self.sharing.devices[status.job_id]
            if self.free.held is not None:
                self.free.held.pop(id(status.allocation), None)
            emptied, left = self.sharing.give(status.job_id)
            self.free.give(status.allocation, emptied, devices)
            self._reshared.update(dict.fromkeys(left))
            status.share = None
        del self.allocations[status.job_id]
        if not keep_state:
            del self.running[status.partition][status.job_id]
            status.allocation = None

    def _apply_sharing(self, now: float) -> None:
        """Jobs whose GPU partners changed: fold their progress up to ``now`` at the old
        speed, then let the executor set the new one (exact between events)."""
        if not self._reshared:
            return
        assert self.sharing is not None
        changed = self._sharing_changed
        for job_id in self._reshared:
            status = self.jobs[job_id]
            if status.state is not JobState.RUNNING or status.allocation is None:
                continue
            status.advance(now)
            self._touched[job_id] = None
            status.share = self.sharing.share_rates(job_id)
            if changed is not None:
                status.version += 1
                changed(status, now)
        self._reshared.clear()

    def _preempt(self, status: JobStatus, now: float) -> None:
        kind = PreemptKind.KEEP if self._preempts_as is None else self._preempts_as(status.job_id)
        status.advance(now)
        self.executor.stop(status, now)
        self._release(status)
        status.preemptions += 1
        status.version += 1
        if kind is PreemptKind.CANCEL:
            status.state = JobState.CANCELLED
            status.end_time = now
            return
        if kind is PreemptKind.REQUEUE:
            # Its work is lost: the next run starts from nothing, with nothing to restore.
            status.work_done = 0.0
            status.has_checkpoint = False
        status.state = JobState.PENDING
        status.queued_since = now
        self.pending[status.partition][status.job_id] = None
