"""Domain types shared by every part of Shapeshift.

Everything here is a frozen dataclass that validates itself on construction, so a value that exists is a
value that makes sense: no negative resources, no execution plan whose parallel sizes disagree with its GPU
count. This module imports only ``shapeshift.invariants`` (``ModelError``), ``shapeshift.job_kinds``
(batch sizes and fused tuning trials) and ``shapeshift.plans`` (execution plans), re-exported
here, which import nothing else (dependencies point inward).

Units: time in seconds, memory in GB (10^9 bytes), bandwidth in GB/s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from shapeshift.invariants import ModelError, _require
from shapeshift.job_kinds import BatchSpec, FusedTrials
from shapeshift.plans import ExecutionPlan, ZeroMode

__all__ = ["BatchSpec", "ExecutionPlan", "FusedTrials", "ModelError", "ZeroMode"]


def _frozen_mapping(value: Mapping[Any, Any] | None) -> Mapping[Any, Any]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of GPUs, CPU cores and host memory (GB).

    Comparisons are component-wise: ``a <= b`` means ``a`` fits inside ``b`` in every
    dimension, which is the question placement asks all the time.
    """

    gpus: int = 0
    cpus: float = 0.0
    mem_gb: float = 0.0

    def __post_init__(self) -> None:
        # Checked inline (not via _require) so the message is only formatted on failure:
        # resources are built on every placement attempt.
        if self.gpus < 0 or self.cpus < 0 or self.mem_gb < 0:
            raise ModelError(f"resources must be non-negative, got {self}")

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.gpus + other.gpus, self.cpus + other.cpus, self.mem_gb + other.mem_gb)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.gpus - other.gpus, self.cpus - other.cpus, self.mem_gb - other.mem_gb)

    def __le__(self, other: Resources) -> bool:  # type: ignore[override]
        return self.gpus <= other.gpus and self.cpus <= other.cpus and self.mem_gb <= other.mem_gb

    def __ge__(self, other: Resources) -> bool:  # type: ignore[override]
        return other <= self

    def is_zero(self) -> bool:
        return self.gpus == 0 and self.cpus == 0 and self.mem_gb == 0


#: Thousandths of a GPU: the unit of fractional GPU requests (``JobSpec.gpu_milli``).
GPU_MILLI = 1000

#: Host resources per GPU of a node whose description gives none (``NxG`` clusters and
#: YAML node groups without ``cpus``/``mem_gb``).
DEFAULT_CPUS_PER_GPU = 8
DEFAULT_MEM_GB_PER_GPU = 64


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One server: its capacity, GPU model and the bandwidths its GPUs see."""

    name: str
    gpus: int
    cpus: float
    mem_gb: float
    gpu_type: str = "generic"
    gpu_mem_gb: float = 80.0
    intra_bw_gb_s: float = 300.0
    inter_bw_gb_s: float = 12.5
    pcie_bw_gb_s: float = 32.0
    #: Kubernetes node labels as sorted ``(key, value)`` pairs: what a Kueue
    #: ResourceFlavor's ``nodeLabels`` select.
    labels: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(sorted(dict(self.labels).items())))
        _require(bool(self.name), "node name must not be empty")
        _require(self.gpus >= 0, f"node {self.name}: gpus must be >= 0")
        _require(self.cpus >= 0 and self.mem_gb >= 0, f"node {self.name}: cpus and mem_gb must be >= 0")
        _require(self.gpu_mem_gb > 0, f"node {self.name}: gpu_mem_gb must be > 0")
        for bw in (self.intra_bw_gb_s, self.inter_bw_gb_s, self.pcie_bw_gb_s):
            _require(bw > 0, f"node {self.name}: bandwidths must be > 0")

    @property
    def capacity(self) -> Resources:
        return Resources(self.gpus, self.cpus, self.mem_gb)


@dataclass(frozen=True)
class ClusterSpec:
    """A set of nodes, optionally split into partitions (virtual clusters) and with tenant quotas.

    Partitions never share nodes. When a cluster has partitions, every job must name one
    (its ``vc``); nodes not listed in any partition form the default partition ``""``,
    which takes jobs that name no partition. Without partitions the whole cluster is one
    pool and job ``vc`` labels are ignored.
    """

    nodes: tuple[NodeSpec, ...]
    partitions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tenants: Mapping[str, int] = field(default_factory=dict)
    #: How many jobs may hold one GPU at once (1 = whole GPUs only, the default). Above
    #: 1 an allocation may name GPUs other jobs hold (``Allocation.devices``), within
    #: each GPU's memory (``NodeSpec.gpu_mem_gb``); see ``shapeshift.engine.sharing``.
    gpu_share_limit: int = 1
    #: Whether jobs may ask for a fraction of one GPU (``JobSpec.gpu_milli``): the engine
    #: then keeps the GPU ledger and packs fractional jobs on a GPU while their shares sum
    #: to at most one GPU (``gpu_share_limit`` still caps the jobs per GPU where it is set
    #: above 1). Its jobs are pods: a job no single node can hold is rejected on arrival.
    gpu_fractions: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        parts = {name: tuple(members) for name, members in (self.partitions or {}).items()}
        object.__setattr__(self, "partitions", MappingProxyType(parts))
        object.__setattr__(self, "tenants", _frozen_mapping(self.tenants))
        _require(len(self.nodes) > 0, "a cluster needs at least one node")
        names = [n.name for n in self.nodes]
        _require(len(set(names)) == len(names), "node names must be unique")
        known = set(names)
        seen: dict[str, str] = {}
        for part, members in parts.items():
            _require(bool(part), "partition names must not be empty")
            for node in members:
                _require(node in known, f"partition {part!r} names unknown node {node!r}")
                _require(node not in seen, f"node {node!r} is in partitions {seen.get(node)!r} and {part!r}")
                seen[node] = part
        for tenant, quota in self.tenants.items():
            _require(quota >= 0, f"tenant {tenant!r}: quota must be >= 0")
        limit = self.gpu_share_limit
        _require(isinstance(limit, int) and limit >= 1, f"gpu_share_limit must be an integer >= 1, got {limit!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        # The read-only mapping proxies do not pickle; rebuild from plain dicts, so a
        # cluster can travel to worker processes with a run description.
        args = (self.nodes, dict(self.partitions), dict(self.tenants), self.gpu_share_limit, self.gpu_fractions)
        return (ClusterSpec, args)

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted({n.gpu_type for n in self.nodes}))

    def partition_nodes(self) -> dict[str, tuple[int, ...]]:
        """Node indexes per partition name; the whole cluster is partition ``""`` when unpartitioned."""
        if not self.partitions:
            return {"": tuple(range(len(self.nodes)))}
        index = {n.name: i for i, n in enumerate(self.nodes)}
        result = {p: tuple(sorted(index[m] for m in members)) for p, members in self.partitions.items()}
        assigned = {i for members in result.values() for i in members}
        rest = tuple(i for i in range(len(self.nodes)) if i not in assigned)
        if rest:
            result[""] = rest
        return result


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a user submitted. Immutable; runtime state lives in the engine's ``JobStatus``.

    ``duration`` is the job's run time at its requested resources (what a trace records);
    ``iterations`` is its total work when it is known in steps (plan-aware workloads).
    """

    job_id: str
    submit_time: float
    num_gpus: int
    duration: float | None = None
    name: str = ""
    user: str = ""
    vc: str = ""
    tenant: str = ""
    guaranteed: bool = False
    model: str = ""
    num_cpus: float = 0.0
    mem_gb: float = 0.0
    iterations: int | None = None
    plan: ExecutionPlan | None = None
    #: Batch size (and whether a goodput policy may adapt it); ``None`` = the throughput
    #: model's business (every job before adaptive batch sizes existed).
    batch: BatchSpec | None = None
    #: Measured throughput per GPU type, ``((type, value), ...)`` sorted by type, in any
    #: unit (only ratios matter): ``duration`` is the run time on the job's fastest listed
    #: type, and a type it does not list, or lists as 0, cannot run it. Empty = unknown
    #: (the model catalog, if it knows the model, answers instead). Gavel reads it.
    gpu_speed: tuple[tuple[str, float], ...] = ()
    tuning: FusedTrials | None = None  # set for fused-trial tuning jobs only
    time_limit: float | None = None  # wall-clock limit asked for (s; None = the partition's); planners use it
    qos: str = ""  # quality of service asked for (a Slurm QOS name; "" = none)
    #: Share of one GPU in thousandths (1..999) for a job that needs less than a whole
    #: GPU (``num_gpus`` then 1); 0 = whole GPUs. GPU-sharing clusters (openb) ask this
    #: way; the engine packs such jobs while a GPU's shares sum to at most 1000.
    gpu_milli: int = 0
    #: GPU models the job may run on (empty = any): a type constraint, as openb's ``gpu_spec``.
    gpu_types: frozenset[str] = frozenset()
    #: Kubernetes batch queueing (Kueue, KAI-Scheduler): the job's namespace, the queue it
    #: is submitted to (a LocalQueue within the namespace for Kueue, a queue for KAI; ""
    #: = none given), its priority class name and its gang size: ``pods`` pods of
    #: ``num_gpus / pods`` GPUs each, started all together or not at all.
    namespace: str = ""
    queue_name: str = ""
    priority_class: str = ""
    pods: int = 1

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem:
            raise ModelError(f"job {self.job_id}: {problem}")

    def _problem(self) -> str:
        if not self.job_id:
            return "job_id must not be empty"
        if not (math.isfinite(self.submit_time) and self.submit_time >= 0):
            return "submit_time must be >= 0"
        if self.num_gpus < 0:
            return "num_gpus must be >= 0"
        if self.num_cpus < 0 or self.mem_gb < 0:
            return "num_cpus and mem_gb must be >= 0"
        if self.duration is None and self.iterations is None:
            return "needs a duration or a number of iterations"
        if self.duration is not None and not (math.isfinite(self.duration) and self.duration >= 0):
            return "duration must be >= 0"
        if self.iterations is not None and self.iterations < 0:
            return "iterations must be >= 0"
        if self.time_limit is not None and not 0 < self.time_limit < math.inf:
            return "time_limit must be a finite number > 0"
        if self.pods < 1:
            return "pods must be >= 1"
        if self.num_gpus % self.pods:
            return f"num_gpus {self.num_gpus} is not a whole number of GPUs for each of {self.pods} pods"
        if self.gpu_speed and any(not (math.isfinite(v) and v >= 0) for _, v in self.gpu_speed):
            return "gpu_speed values must be finite and >= 0"
        if self.gpu_speed and max(v for _, v in self.gpu_speed) <= 0:
            return "gpu_speed must give at least one GPU type a positive throughput"
        if self.plan is not None and self.plan.gpus != self.num_gpus:
            return f"plan uses {self.plan.gpus} GPU{'s' * (self.plan.gpus != 1)} but the job asks for {self.num_gpus}"
        if self.gpu_milli:
            if not (isinstance(self.gpu_milli, int) and 0 < self.gpu_milli < GPU_MILLI):
                return f"gpu_milli must be a whole number 1..{GPU_MILLI - 1} (0 = whole GPUs), got {self.gpu_milli!r}"
            if self.num_gpus != 1:
                return f"a fraction of a GPU (gpu_milli {self.gpu_milli}) needs num_gpus 1, got {self.num_gpus}"
        return ""

    @property
    def gpu_fraction(self) -> float:
        """GPUs asked for, counting a fractional job as its share of one GPU."""
        return self.gpu_milli / GPU_MILLI if self.gpu_milli else float(self.num_gpus)

    def allows(self, gpu_type: str) -> bool:
        """Whether the job may run on GPUs of ``gpu_type`` (its type constraint)."""
        return not self.gpu_types or gpu_type in self.gpu_types

    @property
    def requested(self) -> Resources:
        return Resources(self.num_gpus, self.num_cpus, self.mem_gb)

    @property
    def gpus_per_pod(self) -> int:
        return self.num_gpus // self.pods


@dataclass(frozen=True, slots=True)
class Allocation:
    """Resources on specific nodes (by node index) plus the execution plan that uses them.

    ``placement`` is a tuple of ``(node_index, Resources)`` pairs sorted by node index, so
    two allocations of the same resources compare equal.
    """

    placement: tuple[tuple[int, Resources], ...]
    plan: ExecutionPlan | None = None
    #: Global batch size a goodput policy chose for the job (``None`` = the job's own):
    #: for an adaptive job, or a fixed one whose batch the policy's source tunes.
    batch_size: int | None = None
    #: The GPUs used, as ``(node_index, gpu_index)`` pairs sorted; ``None`` = any free
    #: whole GPUs on the placement's nodes (the engine picks). Naming GPUs that other jobs
    #: hold shares them, on clusters whose ``gpu_share_limit`` is above 1.
    devices: tuple[tuple[int, int], ...] | None = None
    #: GPU memory (GB) the job uses on each of its GPUs; ``None`` = the whole GPU, so
    #: nobody can join it. A job that declares less leaves room for partners.
    gpu_mem_gb: float | None = None
    #: Share of each of its GPUs the job uses, in thousandths (1..999); ``None`` = whole
    #: GPUs. On a cluster with ``gpu_fractions`` jobs join a GPU while the shares on it
    #: sum to at most 1000.
    gpu_milli: int | None = None
    #: Total GPUs, derived once: the engine and executors ask for it on every event.
    gpus: int = field(init=False, compare=False, repr=False, default=0)

    def __post_init__(self) -> None:
        if len(self.placement) == 1:
            node, res = self.placement[0]
            if node < 0:
                raise ModelError("node index must be >= 0")
            placement = self.placement if not res.is_zero() else ()
            gpus = res.gpus
        else:
            merged: dict[int, Resources] = {}
            for node, res in self.placement:
                if node < 0:
                    raise ModelError("node index must be >= 0")
                merged[node] = merged[node] + res if node in merged else res
            placement = tuple(sorted((n, r) for n, r in merged.items() if not r.is_zero()))
            gpus = sum(r.gpus for _, r in placement)
            object.__setattr__(self, "placement", placement)
        if not placement:
            raise ModelError("an allocation must hold some resources")
        object.__setattr__(self, "gpus", gpus)
        if self.batch_size is not None and not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise ModelError(f"batch_size must be an integer >= 1, got {self.batch_size!r}")
        if self.plan is not None and self.plan.gpus != gpus:
            uses = f"{self.plan.gpus} GPU{'s' * (self.plan.gpus != 1)}"
            raise ModelError(f"plan uses {uses} but the allocation holds {gpus}")
        if self.gpu_milli is not None and not (
            isinstance(self.gpu_milli, int) and 0 < self.gpu_milli < GPU_MILLI and gpus == 1
        ):
            raise ModelError(f"gpu_milli must be 1..{GPU_MILLI - 1} on a one-GPU allocation, got {self.gpu_milli!r}")
        if self.devices is not None or self.gpu_mem_gb is not None:
            self._check_sharing(placement)

    def _check_sharing(self, placement: tuple[tuple[int, Resources], ...]) -> None:
        mem = self.gpu_mem_gb
        if mem is not None and not (math.isfinite(mem) and mem > 0):
            raise ModelError(f"gpu_mem_gb must be a finite number > 0, got {mem!r}")
        if self.devices is None:
            return
        devices = tuple(sorted(set(self.devices)))
        if len(devices) != len(self.devices):
            raise ModelError("an allocation names the same GPU twice")
        object.__setattr__(self, "devices", devices)
        per_node: dict[int, int] = {}
        for node, gpu in devices:
            if gpu < 0:
                raise ModelError("GPU index must be >= 0")
            per_node[node] = per_node.get(node, 0) + 1
        wanted = {n: r.gpus for n, r in placement if r.gpus}
        if per_node != wanted:
            raise ModelError(f"devices name GPUs {per_node} per node but the placement holds {wanted}")

    @property
    def shares(self) -> bool:
        """Whether this allocation may sit on GPUs with other jobs (it names them or leaves memory)."""
        return self.devices is not None or self.gpu_mem_gb is not None or self.gpu_milli is not None

    @property
    def total(self) -> Resources:
        total = Resources()
        for _, res in self.placement:
            total = total + res
        return total

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(n for n, _ in self.placement)


@dataclass(frozen=True)
class Schedule:
    """The desired state a policy returns: an allocation per job that should run.

    To keep reconciliation proportional to what changed, a schedule is the allocations
    at decision time (``base``) overlaid with ``changes``: a job mapped to an
    ``Allocation`` should run with it, a job mapped to ``None`` should not run. Jobs not
    in ``changes`` keep their current state. ``reasons`` explains, for waiting jobs the
    policy looked at, why they wait; ``default_reason`` covers the rest. ``wake_at`` asks
    the engine for a decision at an exact future instant.
    """

    base: Mapping[str, Allocation]
    changes: Mapping[str, Allocation | None] = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)
    default_reason: str = "waiting for resources"
    #: The next instant the policy wants to decide again even if nothing happens (a queue
    #: demotion, a lease running out); ``None`` = only on its triggers. Each decision
    #: replaces the previous request.
    wake_at: float | None = None

    @classmethod
    def replace(
        cls,
        current: Mapping[str, Allocation],
        desired: Mapping[str, Allocation],
        reasons: Mapping[str, str] | None = None,
    ) -> Schedule:
        """Build a schedule from a complete desired state (what joint policies compute)."""
        changes: dict[str, Allocation | None] = {j: None for j in current if j not in desired}
        for job, alloc in desired.items():
            if current.get(job) != alloc:
                changes[job] = alloc
        return cls(base=current, changes=changes, reasons=dict(reasons or {}))

    def allocation(self, job_id: str) -> Allocation | None:
        if job_id in self.changes:
            return self.changes[job_id]
        return self.base.get(job_id)

    @property
    def allocations(self) -> dict[str, Allocation]:
        """The complete desired state (materialised; O(running jobs))."""
        result = {j: a for j, a in self.base.items() if j not in self.changes}
        result.update({j: a for j, a in self.changes.items() if a is not None})
        return result

    def reason(self, job_id: str) -> str:
        return self.reasons.get(job_id, self.default_reason)
