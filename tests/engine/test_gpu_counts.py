"""Per-partition free-GPU counts (``engine/gpu_counts.py``): what best-fit placement and
the free-GPU totals read instead of scanning every node."""

from __future__ import annotations

import numpy as np
import pytest

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, ClusterSpec, JobSpec, NodeSpec, Resources
from shapeshift.policies.framework.placement import Consolidated


def _free() -> tuple[FreeResources, dict[str, np.ndarray]]:
    # Partition "a": nodes 0, 1 (8 GPUs each) and 3 (4 GPUs), not contiguous;
    # partition "b": node 2 (8 GPUs) alone.
    cluster = ClusterSpec(nodes=(NodeSpec("n0", 8, 64, 512), NodeSpec("n1", 8, 64, 512),
                                 NodeSpec("n2", 8, 64, 512), NodeSpec("n3", 4, 32, 256)))
    parts = {"a": np.array([0, 1, 3]), "b": np.array([2])}
    return FreeResources.of(cluster, parts), parts


def _take(free: FreeResources, node: int, gpus: int) -> None:
    free.take(Allocation(((node, Resources(gpus, 0.0, 0.0)),)))


def test_counts_follow_takes_and_gives():
    free, parts = _free()
    _take(free, 0, 3)  # node 0: 5 free
    _take(free, 1, 8)  # node 1: 0 free
    # a: nodes with 5, 0 and 4 free GPUs -> 9 in all; b untouched: 8.
    assert free.free_gpus_in(parts["a"]) == 9
    assert free.free_gpus_in(parts["b"]) == 8
    # Best fit for 4 GPUs in a: node 3 has exactly 4 (fewer than node 0's 5).
    assert free.smallest_fit(parts["a"], 4) == 4
    assert free.smallest_fit(parts["a"], 5) == 5
    assert free.smallest_fit(parts["a"], 6) is None  # no node of a has 6 free
    free.give(Allocation(((1, Resources(8, 0.0, 0.0)),)))
    assert free.smallest_fit(parts["a"], 6) == 8
    assert free.free_gpus_in(parts["a"]) == 17


def test_a_scratch_copy_counts_apart_from_the_original():
    free, parts = _free()
    scratch = free.copy()
    _take(scratch, 2, 8)
    assert scratch.free_gpus_in(parts["b"]) == 0 and scratch.smallest_fit(parts["b"], 1) is None
    assert free.free_gpus_in(parts["b"]) == 8 and free.smallest_fit(parts["b"], 1) == 8


def test_an_unregistered_node_array_is_read_off_the_arrays():
    free, parts = _free()
    _take(free, 0, 6)  # node 0: 2 free
    subset = np.array([0, 2])  # not a registered partition array (same nodes or not)
    assert free.free_gpus_in(subset) == 2 + 8
    assert free.smallest_fit(subset, 2) == 2
    assert free.smallest_fit(subset, 3) == 8
    assert free.free_gpus_in(parts["a"].copy()) == 2 + 8 + 4  # equal values, other array


def test_recount_after_writing_the_arrays():
    # CES hides powered-down nodes by zeroing their free resources in a scratch copy.
    free, parts = _free()
    scratch = free.copy()
    scratch.gpus[[0, 1]] = 0
    scratch.recount()
    assert scratch.free_gpus_in(parts["a"]) == 4
    assert scratch.smallest_fit(parts["a"], 5) is None


@pytest.mark.parametrize("registered", [True, False])
def test_consolidated_best_fit_with_and_without_counts(registered: bool):
    # Free GPUs per node of a: 5, 4, 4 (nodes 0, 1, 3). A 4-GPU job goes to the fewest
    # free that fit (4), lowest index on ties: node 1. A 5-GPU job fits node 0 only.
    free, parts = _free()
    _take(free, 0, 3)
    _take(free, 1, 4)
    nodes = parts["a"] if registered else parts["a"].copy()
    spec = JobSpec("j", 0.0, 4, 100.0)
    alloc = Consolidated().find(spec, nodes, free)
    assert alloc is not None and alloc.nodes == (1,)
    alloc = Consolidated().find(JobSpec("k", 0.0, 5, 100.0), nodes, free)
    assert alloc is not None and alloc.nodes == (0,)
    assert Consolidated().find(JobSpec("l", 0.0, 6, 100.0), nodes, free) is None


@pytest.mark.parametrize("registered", [True, False])
@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        # Free GPUs per node: 8, 8, 3 (node 2 holds 5 of its 8), 24 in all.
        (16, {0: 8, 1: 8}),  # two whole nodes, nothing left over
        (19, {0: 8, 1: 8, 2: 3}),  # two whole nodes and the rest (3) on the partly used node
        (20, None),  # the rest (4) fits no other node: the whole ones are taken, node 2 has 3
        (12, {0: 8, 1: 4}),  # one whole node; the rest (4) on the other whole node
    ],
)
def test_consolidated_spans_whole_nodes_then_the_best_fit_for_the_rest(
    registered: bool, gpus: int, expected: dict[int, int] | None
):
    cluster = ClusterSpec(nodes=tuple(NodeSpec(f"n{i}", 8, 64, 512) for i in range(3)))
    parts = {"": np.arange(3)}
    free = FreeResources.of(cluster, parts)
    _take(free, 2, 5)
    nodes = parts[""] if registered else parts[""].copy()
    alloc = Consolidated().find(JobSpec("j", 0.0, gpus, 100.0), nodes, free)
    got = None if alloc is None else {n: r.gpus for n, r in alloc.placement}
    assert got == expected


def test_a_reused_one_node_allocation_still_checks_the_host():
    # One-node allocations of a shape are built once and reused. Node 3 has 32 CPUs: a
    # 1-GPU job asking 20 CPUs fits there once; after 20 are taken only 12 are left, so
    # the same shape must be refused on node 3.
    from shapeshift.policies.framework.placement import allocation_for

    free, parts = _free()
    spec = JobSpec("j", 0.0, 1, 100.0, num_cpus=20.0)
    first = allocation_for(spec, {3: 1}, free)
    assert first is not None and first.placement == ((3, Resources(1, 20.0, 0.0)),)
    assert allocation_for(JobSpec("k", 0.0, 1, 100.0, num_cpus=20.0), {3: 1}, free) == first
    free.take(first)
    assert allocation_for(JobSpec("k", 0.0, 1, 100.0, num_cpus=20.0), {3: 1}, free) is None
    # Consolidated: node 3 has the fewest free GPUs that fit (3 after the take) but its
    # host is short of CPUs: the next best fit with them, node 0 (8 free, lower index
    # than node 1).
    alloc = Consolidated().find(JobSpec("k", 0.0, 1, 100.0, num_cpus=20.0), parts["a"], free)
    assert alloc is not None and alloc.nodes == (0,)
