"""Which GPUs of a node a job takes, when jobs may ask for a fraction of one GPU.

One rule, used by both the engine's GPU ledger (the truth) and a policy's scratch copy
of free resources (its plan), so the GPUs a policy expects a job to get are the GPUs the
engine gives it:

* a fractional job (``JobSpec.gpu_milli`` 1..999) takes the GPU with the *least* free
  share that still holds it, lowest index on ties: the tightest fit, which keeps idle
  GPUs idle for whole-GPU jobs (the FGD authors' simulator's ``gpuSelMethod: best``,
  ``pkg/simulator/plugin/open_gpu_share.go`` of hkust-adsl/kubernetes-scheduler-simulator);
* a whole-GPU job takes the lowest-numbered idle GPUs.

Free shares are kept in thousandths (``GPU_MILLI`` = an idle GPU), as integers, so sums
are exact. A slot past a node's last GPU holds -1.

And one rule for GPU-type constraints (``JobSpec.gpu_types``), which every placement
applies before its own search, whatever shape its node lists take: ``allowed_nodes``.
A policy whose source allocates whole GPUs only declares ``PolicyTraits.whole_gpus`` and
gives a fractional job one whole GPU; ``whole_gpu_spec`` is that job as such a policy sees it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from shapeshift.model import GPU_MILLI, ClusterSpec, JobSpec


def allowed_nodes(job: JobSpec, nodes: list[int], node_types: Sequence[str]) -> list[int]:
    """The ``nodes`` (indexes into ``node_types``, the GPU model of each node of the
    cluster) whose GPU type ``job`` allows, in their order; ``nodes`` itself (not a copy)
    for a job that names no type or needs no GPU (its CPUs and memory go anywhere)."""
    if not job.gpu_types or not job.num_gpus:
        return nodes
    return [n for n in nodes if node_types[n] in job.gpu_types]


def type_mask(job: JobSpec, nodes: Sequence[int], node_types: Sequence[str]) -> list[bool]:
    """For each of ``nodes``, whether ``job`` may use its GPUs (``allowed_nodes``'s rule,
    as a mask for callers that filter arrays)."""
    if not job.gpu_types or not job.num_gpus:
        return [True] * len(nodes)
    return [node_types[n] in job.gpu_types for n in nodes]


def whole_gpu_spec(job: JobSpec) -> JobSpec:
    """``job`` asking for one whole GPU instead of its fraction (itself when it asks for
    whole GPUs): what a policy that declares ``whole_gpus`` schedules."""
    return replace(job, gpu_milli=0) if job.gpu_milli else job


def choose_gpus(free: Sequence[int], count: int, milli: int | None) -> list[int] | None:
    """Indexes of the GPUs a job takes on a node whose GPUs have ``free`` thousandths
    free: one GPU for a fraction ``milli``, else ``count`` idle GPUs; ``None`` if they
    are not there."""
    if milli is not None:
        best = -1
        for gpu, left in enumerate(free):
            if left >= milli and (best < 0 or left < free[best]):
                best = gpu
        return None if best < 0 else [best]
    idle = [gpu for gpu, left in enumerate(free) if left == GPU_MILLI]
    return idle[:count] if len(idle) >= count else None


class TypedGroups:
    """``allowed_nodes`` for policies that keep a partition's nodes as groups (Slurm's
    nodes by ``Weight``): per (groups, allowed types), the groups cut to the nodes of
    those types (empty ones dropped) and the GPUs of the largest such node, built once
    and then the same objects, so callers may key their own caches on them."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self._types = tuple(node.gpu_type for node in cluster.nodes)
        self._gpus = tuple(node.gpus for node in cluster.nodes)
        self._cache: dict[tuple[int, frozenset[str]], tuple[list[list[int]], list[list[int]], int]] = {}

    def of(self, job: JobSpec, groups: list[list[int]], largest: int) -> tuple[list[list[int]], int]:
        """(groups, largest node's GPUs) that ``job`` may use: ``groups`` and ``largest``
        themselves for a job that names no GPU type."""
        if not job.gpu_types or not job.num_gpus:
            return groups, largest
        key = (id(groups), job.gpu_types)
        hit = self._cache.get(key)
        if hit is None or hit[0] is not groups:
            kept = [cut for cut in (allowed_nodes(job, group, self._types) for group in groups) if cut]
            most = max((self._gpus[n] for group in kept for n in group), default=0)
            hit = self._cache[key] = (groups, kept, most)
        return hit[1], hit[2]
