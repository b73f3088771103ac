"""Placement scorers: FGD and the paper's five baselines, as the authors' simulator scores them.

Each follows its score plugin in pkg/simulator/plugin/ of hkust-adsl/kubernetes-scheduler-simulator
(commit in ``gpushare.REFERENCE_COMMIT``) and the GPU choice the experiment scripts configure
for it (``gpuSelMethod`` of Open-Gpu-Share, scripts/generate_config_and_run.py and
experiments/run_scripts/generate_run_scripts.py): ``random`` for Random-fit, the FGD score
itself for FGD, ``best`` (tightest GPU that fits) for the others. Scores are the plugins'
integers (0..100, truncated as Go's ``int64()`` truncates), so their ties are the reference's
ties. The node with the highest score wins; ties go to the node whose name sorts first, and
the reference prefixes every node's name with a seeded random permutation index
(``syncClusterResourceList`` in pkg/simulator/simulator.go; ``selectHost`` in the vendored
k8s.io/kubernetes pkg/scheduler/core/generic_scheduler.go), so ties go to the lowest
``rank`` of a seeded permutation here.

Interface (small on purpose, for a later adaptation into the policy framework's placement
parts): ``choose(state, pod, candidates, rank, rng) -> (node, gpu_ids)``, where
``candidates`` are the feasible node indices (never empty).

Paper: FGD is the scheduling algorithm built on its fragmentation measure; the five others are
the baselines of its evaluation (section numbers not checked against the PDF here: the
simulator's plugins are the definitions followed).
"""

from __future__ import annotations

import math

import numpy as np

from shapeshift.errors import InputError
from shapeshift.gpushare.openb import MAX_GPUS_PER_NODE, MILLI
from shapeshift.gpushare.state import ClusterState, PodAsk

#: ``framework.MaxNodeScore`` of the Kubernetes scheduler.
MAX_SCORE = 100
#: ``MaxSpecCpu`` / ``MaxSpecGpu`` (pkg/type/open-gpu-share/utils/const.go): the largest node,
#: used to normalise Best-fit's and Dot-product's vectors.
MAX_SPEC_CPU = 128000
MAX_SPEC_GPU = 8000


def _pick(scores: np.ndarray, candidates: np.ndarray, rank: np.ndarray) -> int:
    best = scores == scores.max()
    tied = candidates[best]
    return int(tied[np.argmin(rank[tied])])


def _tightest_gpu(left_row: np.ndarray, pod: PodAsk) -> int:
    """``allocateGpuIdBasedOnBestFit``: the GPU with least milli left that fits, lowest index on ties."""
    masked = np.where(left_row >= pod.milli, left_row, MILLI + 1)
    return int(np.argmin(masked))


class Placement:
    """A scorer with the reference's node tie-break and the GPU choice of its configuration."""

    name = ""

    def scores(self, state: ClusterState, pod: PodAsk, candidates: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def gpus(self, state: ClusterState, node: int, pod: PodAsk, rng: np.random.Generator) -> tuple[int, ...]:
        if pod.num == 0:
            return ()
        if pod.shares:
            return (_tightest_gpu(state.left[node], pod),)
        return state.exclusive_gpus(node, pod)

    def choose(
        self, state: ClusterState, pod: PodAsk, candidates: np.ndarray, rank: np.ndarray, rng: np.random.Generator
    ) -> tuple[int, tuple[int, ...]]:
        node = _pick(self.scores(state, pod, candidates), candidates, rank)
        return node, self.gpus(state, node, pod, rng)


class RandomFit(Placement):
    """Random-fit: a feasible node uniformly at random (random_score.go, ``PreScore``) and a
    fitting GPU uniformly at random (``allocateGpuIdBasedOnRandomFit``, open_gpu_share.go)."""

    name = "random"

    def choose(self, state, pod, candidates, rank, rng):
        node = int(candidates[rng.integers(len(candidates))])
        if pod.shares:
            fits = np.flatnonzero(state.left[node] >= pod.milli)
            return node, (int(fits[rng.integers(len(fits))]),)
        return node, self.gpus(state, node, pod, rng)


class BestFit(Placement):
    """Best-fit (best_fit_score.go): ``int((1 - sum_i w_i (free_i - req_i) / max_i) * 100)`` over
    CPU and total GPU milli with weights 0.5/0.5 and the largest node as max, then the plugin's
    min-max ``NormalizeScore`` (plugin_utils.go) to 0..100 with integer division."""

    name = "best-fit"

    def scores(self, state, pod, candidates):
        cpu_free = state.cpu_left[candidates].astype(np.float64)
        gpu_free = state.left[candidates].sum(axis=1).astype(np.float64)
        s = np.zeros(len(candidates))
        s += (cpu_free - pod.cpu_score) / MAX_SPEC_CPU * 0.5
        s += (gpu_free - pod.total_milli) / MAX_SPEC_GPU * 0.5
        raw = np.trunc((1.0 - s) * MAX_SCORE).astype(np.int64)
        low, high = raw.min(), raw.max()
        if high == low:
            return np.zeros_like(raw)
        return (raw - low) * MAX_SCORE // (high - low)


class DotProduct(Placement):
    """Dot-product (dot_product_score.go, ``dimExtMethod: merge``, ``normMethod: max``): node
    free vector (CPU, total GPU milli) and pod request vector, each divided by the largest
    node; score ``int(100 * (1 - dot / 2))``: the smaller the dot product, the higher."""

    name = "dot-product"

    def scores(self, state, pod, candidates):
        node_cpu = state.cpu_left[candidates] / MAX_SPEC_CPU
        node_gpu = state.left[candidates].sum(axis=1) / MAX_SPEC_GPU
        dot = 0.0 + node_cpu * (pod.cpu_score / MAX_SPEC_CPU)
        dot = dot + node_gpu * (pod.total_milli / MAX_SPEC_GPU)
        return np.trunc(MAX_SCORE * (1 - dot / 2)).astype(np.int64)


class GpuPacking(Placement):
    """GPU packing (gpu_packing_score.go, ``getPackingScore``): prefer, in this order, GPUs
    already partly used (score 50..100, the fuller the better), then nodes partly used but
    needing idle GPUs (33..50), then idle nodes (0..33). CPU-only pods score 0 everywhere."""

    name = "gpu-packing"

    def scores(self, state, pod, candidates):
        if pod.milli <= 0:
            return np.zeros(len(candidates), dtype=np.int64)
        left = state.left[candidates]
        gpus = state.gpus[candidates]
        fully = state.fully[candidates]
        idle_node = fully == gpus
        score_idle = np.maximum(MAX_SCORE // 3 - fully, fully)
        if pod.shares:
            # The ascending scan takes the tightest fitting GPU.
            tight = np.where(left >= pod.milli, left, MILLI + 1).min(axis=1)
            uses_idle = (tight == MILLI).astype(np.int64)
            free_ratio = tight * 100 // MILLI
        else:
            uses_idle = np.full(len(candidates), pod.num, dtype=np.int64)
            free_ratio = np.zeros(len(candidates), dtype=np.int64)
        score_partial = np.where(
            uses_idle > 0,
            np.maximum(MAX_SCORE // 2 - uses_idle, MAX_SCORE // 3),
            np.maximum(MAX_SCORE - free_ratio // 10, MAX_SCORE // 2),
        )
        return np.where(idle_node, score_idle, score_partial)


class GpuClustering(Placement):
    """GPU clustering (gpu_clustering_score.go): put pods of the same GPU shape (partial, 1, 2,
    ... whole GPUs) together: 75..100 on nodes holding only that shape, 50..75 on nodes holding
    it among others, 25..50 on empty nodes, 0..25 elsewhere; within a band, the fuller node
    (``25 * (8000 - idle milli) / 8000``, integer). CPU-only pods score 0 everywhere."""

    name = "gpu-clustering"

    def scores(self, state, pod, candidates):
        if pod.num == 0:
            return np.zeros(len(candidates), dtype=np.int64)
        tags = state.tags[candidates]
        has = tags[:, pod.tag] > 0
        kinds = (tags > 0).sum(axis=1)
        base = (MAX_SCORE // 4) * (MAX_SPEC_GPU - state.left[candidates].sum(axis=1)) // MAX_SPEC_GPU
        band = np.where(has, np.where(kinds == 1, 3, 2), np.where(kinds == 0, 1, 0))
        return base + band * (MAX_SCORE // 4)


def _sigmoid_score(delta_milli: np.ndarray) -> np.ndarray:
    """``int64(sigmoid(delta / 1000) * 100)`` (fgd_score.go)."""
    return np.trunc(1.0 / (1.0 + np.exp(-(delta_milli / 1000.0))) * MAX_SCORE).astype(np.int64)


class FGD(Placement):
    """Fragmentation Gradient Descent (fgd_score.go, ``calculateGpuShareFragExtendScore``):
    the node and GPU whose placement least increases F_n(M), the node's fragmentation against
    the target workload; score ``int(sigmoid((F_before - F_after) / 1000) * 100)``. A partial-GPU
    pod tries every GPU that fits and keeps the first with the highest score; a whole-GPU pod
    takes the lowest-index idle GPUs; a CPU-only pod changes only CPU.

    Scores of a node for a pod shape are cached until the node changes (only the node that
    received the last pod does), which keeps each event O(nodes).
    """

    name = "fgd"

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._gpu_of: dict[int, int] = {}

    def _compute(self, state: ClusterState, pod: PodAsk, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        before = state.frag[rows]
        cpu_after = state.cpu_left[rows] - pod.cpu_score
        if pod.shares:
            k = len(rows)
            g = MAX_GPUS_PER_NODE
            left = np.repeat(state.left[rows], g, axis=0).reshape(k, g, g)
            fits = state.left[rows] >= pod.milli  # (k, g)
            left[:, np.arange(g), np.arange(g)] -= pod.milli
            after = state.measure(
                np.repeat(cpu_after, g), left.reshape(k * g, g), np.repeat(state.model[rows], g)
            ).reshape(k, g)
            score = np.where(fits, _sigmoid_score(before[:, None] - after), -1)
            gpu = np.argmax(score, axis=1)  # first index of the maximum
            return score[np.arange(k), gpu], gpu
        left = state.left[rows].copy()
        if pod.num:
            # nodeRes.Sub: ascending stable order, only idle GPUs fit a whole-GPU ask.
            idle = left == MILLI
            take = idle & (np.cumsum(idle, axis=1) <= pod.num)
            left[take] -= pod.milli
        after = state.measure(cpu_after, left, state.model[rows])
        return _sigmoid_score(before - after), np.full(len(rows), -1)

    def scores(self, state, pod, candidates):
        key = (pod.cpu_score, pod.milli, pod.num)
        if key not in self._cache:
            self._cache[key] = (
                np.zeros(state.n, np.int64),
                np.zeros(state.n, np.int64),
                np.full(state.n, -1, np.int64),
            )
        score, gpu, seen = self._cache[key]
        stale = candidates[seen[candidates] != state.version[candidates]]
        if len(stale):
            score[stale], gpu[stale] = self._compute(state, pod, stale)
            seen[stale] = state.version[stale]
        self._last_gpu = gpu
        return score[candidates]

    def gpus(self, state, node, pod, rng):
        if pod.shares:
            return (int(self._last_gpu[node]),)
        return super().gpus(state, node, pod, rng)


PLACEMENTS: dict[str, type[Placement]] = {
    cls.name: cls for cls in (RandomFit, DotProduct, GpuClustering, GpuPacking, BestFit, FGD)
}


def make_placement(name: str) -> Placement:
    """A fresh scorer by its published name; unknown names are an ``InputError``."""
    cls = PLACEMENTS.get(name)
    if cls is None:
        raise InputError(f"unknown placement {name!r}; choose from {', '.join(PLACEMENTS)}", field="--placement")
    return cls()


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))
