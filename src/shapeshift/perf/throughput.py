"""Throughput models: how fast a job progresses on an allocation.

``ThroughputModel`` is the single question the simulated executor asks. The base model
here replays traces: a job's work is its recorded duration, and it progresses at one
second of work per second when it runs on what it asked for. Other allocations scale
by GPU count with a configurable efficiency and by a per-GPU-type speed factor, which
is what elastic and heterogeneity-aware policies need; plan-aware models plug in the
same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from shapeshift.model import Allocation, ClusterSpec, JobSpec


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


@dataclass(frozen=True)
class TraceSpeedModel:
    """Replay trace durations.

    * work = ``duration`` (seconds at the requested GPUs);
    * rate = 1 at the requested GPU count on reference GPUs;
    * a different GPU count g scales as ``(g / requested) ** scaling_exponent``
      (1.0 = linear, the optimistic default of elastic-scheduling simulators);
    * the slowest GPU type of the placement sets the pace (synchronous training waits for
      the straggler), scaled by ``gpu_speed[type] / gpu_speed[reference]``.
    """

    cluster: ClusterSpec
    gpu_speed: Mapping[str, float] = field(default_factory=dict)
    scaling_exponent: float = 1.0

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
        if job.num_gpus == 0 or gpus == job.num_gpus:
            scale = 1.0
        elif gpus == 0:
            return 0.0
        else:
            scale = (gpus / job.num_gpus) ** self.scaling_exponent
        if self.gpu_speed:
            speed = min(self.gpu_speed.get(self.cluster.nodes[n].gpu_type, 1.0) for n, _ in allocation.placement)
            scale *= speed
        return scale
