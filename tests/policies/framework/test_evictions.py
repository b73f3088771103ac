"""Tentative evictions: a placement is tried only when it could succeed, and the
decisions are those of evicting and trying after every victim."""

from __future__ import annotations

import random
import types

import numpy as np
import pytest

from shapeshift.cluster import ClusterSpec, NodeSpec
from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, Resources
from shapeshift.policies.framework.decisions import PartitionDecision
from shapeshift.policies.framework.evictions import Evictions
from shapeshift.policies.framework.placement import Consolidated, FirstFit, Yarn
from shapeshift.policies.framework.registry import make_policy
from tests.conftest import job, run

#: What a consolidated placement answers before each try.
SURE = Consolidated().cannot_fit


def _free(gpus_per_node: list[int], free_gpus: list[int]) -> tuple[FreeResources, np.ndarray]:
    """A partition of the given nodes, ``free_gpus`` of each free (8 CPUs, 64 GB per GPU)."""
    cluster = ClusterSpec(
        tuple(NodeSpec(name=f"n{i}", gpus=g, cpus=8 * g, mem_gb=64 * g) for i, g in enumerate(gpus_per_node))
    )
    nodes = np.arange(len(gpus_per_node))
    free = FreeResources.of(cluster, {"p": nodes})
    free.gpus[:] = free_gpus
    free.recount()
    return free, nodes


def _cannot(placement, gpus: int, free: FreeResources, nodes: np.ndarray) -> bool:
    histogram = free.histogram_in(nodes)
    assert histogram is not None
    return placement.cannot_fit(gpus, histogram, nodes, free)


def test_consolidated_and_yarn_tell_sure_failures_from_the_counts():
    # Four nodes of 8 GPUs with 8, 3, 0 and 5 free.
    free, nodes = _free([8, 8, 8, 8], [8, 3, 0, 5])
    consolidated, yarn = Consolidated(), Yarn()
    # 6 GPUs: node 0 has them free, so it may fit.
    assert not _cannot(consolidated, 6, free, nodes)
    # 16 GPUs: one whole node (node 0) and the other 8 must come from a partly used node
    # with 8 free, which cannot exist: surely fails for both.
    assert _cannot(consolidated, 16, free, nodes)
    assert _cannot(yarn, 16, free, nodes)
    # 12 GPUs: node 0 whole, 4 more from a node with at least 4 free (node 3's 5): may fit.
    assert not _cannot(consolidated, 12, free, nodes)
    assert consolidated.find(job("w", 0, 12, 1), nodes, free) is not None
    # 7 GPUs with node 0 busy too: no node has 7 free.
    free2, nodes2 = _free([8, 8, 8, 8], [0, 3, 0, 5])
    for placement in (consolidated, yarn, FirstFit()):
        assert _cannot(placement, 7, free2, nodes2)


@pytest.mark.parametrize("placement", [Consolidated(), FirstFit(), Yarn()], ids=lambda p: p.name)
def test_a_sure_failure_is_never_a_placement(placement):
    """``cannot_fit`` may say "may fit" too often, never "cannot" for a job ``find`` places."""
    rng = random.Random(7)
    said_cannot = 0
    for _ in range(400):
        sizes = rng.choice([[8] * 4, [4] * 6, [8, 8, 4, 4], [2, 8, 8]])
        free, nodes = _free(sizes, [rng.randint(0, g) for g in sizes])
        gpus = rng.choice([1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24])
        if _cannot(placement, gpus, free, nodes):
            said_cannot += 1
            assert placement.find(job("x", 0, gpus, 1), nodes, free) is None, (sizes, free.gpus, gpus)
    assert said_cannot > 30  # the check is exercised, not vacuous


def _alloc(node: int, gpus: int) -> Allocation:
    return Allocation(((node, Resources(gpus, 8 * gpus, 64 * gpus)),))


def test_a_victim_is_given_back_only_when_a_placement_could_then_succeed():
    # Two 8-GPU nodes: node 0 free, node 1 held by victim v. A 16-GPU newcomer cannot fit
    # on 8 free GPUs; with v evicted both nodes are whole, so it may, and v is given back.
    free, nodes = _free([8, 8], [8, 0])
    changes: dict[str, Allocation | None] = {}
    evictions = Evictions(free, nodes, {"v": _alloc(1, 8)}, changes, whole_gpus=True, cannot_fit=SURE)
    assert not evictions.ready_for(16)
    evictions.evict("v")
    assert int(free.gpus[1]) == 0 and changes == {}  # counted, not given back yet
    assert evictions.ready_for(16)
    assert int(free.gpus[1]) == 8 and changes == {"v": None}


def test_victims_counted_late_are_all_counted_on_their_nodes():
    # Two 8-GPU nodes with 0 and 3 free; a and b hold 4 GPUs each on node 0, c 3 on node 1.
    # An 8-GPU job needs one node with 8 free. After a: 7 free in all (< 8), so the counts
    # alone say no and nothing is counted by node. After c (node 1: 6 free, node 0: 4):
    # 10 free, but no node has 8, so no. After b: node 0 has 8 free, so it may fit: the
    # node counts must hold a and b together (4 + 4 on node 0), though a was evicted
    # while only the free total was looked at.
    free, nodes = _free([8, 8], [0, 3])
    changes: dict[str, Allocation | None] = {}
    current = {"a": _alloc(0, 4), "b": _alloc(0, 4), "c": _alloc(1, 3)}
    evictions = Evictions(free, nodes, current, changes, whole_gpus=True, cannot_fit=SURE)
    evictions.evict("a")
    assert not evictions.ready_for(8)
    evictions.evict("c")
    assert not evictions.ready_for(8)
    evictions.evict("b")
    assert evictions.ready_for(8)
    assert free.gpus.tolist() == [8, 6] and list(changes) == ["a", "c", "b"]


def test_a_victim_that_cannot_help_stays_where_it_is():
    # Node 0 has 4 free; node 1 is full, 4 of its GPUs held by victim v. An 8-GPU job
    # needs one node with 8 free: with v gone node 1 has 4, so it surely fails: v is
    # never given back, and restoring leaves everything as it was.
    free, nodes = _free([8, 8], [4, 0])
    changes: dict[str, Allocation | None] = {}
    evictions = Evictions(free, nodes, {"v": _alloc(1, 4)}, changes, whole_gpus=True, cannot_fit=SURE)
    evictions.evict("v")
    assert evictions.free_count() == 8  # as if given back, for the waiting reason
    assert not evictions.ready_for(8)
    evictions.restore()
    assert changes == {} and free.gpus.tolist() == [4, 0]


def _evict_and_try_after_each_victim(self, view, partition, free, newcomers, victims, first_lease):
    """The rule without shortcuts: give each victim back at once and try after each one
    (without sharing, only once enough GPUs are free in the partition)."""
    changes, reasons = {}, {}
    nodes = view.partitions[partition]
    current = view.allocations
    evicted: list[str] = []
    next_victim = 0
    for job_id in newcomers:
        spec = view.job(job_id).spec
        alloc = self.placement.find(spec, nodes, free)
        while alloc is None and next_victim < len(victims):
            victim = victims[next_victim]
            next_victim += 1
            free.give(current[victim])
            changes[victim] = None
            evicted.append(victim)
            if free.free_gpus_in(nodes) < spec.num_gpus:
                continue
            alloc = self.placement.find(spec, nodes, free)
        if alloc is None:
            reasons[job_id] = self._explain(view, partition, spec.num_gpus, free.free_gpus_in(nodes))
            if first_lease is not None:
                self._wake_when_lease_ends(partition, first_lease)
                reasons[job_id] += f"; running jobs hold their GPUs until their lease ends ({first_lease:g} s)"
            continue
        changes[job_id] = alloc
        free.take(alloc)
    for victim in reversed(evicted):
        alloc = current[victim]
        if free.fits(alloc):
            free.take(alloc)
            del changes[victim]
    return PartitionDecision(changes, reasons)


def _recorded(policy):
    """Run ``policy``'s decisions through, recording every schedule's changes (in order)
    and reasons."""
    log = []
    decide = policy.decide

    def recording(view):
        schedule = decide(view)
        log.append((view.now, list(schedule.changes.items()), dict(schedule.reasons)))
        return schedule

    policy.decide = recording
    return log


@pytest.mark.parametrize(
    ("name", "args", "inner"),
    [
        ("srtf", {"lease": "0"}, None),
        ("srtf", {}, None),
        ("srtf", {"placement": "yarn"}, None),
        ("las", {"mode": "event", "lease": "0"}, None),
        ("themis", {}, "_lease"),
    ],
)
def test_decisions_equal_evicting_and_trying_after_every_victim(name, args, inner):
    # Wide jobs (12, 16, 24 GPUs) on four 8-GPU nodes under a queue: newcomers that rank
    # above running jobs but cannot be placed, the case the shortcut is for.
    rng = random.Random(3)
    t, trace = 0.0, []
    for i in range(150):
        t += rng.choice([0, 10, 30, 90])
        trace.append(job(f"j{i:03d}", t, rng.choice([1, 2, 4, 8, 8, 12, 16, 24]), float(rng.randint(20, 3000))))
    fast, plain = make_policy(name, args), make_policy(name, args)
    target = getattr(plain, inner) if inner else plain
    target._place_newcomers = types.MethodType(_evict_and_try_after_each_victim, target)
    fast_log, plain_log = _recorded(fast), _recorded(plain)
    a, b = run(trace, "4x8", fast), run(trace, "4x8", plain)
    assert fast_log == plain_log
    assert [(j.job_id, j.end_time, j.preemptions) for j in a.jobs] == [
        (j.job_id, j.end_time, j.preemptions) for j in b.jobs
    ]
    assert sum(j.preemptions for j in a.jobs) > 0  # evictions happened
