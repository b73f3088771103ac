"""The paper's fill experiment: pods only arrive, never leave; a pod that cannot be placed is dropped.

Arrival order, as the reference builds it (pkg/simulator/core.go ``Simulate``,
pkg/simulator/simulator.go ``SortClusterPods`` / ``TunePodsByNodeTotalResource``, run by
experiments/run_scripts/generate_run_scripts.py with ``--shuffle-pod=true -tune 1.3``):

1. the trace's pods sorted by name, then shuffled with the seed;
2. while the arrived GPU demand is below ``inflate`` x the cluster's GPU capacity, a pod of
   the original trace drawn uniformly (with replacement) is appended; the draw that would
   pass the target stops it. The reference tests ``demand + gpu_milli`` (milli of *one* GPU)
   against the target while adding the pod's total milli, so a multi-GPU copy can pass it a
   little; kept. Where the trace alone is above the target, pods drawn uniformly are removed
   until it is not (``tuneDownPods``).
3. Node ties are broken by a seeded permutation (``syncClusterResourceList``).

After every pod (placed or not) the cluster is measured as ``ClusterGpuFragReport`` does:
arrived GPU milli (every pod's request, placed or not), allocated GPU milli, fragmented GPU
milli (F_n(M) summed over nodes) and idle GPU milli.

Our random stream is numpy's PCG64, not Go's ``math/rand``: the same seed does not give the
reference's order, so compare medians over seeds.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from shapeshift.errors import InputError
from shapeshift.gpushare.frag import typical_pods
from shapeshift.gpushare.openb import NodeList, PodList
from shapeshift.gpushare.placement import make_placement
from shapeshift.gpushare.state import ClusterState, pod_asks


@dataclass(frozen=True, eq=False)
class Events:
    """One row per pod event, in arrival order (GPU amounts in milli)."""

    arrived_milli: np.ndarray
    allocated_milli: np.ndarray
    fragmented_milli: np.ndarray
    idle_milli: np.ndarray
    placed: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.placed)


@dataclass(frozen=True, eq=False)
class FillRun:
    """One placement's fill on one seed."""

    placement: str
    seed: int
    inflate: float
    total_gpus: int
    events: Events
    seconds: float
    typical_shapes: int

    @property
    def events_per_second(self) -> float:
        return len(self.events) / self.seconds if self.seconds > 0 else math.inf


def check_inflate(inflate: float) -> float:
    if not (isinstance(inflate, int | float) and math.isfinite(inflate) and inflate > 0):
        raise InputError(f"--inflate must be a finite number > 0, got {inflate}", field="--inflate")
    return float(inflate)


def arrival_order(pods: PodList, capacity_milli: int, inflate: float, rng: np.random.Generator) -> np.ndarray:
    """Indices into ``pods`` in arrival order (copies repeat an index)."""
    by_name = np.array(sorted(range(len(pods)), key=lambda i: pods.names[i]), dtype=np.int64)
    order = by_name[rng.permutation(len(pods))]
    total = pods.total_milli_gpu
    demand = int(total.sum())
    target = inflate * capacity_milli
    if demand > target:
        kept = list(order)
        while demand > target and kept:
            demand -= int(total[kept.pop(int(rng.integers(len(kept))))])
        return np.array(kept, dtype=np.int64)
    extra = []
    milli = pods.gpu_milli
    while True:
        i = int(by_name[rng.integers(len(pods))])
        if demand + int(milli[i]) > target:
            break
        demand += int(total[i])
        extra.append(i)
    return np.concatenate([order, np.array(extra, dtype=np.int64)])


def run_fill(
    nodes: NodeList,
    pods: PodList,
    placement: str,
    *,
    inflate: float = 1.3,
    seed: int = 42,
    threshold: float = 95.0,
) -> FillRun:
    """Replay ``pods`` onto ``nodes`` with ``placement``; see the module docstring."""
    inflate = check_inflate(inflate)
    scorer = make_placement(placement)
    if nodes.total_gpus == 0:
        raise InputError("the node list has no GPUs", field="--cluster")
    rng = np.random.default_rng(seed)
    typical = typical_pods(pods, threshold)
    state = ClusterState(nodes, typical)
    order = arrival_order(pods, state.capacity_milli, inflate, rng)
    by_name = sorted(range(len(nodes)), key=lambda i: nodes.names[i])
    rank = np.empty(len(nodes), dtype=np.int64)
    rank[by_name] = rng.permutation(len(nodes))
    asks = pod_asks(pods, state.models)

    n = len(order)
    arrived = np.zeros(n, np.int64)
    allocated = np.zeros(n, np.int64)
    fragmented = np.zeros(n, np.float64)
    idle = np.zeros(n, np.int64)
    placed = np.zeros(n, bool)
    arr = alloc = 0
    idle_now = state.capacity_milli
    frag_now = float(state.frag.sum())
    started = time.perf_counter()
    for e, i in enumerate(order):
        pod = asks[i]
        arr += pod.total_milli
        candidates = np.flatnonzero(state.feasible(pod))
        if len(candidates):
            node, gpus = scorer.choose(state, pod, candidates, rank, rng)
            state.place(node, gpus, pod)
            frag_now = float(state.frag.sum())
            alloc += pod.total_milli
            idle_now -= pod.total_milli
            placed[e] = True
        arrived[e], allocated[e], fragmented[e], idle[e] = arr, alloc, frag_now, idle_now
    seconds = time.perf_counter() - started
    return FillRun(
        placement=scorer.name,
        seed=seed,
        inflate=inflate,
        total_gpus=nodes.total_gpus,
        events=Events(arrived, allocated, fragmented, idle, placed),
        seconds=seconds,
        typical_shapes=len(typical),
    )
