"""What AntMan's packer knows of one job: its speed beside a partner and its memory.

The speed is the GpuOpManager's effect (paper Sec. 3.1.2): an opportunistic job's kernels
run only in the idle time slots of the resource-guaranteed job on its GPU, which keeps its
dedicated speed. The memory is what the job's plan needs per GPU (Sec. 3.1.1: AntMan
bounds a job's GPU memory to what it uses). ``antman_sharing`` places jobs with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shapeshift.model import ExecutionPlan, JobSpec, NodeSpec
from shapeshift.perf.arch import UnknownModelError, get_arch
from shapeshift.perf.colocation import InterferenceModel, UtilisationInterference, profile_of
from shapeshift.perf.ground_truth import host_memory_gb
from shapeshift.perf.memory import estimate_memory

#: A speed the interference model never goes below (an engine rate must stay positive).
MIN_SPEED = 0.01


def idle_share(job: JobSpec, seed: int = 0) -> float:
    """Share of a GPU's time that ``job`` leaves idle running alone (1 - GPU utilisation)."""
    return max(0.0, 1.0 - profile_of(job, seed).gpu_util)


@dataclass(frozen=True)
class AntManInterference:
    """Pair speeds under AntMan's GpuOpManager (module docstring, paper Sec. 3.1.2)."""

    fallback: InterferenceModel = field(default_factory=UtilisationInterference)
    guaranteed_slowdown: float = 0.0
    idle_slots: bool = True
    seed: int = 0

    def pair_speed(self, job: JobSpec, partner: JobSpec) -> float:
        if job.guaranteed and not partner.guaranteed:
            return 1.0 - self.guaranteed_slowdown
        shared = self.fallback.pair_speed(job, partner)
        if partner.guaranteed and not job.guaranteed and self.idle_slots:
            return max(MIN_SPEED, min(shared, idle_share(partner, self.seed)))
        return shared


def gpu_memory_gb(job: JobSpec, plan: ExecutionPlan | None, node: NodeSpec) -> float:
    """GPU memory per GPU that ``job`` is bounded to (paper Sec. 3.1): the plan's estimate,
    else the job's sharing profile; never above the GPU's memory."""
    estimate = None
    if plan is not None:
        try:
            estimate = estimate_memory(get_arch(job.model), plan, node=node).gpu_gb
        except UnknownModelError:  # a model without an architecture: its sharing profile
            estimate = None
    if estimate is None:
        estimate = profile_of(job).gpu_mem_gb
    return min(estimate, node.gpu_mem_gb)


def host_memory(job: JobSpec, plan: ExecutionPlan | None) -> float:
    """Host memory of a packed job, as the plan-aware skeleton's AllocMem counts it."""
    if plan is None:
        return job.mem_gb
    try:
        return max(host_memory_gb(get_arch(job.model), plan), job.mem_gb if job.guaranteed else 0.0)
    except UnknownModelError:
        return job.mem_gb
