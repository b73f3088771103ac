"""Speed of Synergy's models as a function of the CPUs and memory they are given.

``throughput: synergy``: a job whose model has a Synergy profile
(:mod:`shapeshift.perf.synergy_profiles`) runs its recorded duration (iterations x the
model's iteration time at the proportional share of Synergy's servers, as
``read_synergy`` computes it) at the trace model's speed for its GPUs times the
profile's speed at the job's CPUs and memory per GPU. Other jobs run exactly as under
``trace``.

Profiles are absolute: they were measured per GPU on servers with 3 CPUs and 62.5 GB
per GPU, so the same allocation gives the same speed on any cluster, and a CPU-rich
cluster's proportional share is already faster than the trace's duration.

An allocation that names no CPUs (or no memory) on a node, as CPU-oblivious policies
(``fifo``, ``sjf``...) allocate, is charged the node's GPU-proportional share there:
jobs then share the host as the operating system lets them, which is Synergy's
"GPU-proportional" baseline (Sec. 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shapeshift.model import Allocation, ClusterSpec, JobSpec
from shapeshift.perf.synergy_profiles import synergy_profile
from shapeshift.perf.throughput import TraceSpeedModel


def per_gpu_resources(cluster: ClusterSpec, allocation: Allocation) -> tuple[float, float]:
    """(CPUs, GB) per GPU of ``allocation``; a node share naming none gets the node's
    GPU-proportional share (see module doc)."""
    cpus = mem = 0.0
    for n, r in allocation.placement:
        node = cluster.nodes[n]
        share = r.gpus / node.gpus if node.gpus else 0.0
        cpus += r.cpus if r.cpus > 0 else node.cpus * share
        mem += r.mem_gb if r.mem_gb > 0 else node.mem_gb * share
    gpus = max(allocation.gpus, 1)
    return cpus / gpus, mem / gpus


@dataclass(frozen=True)
class SynergySpeedModel:
    """``ThroughputModel``: the trace model scaled by Synergy's CPU/memory profiles."""

    cluster: ClusterSpec
    base: TraceSpeedModel = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "base", TraceSpeedModel(self.cluster))

    def total_work(self, job: JobSpec) -> float:
        return self.base.total_work(job)

    def target_rate(self, job: JobSpec) -> float | None:
        return self.base.target_rate(job)

    def rate(self, job: JobSpec, allocation: Allocation) -> float:
        rate = self.base.rate(job, allocation)
        profile = synergy_profile(job.model)
        if profile is None or rate == 0.0 or allocation.gpus == 0:
            return rate
        return rate * profile.speed(*per_gpu_resources(self.cluster, allocation))
