"""The Sia artifact's Gavel placement (``priority=sia-artifact``), worked by hand from
``sia-simulator/gavel.py`` (``schedule_jobs_on_workers``, ``assign_workers_to_job``): a
type's GPUs numbered node by node, jobs taken widest first, each keeping last round's
GPUs where none was handed out before it, the others taking the next GPUs from a cursor
that only moves forward."""

from __future__ import annotations

from shapeshift.policies.framework.registry import make_policy
from shapeshift.policies.gavel.artifact_workers import assign_workers, gpus_by_node
from tests.conftest import by_id, job, run
from tests.policies.gavel.test_gavel import Recorder

ARTIFACT = {"priority": "sia-artifact", "rounds": "grid"}


def test_a_job_takes_the_next_free_gpus_across_nodes():
    # Two nodes of 4 GPUs. j0 (3 GPUs) keeps (0,0)-(0,2) from last round. j1 (2 GPUs,
    # new): the cursor starts at (0,0), passes the three j0 holds and takes (0,3), then
    # (1,0): one GPU on each node, although node 1 is empty.
    out = assign_workers([("j1", 2), ("j0", 3)], [0, 1], [4, 4], {"j0": ((0, 0), (0, 1), (0, 2))})
    assert out == {"j0": ((0, 0), (0, 1), (0, 2)), "j1": ((0, 3), (1, 0))}
    assert gpus_by_node(out["j1"]) == {0: 1, 1: 1}


def test_a_wider_job_is_placed_first_and_can_take_a_narrower_jobs_gpus():
    # j0 (2 GPUs) held (0,0), (0,1). j1 (4 GPUs, new) is placed first (widest first)
    # from the cursor at (0,0): all of node 0. Then j0's old GPUs are taken, so it takes
    # the next ones, (1,0), (1,1).
    out = assign_workers([("j0", 2), ("j1", 4)], [0, 1], [4, 4], {"j0": ((0, 0), (0, 1))})
    assert out == {"j1": ((0, 0), (0, 1), (0, 2), (0, 3)), "j0": ((1, 0), (1, 1))}
    # Jobs of the same width go in grant order; a kept job of that width claims its GPUs
    # before any new one of that width moves the cursor: j2 keeps (0,2), (0,3); j3 (new,
    # granted before j2) takes (0,0), (0,1).
    out = assign_workers([("j3", 2), ("j2", 2)], [0, 1], [4, 4], {"j2": ((0, 2), (0, 3))})
    assert out == {"j2": ((0, 2), (0, 3)), "j3": ((0, 0), (0, 1))}


def test_the_artifact_rounds_spread_a_job_over_partly_used_nodes():
    # Two nodes of 4 GPUs, rounds of 360 s on a grid. a (3 GPUs) arrives at 0 and gets
    # (0,0)-(0,2) in the first round. b (2 GPUs) arrives at 10 and waits for the round at
    # 360, where both are granted (5 of 8 GPUs): a keeps its GPUs, b takes (0,3) and (1,0)
    # as in the first test. Gavel's own rounds place b consolidated, 2 GPUs on node 1.
    trace = [job("a", 0, 3, 1000), job("b", 10, 2, 1000)]
    policy = Recorder(make_policy("gavel", ARTIFACT))
    result = run(trace, "2x4", policy)
    b = policy.first["b"]
    assert b.nodes == (0, 1) and [res.gpus for _, res in b.placement] == [1, 1]
    assert by_id(result)["b"].first_start == 360 and by_id(result)["a"].preemptions == 0
    own = Recorder(make_policy("gavel", {"rounds": "grid", "priority": "age"}))
    run(trace, "2x4", own)
    assert own.first["b"].nodes == (1,)
