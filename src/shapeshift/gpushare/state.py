"""Fractional node/GPU state of a heterogeneous cluster, as numpy arrays.

A GPU holds any number of pods while their milli sum to at most 1000 (Alibaba's
GPU-sharing plugin, modelled by ``open_gpu_share.go`` and
pkg/type/open-gpu-share/cache/gpunodeinfo.go in hkust-adsl/kubernetes-scheduler-simulator).
Feasibility is the reference's filter phase: Kubernetes' NodeResourcesFit (CPU and memory
requests) plus ``GpuSharePlugin.Filter``: a partial-GPU pod needs one GPU with enough milli
left, a pod of k whole GPUs needs k fully idle GPUs, both on a node whose model the pod's
``gpu_spec`` allows (``IsNodeAccessibleToPodByType``, pkg/utils/utils.go).

Absent GPUs (a node with fewer than 8) are stored as 0 milli left, which no rule can use.
Every per-node figure a scorer needs (CPU left, idle milli per GPU, fully idle GPUs, the
clustering plugin's per-tag pod counts, the node's current fragmentation) is an array, so
each pod event costs O(nodes) numpy work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shapeshift.gpushare.frag import FragMeasure, TypicalPods, scoring_cpu
from shapeshift.gpushare.openb import MAX_GPUS_PER_NODE, MILLI, NodeList, PodList

#: Clustering-plugin tags (``GetGpuAffinityFromPodAnnotation`` in
#: pkg/type/open-gpu-share/utils/pod.go): 0 = "share-gpu", k = "k-gpu" (whole GPUs).
N_TAGS = MAX_GPUS_PER_NODE + 1


@dataclass(frozen=True)
class PodAsk:
    """One pod's request as the placement sees it."""

    cpu: int  # CPU milli requested (fit)
    cpu_score: int  # CPU milli as the scorers count it (0 -> 100)
    memory: int  # MiB
    num: int  # GPUs
    milli: int  # per GPU (0 for CPU-only pods)
    allowed: np.ndarray  # (models,) bool: may use a GPU of model k

    @property
    def total_milli(self) -> int:
        return self.num * self.milli

    @property
    def shares(self) -> bool:
        """Asks for part of one GPU."""
        return self.num == 1 and self.milli < MILLI

    @property
    def tag(self) -> int:
        return 0 if self.shares else self.num


def pod_asks(pods: PodList, models: tuple[str, ...]) -> list[PodAsk]:
    """A ``PodAsk`` per pod, model constraints resolved against the cluster's models."""
    any_model = np.ones(len(models), dtype=bool)
    cache: dict[str, np.ndarray] = {"": any_model}
    score_cpu = scoring_cpu(pods.cpu_milli)
    out = []
    for i in range(len(pods)):
        spec = pods.gpu_spec[i]
        if spec not in cache:
            allowed = {p for p in spec.split("|") if p}
            cache[spec] = np.array([m in allowed for m in models], dtype=bool)
        out.append(
            PodAsk(
                int(pods.cpu_milli[i]),
                int(score_cpu[i]),
                int(pods.memory_mib[i]),
                int(pods.num_gpu[i]),
                int(pods.gpu_milli[i]),
                cache[spec],
            )
        )
    return out


class ClusterState:
    """Mutable per-node arrays. ``version[i]`` counts changes to node i (for score caches)."""

    def __init__(self, nodes: NodeList, typical: TypicalPods):
        self.models: tuple[str, ...] = tuple(sorted({m for m in nodes.model if m}))
        index = {m: k for k, m in enumerate(self.models)}
        n = len(nodes)
        self.n = n
        self.gpus = nodes.gpus.copy()
        self.model = np.array([index.get(m, 0) for m in nodes.model], dtype=np.int64)
        self.cpu_cap = nodes.cpu_milli.copy()
        self.cpu_left = nodes.cpu_milli.copy()
        self.mem_left = nodes.memory_mib.copy()
        self.left = np.zeros((n, MAX_GPUS_PER_NODE), dtype=np.int64)
        for i in range(n):
            self.left[i, : self.gpus[i]] = MILLI
        self.max_left = self.left.max(axis=1)
        self.fully = (self.left == MILLI).sum(axis=1)
        self.tags = np.zeros((n, N_TAGS), dtype=np.int64)
        self.version = np.zeros(n, dtype=np.int64)
        self.measure = FragMeasure(typical, self.models)
        self.frag = self.measure(self.cpu_left, self.left, self.model)
        self.capacity_milli = int(self.gpus.sum()) * MILLI

    def feasible(self, pod: PodAsk) -> np.ndarray:
        """(nodes,) bool: the filter phase for ``pod``."""
        ok = (self.cpu_left >= pod.cpu) & (self.mem_left >= pod.memory)
        if pod.num == 0:
            return ok
        ok &= (self.gpus > 0) & pod.allowed[self.model]
        if pod.shares:
            ok &= self.max_left >= pod.milli
        else:
            ok &= self.fully >= pod.num
        return ok

    def place(self, node: int, gpu_ids: tuple[int, ...], pod: PodAsk) -> None:
        self.cpu_left[node] -= pod.cpu
        self.mem_left[node] -= pod.memory
        for g in gpu_ids:
            self.left[node, g] -= pod.milli
        self.max_left[node] = self.left[node].max()
        self.fully[node] = int((self.left[node] == MILLI).sum())
        if pod.num:
            self.tags[node, pod.tag] += 1
        self.version[node] += 1
        self.frag[node] = self.measure.one(int(self.cpu_left[node]), self.left[node].tolist(), int(self.model[node]))

    def exclusive_gpus(self, node: int, pod: PodAsk) -> tuple[int, ...]:
        """The lowest-index fully idle GPUs (``AllocateExclusiveGpuId``, pkg/type/resource.go)."""
        free = np.flatnonzero(self.left[node] == MILLI)
        return tuple(int(g) for g in free[: pod.num])
