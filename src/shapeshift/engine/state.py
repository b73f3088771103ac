"""Mutable runtime state owned by the engine: per-job status and per-node free resources.

These are the only mutable objects in the scheduling core. Policies see them through
``ClusterView`` and must treat them as read-only; the engine alone changes them, in
``Engine.reconcile`` and on arrivals and completions.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from shapeshift.engine.fractions import choose_gpus
from shapeshift.engine.gpu_counts import GpuCounts
from shapeshift.model import GPU_MILLI, Allocation, ClusterSpec, JobSpec


class JobState(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    REJECTED = "rejected"
    UNFINISHED = "unfinished"
    #: Ended by a preemption that cancels (``PreemptKind.CANCEL``), never completed.
    CANCELLED = "cancelled"


@dataclass(slots=True, eq=False)
class JobStatus:
    """Runtime state of one job.

    Work is measured in *work units*, whatever the executor's throughput model counts
    (seconds at the requested resources for trace replays, iterations for plan-aware
    jobs). Progress is stored as of ``last_update`` and extrapolated in closed form:
    between events a running job advances at ``rate`` units per second once its
    restart pause (``stall_until``) is over. Nothing ticks.
    """

    spec: JobSpec
    partition: str
    state: JobState = JobState.PENDING
    allocation: Allocation | None = None
    work_total: float = 0.0
    work_done: float = 0.0
    rate: float = 0.0
    last_update: float = 0.0
    stall_until: float = 0.0
    #: GPU-seconds of allocation held so far (the "attained service" some orderings rank by).
    attained: float = 0.0
    #: Seconds spent holding an allocation (restart pauses included).
    run_seconds: float = 0.0
    #: Work units per second the job is promised (its requested plan on its requested
    #: resources), when the throughput model knows it; ``None`` = no target.
    target_rate: float | None = None
    #: Seconds of held time during which the job progressed at least at ``target_rate``
    #: (restart pauses never count: no progress is made during them).
    slo_met_seconds: float = 0.0
    first_start: float | None = None
    #: When the current run began (its last launch or reconfiguration): how long a running
    #: job has held its GPUs uninterrupted, for preemption leases.
    started_at: float = 0.0
    end_time: float | None = None
    queued_since: float = 0.0
    preemptions: int = 0
    reconfigurations: int = 0
    #: True once the job has run: its next launch restores from a checkpoint.
    has_checkpoint: bool = False
    #: Bumped whenever the completion time may change, to invalidate stale events.
    version: int = 0
    reject_reason: str = ""
    #: While the job shares a GPU (``shapeshift.engine.sharing``): GPU-seconds per second
    #: counted beyond once, and GPU-seconds per second on shared GPUs counted once;
    #: ``None`` while it holds its GPUs alone.
    share: tuple[float, float] | None = None
    #: Speed relative to running alone, set by the executor (interference while sharing).
    speed: float = 1.0
    #: Seconds held while sharing a GPU with another job.
    shared_seconds: float = 0.0
    #: Held GPU-seconds counted more than once because partners hold the same GPUs.
    overcount_gpu_seconds: float = 0.0
    #: GPU-seconds on shared GPUs, each GPU counted once (split over its jobs).
    shared_gpu_seconds: float = 0.0
    #: Progressing seconds lost to interference: sum of ``(1 - speed) * dt`` while sharing.
    slowed_seconds: float = 0.0
    #: ``spec.job_id``, copied once: the engine and executors read it on every event.
    job_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.job_id = self.spec.job_id

    def progress_at(self, now: float) -> float:
        """Work done by ``now`` (closed form; does not mutate)."""
        if self.state is not JobState.RUNNING:
            return self.work_done
        active = now - max(self.last_update, self.stall_until)
        done = self.work_done + self.rate * active if active > 0 else self.work_done
        return min(done, self.work_total)

    def expected_duration(self) -> float:
        """Run time at the requested resources, from the trace (oracle knowledge)."""
        return self.spec.duration if self.spec.duration is not None else self.work_total

    def remaining_at(self, now: float) -> float:
        return max(self.work_total - self.progress_at(now), 0.0)

    def attained_at(self, now: float) -> float:
        if self.state is not JobState.RUNNING or self.allocation is None:
            return self.attained
        return self.attained + self.allocation.gpus * (now - self.last_update)

    def advance(self, now: float) -> None:
        """Fold the time since ``last_update`` into the stored counters."""
        if self.state is JobState.RUNNING and self.allocation is not None:
            self.work_done = self.progress_at(now)
            dt = now - self.last_update
            self.attained += self.allocation.gpus * dt
            self.run_seconds += dt
            if self.target_rate is not None and self.rate >= self.target_rate * (1 - 1e-9):
                self.slo_met_seconds += max(now - max(self.last_update, self.stall_until), 0.0)
            if self.share is not None:
                self._fold_share(now, dt)
        self.last_update = now

    def _fold_share(self, now: float, dt: float) -> None:
        assert self.share is not None
        over, once = self.share
        self.shared_seconds += dt
        self.overcount_gpu_seconds += over * dt
        self.shared_gpu_seconds += once * dt
        self.slowed_seconds += (1.0 - self.speed) * max(now - max(self.last_update, self.stall_until), 0.0)


def progress_on_arrays(
    done: np.ndarray, last: np.ndarray, stall: np.ndarray, rate: np.ndarray, total: np.ndarray, now: float
) -> np.ndarray:
    """``JobStatus.progress_at(now)`` of running jobs given as columns of their fields,
    with the same operations, so policies that rank many running jobs on arrays get the
    per-job values bit for bit."""
    active = now - np.maximum(last, stall)
    return np.minimum(np.where(active > 0, done + rate * active, done), total)


@dataclass
class FreeResources:
    """Free GPUs, CPUs and memory per node, as numpy arrays indexed by node.

    Policies get a private copy (``ClusterView.scratch``) to try placements on, so a
    whole decision can be planned without touching the engine's state.
    """

    gpus: np.ndarray
    cpus: np.ndarray
    mem: np.ndarray
    gpu_capacity: np.ndarray = field(repr=False)
    #: Nodes per free-GPU count in each partition (``GpuCounts``), kept by ``take`` and
    #: ``give``; ``None`` when no partitions were registered.
    counts: GpuCounts | None = field(default=None, repr=False)
    #: GPU model of each node (``NodeSpec.gpu_type``), for jobs with a type constraint.
    node_types: tuple[str, ...] = field(default=(), repr=False)
    #: On clusters with ``gpu_fractions``: thousandths free on each GPU, one row per node
    #: (-1 past a node's last GPU); ``gpus`` then counts the idle GPUs. ``None`` elsewhere.
    milli: np.ndarray | None = field(default=None, repr=False)
    #: With ``milli``: jobs on each GPU, and how many one GPU may hold (``gpu_share_limit``
    #: where set above 1; else unbounded, as every job holds at least one thousandth).
    jobs: np.ndarray | None = field(default=None, repr=False)
    job_limit: int = GPU_MILLI
    #: With ``milli``: the GPUs of each allocation the engine holds, by the allocation's
    #: identity (the engine writes it; scratch copies share it, read-only), so that a plan
    #: giving back a running job's allocation frees the GPUs the job really holds, not
    #: another job's of the same shape.
    held: dict[int, tuple[Allocation, tuple[tuple[int, int], ...]]] | None = field(default=None, repr=False)
    #: How many times resources were given back (``give``): while it stands still the
    #: free resources only shrank, so a job that did not fit still does not (a policy
    #: may skip testing it again).
    released: int = field(default=0, repr=False)

    @classmethod
    def of(cls, cluster: ClusterSpec, partitions: Mapping[str, np.ndarray] | None = None) -> FreeResources:
        """The cluster's resources, all free; with ``partitions`` (the engine's node arrays),
        counted per partition so placements answer without scanning every node."""
        gpus = np.array([n.gpus for n in cluster.nodes], dtype=np.int64)
        milli = None
        if cluster.gpu_fractions:
            width = max(int(gpus.max()), 1)
            milli = np.where(np.arange(width)[None, :] < gpus[:, None], GPU_MILLI, -1).astype(np.int64)
        limit = cluster.gpu_share_limit if cluster.gpu_share_limit > 1 else GPU_MILLI
        return cls(
            gpus=gpus.copy(),
            cpus=np.array([n.cpus for n in cluster.nodes], dtype=np.float64),
            mem=np.array([n.mem_gb for n in cluster.nodes], dtype=np.float64),
            gpu_capacity=gpus,
            counts=None if partitions is None else GpuCounts.of(partitions, gpus, gpus),
            node_types=tuple(n.gpu_type for n in cluster.nodes),
            milli=milli,
            jobs=None if milli is None else np.zeros_like(milli),
            job_limit=limit,
            held=None if milli is None else {},
        )

    def copy(self) -> FreeResources:
        counts = None if self.counts is None else self.counts.copy()
        milli = None if self.milli is None else self.milli.copy()
        jobs = None if self.jobs is None else self.jobs.copy()
        return FreeResources(
            self.gpus.copy(),
            self.cpus.copy(),
            self.mem.copy(),
            self.gpu_capacity,
            counts,
            self.node_types,
            milli,
            jobs,
            self.job_limit,
            self.held,
        )

    def usable_milli(self, nodes: np.ndarray | int) -> np.ndarray:
        """Thousandths free per GPU of ``nodes`` that may take one more job (-1 where the
        job limit is reached); needs ``milli``."""
        assert self.milli is not None and self.jobs is not None
        return np.where(self.jobs[nodes] < self.job_limit, self.milli[nodes], -1)

    def gpus_for(self, alloc: Allocation) -> list[tuple[int, int]] | None:
        """The GPUs ``alloc`` gets on a fractional cluster (named, or by the engine's rule,
        ``shapeshift.engine.fractions``); ``None`` if they are not free."""
        assert self.milli is not None
        if alloc.devices is not None:
            return list(alloc.devices)
        devices: list[tuple[int, int]] = []
        for n, r in alloc.placement:
            if r.gpus:
                chosen = choose_gpus(self.usable_milli(n).tolist(), r.gpus, alloc.gpu_milli)
                if chosen is None:
                    return None
                devices.extend((n, g) for g in chosen)
        return devices

    def naming_gpus(self, alloc: Allocation) -> Allocation:
        """On a fractional cluster, ``alloc`` naming the GPUs this plan gives it (``gpus_for``),
        so the engine holds exactly those, whatever it applies first; ``alloc`` itself where
        it names them already, holds no GPU, or the cluster is not fractional."""
        if self.milli is None or alloc.devices is not None or not alloc.gpus:
            return alloc
        devices = self.gpus_for(alloc)
        return alloc if devices is None else dataclasses.replace(alloc, devices=tuple(devices))

    def _move_milli(self, alloc: Allocation, devices: list[tuple[int, int]] | None, sign: int) -> dict[int, int]:
        """Take (sign -1) or give back (+1) ``alloc``'s share of its GPUs; returns the idle
        GPUs it takes or leaves per node."""
        milli, jobs = self.milli, self.jobs
        assert milli is not None and jobs is not None
        share = alloc.gpu_milli if alloc.gpu_milli is not None else GPU_MILLI
        if devices is None:
            devices = self.gpus_for(alloc) if sign < 0 else self._held_by(alloc)
        assert devices is not None, "the allocation's GPUs are not free"
        idle: dict[int, int] = {}
        for n, g in devices:
            before = milli.item(n, g)
            milli[n, g] = before + sign * share
            jobs[n, g] -= sign
            if GPU_MILLI in (before, before + sign * share):
                idle[n] = idle.get(n, 0) + 1
        return idle

    def _held_by(self, alloc: Allocation) -> list[tuple[int, int]]:
        """GPUs a device-less allocation may have held (a plan giving back what it does not
        know the GPUs of): the fullest ones of its nodes that hold its share."""
        assert self.milli is not None
        hit = None if self.held is None else self.held.get(id(alloc))
        if hit is not None and hit[0] is alloc:
            return list(hit[1])
        share = alloc.gpu_milli if alloc.gpu_milli is not None else GPU_MILLI
        devices: list[tuple[int, int]] = []
        for n, r in alloc.placement:
            row = self.milli[n].tolist()
            held = [g for g, left in enumerate(row) if 0 <= left <= GPU_MILLI - share]
            held.sort(key=lambda g: row[g])
            devices.extend((n, g) for g in held[: r.gpus])
        return devices

    def recount(self) -> None:
        """Bring the per-partition counts up to date after writing the arrays directly."""
        if self.counts is not None:
            self.counts.recount(self.gpus)

    def _counted(self, nodes: np.ndarray) -> tuple[GpuCounts, int] | None:
        """The counts and the group of ``nodes``, when it is a registered partition."""
        counts = self.counts
        group = None if counts is None else counts.group(nodes)
        return None if group is None else (counts, group)  # type: ignore[return-value]

    def free_gpus_in(self, nodes: np.ndarray) -> int:
        """Free GPUs on ``nodes`` (O(1) for a registered partition)."""
        counted = self._counted(nodes)
        return int(self.gpus[nodes].sum()) if counted is None else counted[0].total(counted[1])

    def smallest_fit(self, nodes: np.ndarray, gpus: int) -> int | None:
        """The fewest free GPUs, at least ``gpus``, that one of ``nodes`` has (``None``:
        no node has ``gpus`` free): the free GPUs of the best-fitting node."""
        counted = self._counted(nodes)
        if counted is not None:
            return counted[0].smallest_fit(counted[1], gpus)
        fg = self.gpus[nodes]
        fits = fg[fg >= gpus]
        return int(fits.min()) if fits.size else None

    def histogram_in(self, nodes: np.ndarray) -> list[int] | None:
        """Nodes of a registered partition per number of free GPUs (``histogram[i]`` have
        ``i`` free; read-only), or ``None`` for any other array."""
        counted = self._counted(nodes)
        return None if counted is None else counted[0].histogram(counted[1])

    def nodes_with(self, nodes: np.ndarray, gpus: int) -> int | None:
        """How many of ``nodes`` have exactly ``gpus`` free, for a registered partition
        (``None`` for any other array: count them off the arrays)."""
        counted = self._counted(nodes)
        return None if counted is None else counted[0].nodes_with(counted[1], gpus)

    def gpus_in(self, nodes: np.ndarray) -> np.ndarray:
        """Free GPUs of ``nodes``, in their order; read-only (a view of the array when
        ``nodes`` is a registered partition of consecutive nodes)."""
        counted = self._counted(nodes)
        window = None if counted is None else counted[0].window(counted[1])
        return self.gpus[nodes] if window is None else self.gpus[window]

    # The per-node reads and writes below go through ``item`` and plain numbers: a numpy
    # scalar costs several times a Python one, and these run for every start and stop
    # (the same IEEE operations, so the same values).

    def fits(self, alloc: Allocation) -> bool:
        eps = 1e-9
        gpus, cpus, mem = self.gpus, self.cpus, self.mem
        if self.milli is not None and alloc.gpu_milli is not None:
            return self.fits_host(alloc) and self.gpus_for(alloc) is not None
        for n, r in alloc.placement:
            if not (gpus.item(n) >= r.gpus and cpus.item(n) + eps >= r.cpus and mem.item(n) + eps >= r.mem_gb):
                return False
        return True

    def fits_host(self, alloc: Allocation) -> bool:
        """CPUs and host memory only: an allocation naming shared GPUs (the GPU ledger checks those)."""
        eps = 1e-9
        return all(self.cpus[n] + eps >= r.cpus and self.mem[n] + eps >= r.mem_gb for n, r in alloc.placement)

    def take(
        self,
        alloc: Allocation,
        gpus: Mapping[int, int] | None = None,
        devices: list[tuple[int, int]] | tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        """Take ``alloc``; ``gpus`` (per node), when given, is how many *empty* GPUs it
        occupies, for allocations that join GPUs other jobs hold. On a fractional cluster
        the shares of its GPUs (``devices``, else named or chosen by the engine's rule)
        are taken too, and they say which GPUs stop being idle."""
        if self.milli is not None:
            gpus = self._move_milli(alloc, None if devices is None else list(devices), -1)
        counts, free, cpus, mem = self.counts, self.gpus, self.cpus, self.mem
        for n, r in alloc.placement:
            taken = r.gpus if gpus is None else gpus.get(n, 0)
            if taken:
                before = free.item(n)
                free[n] = before - taken
                if counts is not None:
                    counts.moved(n, before, before - taken)
            cpus[n] = cpus.item(n) - r.cpus
            mem[n] = mem.item(n) - r.mem_gb

    def give(
        self,
        alloc: Allocation,
        gpus: Mapping[int, int] | None = None,
        devices: list[tuple[int, int]] | tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        self.released += 1
        if self.milli is not None:
            named = devices if devices is not None else alloc.devices
            gpus = self._move_milli(alloc, None if named is None else list(named), +1)
        counts, free, cpus, mem = self.counts, self.gpus, self.cpus, self.mem
        for n, r in alloc.placement:
            given = r.gpus if gpus is None else gpus.get(n, 0)
            if given:
                before = free.item(n)
                free[n] = before + given
                if counts is not None:
                    counts.moved(n, before, before + given)
            cpus[n] = cpus.item(n) + r.cpus
            mem[n] = mem.item(n) + r.mem_gb
