"""Throughput models: how fast a job progresses on an allocation.

``ThroughputModel`` is the single question the simulated executor asks. The base model
here replays traces: a job's work is its recorded duration, and it progresses at one
second of work per second when it runs on what it asked for. Other allocations scale
by GPU count with a configurable efficiency and by a per-GPU-type speed factor, which
is what elastic and heterogeneity-aware policies need; plan-aware models plug in the
same way.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from shapeshift.model import Allocation, ClusterSpec, JobSpec
from shapeshift.workloads.catalog import ModelInfo, lookup


class ThroughputModel(Protocol):
    def total_work(self, job: JobSpec) -> float:
        """A job's total work, in the model's units."""
        ...

    def rate(self, job: JobSpec, allocation: Allocation) -> float:
        """Work units per second for ``job`` running on ``allocation`` (0 = cannot run)."""
        ...

    def target_rate(self, job: JobSpec) -> float | None:
        """The rate ``job`` is promised (its requested plan on its requested resources) if it
        is a guaranteed job, else ``None``. Used to measure SLO attainment."""
        ...


def job_type_speed(job: JobSpec, gpu_type: str) -> float | None:
    """``job``'s own throughput on ``gpu_type`` relative to its fastest listed type (0 = it
    cannot run there), or ``None`` when the job gives no per-type throughputs."""
    if not job.gpu_speed:
        return None
    best = max(v for _, v in job.gpu_speed)
    return dict(job.gpu_speed).get(gpu_type, 0.0) / best


def linear_speedup(gpus: int, efficiency: float = 1.0) -> float:
    """Throughput at ``gpus`` GPUs relative to one: ``1 + efficiency * (gpus - 1)``."""
    return 0.0 if gpus <= 0 else 1.0 + efficiency * (gpus - 1)


def job_speedup(info: ModelInfo | None, gpus: int, efficiency: float = 1.0) -> float:
    """Throughput at ``gpus`` GPUs relative to one GPU: the catalog curve when the model is
    catalogued with a scaling figure, else linear with ``efficiency``."""
    if info is not None and info.scaling_efficiency is not None:
        return info.speedup(gpus)
    return linear_speedup(gpus, efficiency)


@dataclass(frozen=True)
class TraceSpeedModel:
    """Replay trace durations.

    * work = ``duration`` (seconds at the requested GPUs);
    * rate = 1 at the requested GPU count on reference GPUs;
    * a different GPU count g scales as ``(g / requested) ** scaling_exponent``
      (1.0 = linear, the optimistic default of elastic-scheduling simulators), or, when
      ``scaling_efficiency`` is set, as ``S(g) / S(requested)`` with
      ``S(g) = 1 + scaling_efficiency * (g - 1)``;
    * the slowest GPU type of the placement sets the pace (synchronous training waits for
      the straggler), scaled by ``gpu_speed[type] / gpu_speed[reference]``;
    * a job that gives its own throughput per GPU type (``JobSpec.gpu_speed``) runs at
      that throughput relative to its fastest type (0 where it cannot run), whatever the
      catalog says;
    * with ``placement_slowdown``, a catalogued model whose GPUs span more nodes than the
      fewest that could hold them (``ceil(gpus / largest node)``) runs
      ``ModelInfo.spread_slowdown(type, gpus)`` times slower: Gavel's measured
      consolidated / unconsolidated throughput for its GPU type and count, or a stated
      proxy for placement-sensitive models Gavel did not measure
      (``workloads.placement_figures``; the worst type of the placement counts). Off by
      default: the published simulators we compare with (Tiresias's, Helios's) do not
      model it.

    With ``catalog=True`` (the default), a job whose ``model`` is in the model catalog
    uses the catalog instead: its own speed per GPU type relative to ``reference_gpu``
    (types the catalog has no figure for count as the reference) and its own scaling
    curve. Jobs without a catalogued model (every Philly job) behave exactly as above, and
    so does any job on a cluster of GPU types the catalog does not cover when it runs on
    the GPU count it asked for.
    """

    cluster: ClusterSpec
    gpu_speed: Mapping[str, float] = field(default_factory=dict)
    scaling_exponent: float = 1.0
    scaling_efficiency: float | None = None
    catalog: bool = True
    reference_gpu: str = "V100"
    #: Slow a catalogued model down by its spread-placement figure when its GPUs span more
    #: nodes than the fewest that could hold them (``throughput: trace-placement``).
    placement_slowdown: bool = False

    @functools.cached_property
    def _largest_node(self) -> int:
        return max((n.gpus for n in self.cluster.nodes), default=1) or 1

    def total_work(self, job: JobSpec) -> float:
        if job.duration is None:
            raise ValueError(
                f"job {job.job_id} has no duration; iteration-based jobs need a plan-aware throughput model"
            )
        return job.duration

    def target_rate(self, job: JobSpec) -> float | None:
        return 1.0 if job.guaranteed else None

    def rate(self, job: JobSpec, allocation: Allocation) -> float:
        gpus = allocation.gpus
        info = lookup(job.model) if self.catalog and job.model else None
        if job.num_gpus == 0 or gpus == job.num_gpus:
            scale = 1.0
        elif gpus == 0:
            return 0.0
        elif info is not None and info.scaling_efficiency is not None:
            scale = info.speedup(gpus) / info.speedup(job.num_gpus)
        elif self.scaling_efficiency is not None:
            eff = self.scaling_efficiency
            scale = linear_speedup(gpus, eff) / linear_speedup(job.num_gpus, eff)
        else:
            scale = (gpus / job.num_gpus) ** self.scaling_exponent
        spread = self.placement_slowdown and len(allocation.placement) > -(-gpus // self._largest_node)
        if spread and info is not None:
            nodes = self.cluster.nodes
            scale /= max(info.spread_slowdown(nodes[n].gpu_type, gpus) for n, _ in allocation.placement)
        if job.gpu_speed:
            nodes = self.cluster.nodes
            scale *= min(job_type_speed(job, nodes[n].gpu_type) or 0.0 for n, _ in allocation.placement)
        elif info is not None and info.gpu_speed:
            nodes = self.cluster.nodes
            speeds = [info.relative_speed(nodes[n].gpu_type, self.reference_gpu) for n, _ in allocation.placement]
            scale *= min(1.0 if s is None else s for s in speeds)
        elif self.gpu_speed:
            speed = min(self.gpu_speed.get(self.cluster.nodes[n].gpu_type, 1.0) for n, _ in allocation.placement)
            scale *= speed
        return scale
