"""The Sia artifact's heterogeneity-unaware Pollux (``pollux`` with ``unaware=true``):
virtual nodes, the majority-type reduction and one model over all types, worked by hand
from the artifact's rules (``sia-simulator/cluster_unaware.py``) and on the toy two-type
profile of ``tests/perf/test_pollux_typed.py``."""

from __future__ import annotations

from shapeshift.engine.engine import Engine
from shapeshift.engine.view import ClusterView
from shapeshift.model import BatchSpec, ClusterSpec, JobSpec, NodeSpec
from shapeshift.perf.pollux.goodput import BatchLimits, step_time
from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth
from shapeshift.perf.pollux.knowledge import JobGoodput, fitted_params, merged_params
from shapeshift.policies.goodput.pollux import PolluxParams, PolluxPolicy
from shapeshift.policies.goodput.unaware import (
    majority_type,
    reference_limits,
    smallest_type,
    to_real,
    to_virtual,
    virtual_nodes,
)
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor
from tests.perf.test_pollux_typed import _profiles


def test_nodes_split_into_virtual_nodes_of_the_smallest_node():
    # The artifact's default cluster in small: a 4-GPU node and two 8-GPU nodes give
    # int(8 / 4) = 2 virtual nodes each: 1 + 2 + 2, numbered over the nodes in order.
    assert virtual_nodes({0: 4, 1: 8, 2: 8}) == {0: 0, 1: 1, 2: 1, 3: 2, 4: 2}
    # int(6 / 4) = 1: a 6-GPU node beside a 4-GPU one is one virtual node (2 GPUs unused).
    assert virtual_nodes({0: 4, 1: 6}) == {0: 0, 1: 1}
    assert virtual_nodes({}) == {}


def test_a_mixed_allocation_keeps_the_gpus_of_its_majority_type():
    vnodes = {0: 0, 1: 1, 2: 1}  # node 0 (4 GPUs, aws), node 1 (8 GPUs, dgx-ext)
    types = {0: "aws", 1: "dgx-ext"}
    # 3 aws GPUs against 1 dgx-ext: the dgx-ext GPU is dropped.
    assert majority_type({0: 3, 1: 1}, vnodes, types) == {0: 3}
    # 2 against 2: the artifact's prio_order keeps dgx-ext (0) over aws (4).
    assert majority_type({0: 2, 1: 2}, vnodes, types) == {1: 2}
    # 4 aws against 8 dgx-ext over two virtual nodes of one node: the 8 stay.
    assert majority_type({0: 4, 1: 4, 2: 4}, vnodes, types) == {1: 4, 2: 4}
    # One type: unchanged. Types the artifact does not list tie by name.
    assert majority_type({1: 4, 2: 1}, vnodes, types) == {1: 4, 2: 1}
    assert majority_type({0: 1, 1: 1}, vnodes, {0: "b", 1: "a"}) == {1: 1}


def test_a_real_placement_fills_its_nodes_virtual_nodes_in_order():
    vnodes = {0: 0, 1: 1, 2: 1}
    # 6 GPUs on node 1: its first virtual node (4), then 2 on the second.
    assert to_virtual({1: 6}, vnodes, 4, {}) == {1: 4, 2: 2}
    # With 2 GPUs of virtual node 1 held by another job: 2 there, 4 on virtual node 2.
    assert to_virtual({1: 6}, vnodes, 4, {1: 2}) == {1: 2, 2: 4}
    assert to_real({1: 4, 2: 2, 0: 1}, vnodes) == {0: 1, 1: 6}


def test_the_merged_model_lies_between_the_types_it_merges(tmp_path):
    root = str(_profiles(tmp_path).resolve())
    # One type merged is that type's own fit; a type without its own profile adds the
    # untyped rows.
    assert merged_params(root, "toy", ("slow",)) == fitted_params(root, "toy", "slow")
    assert merged_params(root, "toy", ("other",)) == fitted_params(root, "toy", None)
    # fast measured 0.025 s and slow 0.05 s at local batch 16 on one GPU: one model over
    # both rows predicts a step between the two.
    both = float(step_time(merged_params(root, "toy", ("fast", "slow")), 1, 1, 16))
    assert 0.025 < both < 0.05


def _noisy_job_first_decision(tmp_path, **params):
    """One toy job on a 2-GPU slow node and a 4-GPU fast node, its gradients so noisy
    (grad_var 1000 x grad_sqr) that a larger batch loses almost no efficiency: the
    allocation ``pollux`` with ``params`` gives it at 60 s, and the policy. The profiles
    are written under ``tmp_path`` (made if missing)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    root = _profiles(tmp_path)
    noisy = "progress,iteration,metric,grad_sqr,grad_var\n100,100,0.5,1.0,1000.0\n200,200,0.6,1.0,1000.0\n"
    for name in ("validation-32.csv", "validation-128.csv"):
        (root / "toy" / name).write_text(noisy)
    cluster = ClusterSpec((NodeSpec("s0", 2, 16, 64, gpu_type="slow"), NodeSpec("f0", 4, 16, 64, gpu_type="fast")))
    truth = PolluxGroundTruth(root, tuple(n.gpu_type for n in cluster.nodes))
    policy = PolluxPolicy(PolluxParams(profiles=str(root), explore=False, **params))
    engine = Engine(cluster, policy, SimulatedExecutor(truth, CompletionQueue()))
    batch = BatchSpec(32, 32, 128, 16, 64, adaptive=True)
    engine.submit(JobSpec("a", 0.0, 1, iterations=1, model="pollux/toy", batch=batch), 0.0)
    schedule = policy.decide(ClusterView(engine, 60.0, frozenset({""}), True))
    return schedule.changes["a"], policy


def test_unaware_pollux_reduces_a_mixed_allocation_to_its_majority_type(tmp_path):
    # A 2-GPU slow node and a 4-GPU fast node; one toy job whose gradients are so noisy
    # (grad_var 1000 x grad_sqr) that a larger batch loses almost no efficiency, so the
    # optimiser gives it every GPU: plain Pollux 6 over both nodes (checked). Unaware,
    # the same 6 GPUs are the three 2-GPU virtual nodes, 2 slow and 4 fast: the majority
    # type keeps the 4 fast GPUs and drops the slow ones.
    got = {}
    for unaware in (False, True):
        where = tmp_path / f"unaware-{unaware}"
        alloc, policy = _noisy_job_first_decision(where, unaware=unaware, unaware_cap="cluster")
        got[unaware] = {n: r.gpus for n, r in alloc.placement}
    assert got[False] == {0: 2, 1: 4}
    assert got[True] == {1: 4}
    # The policy remembers the virtual placement it kept: both virtual nodes of node 1.
    assert policy._virtual["a"][1] == {1: 2, 2: 2}


def test_a_job_gets_at_most_the_gpus_of_the_type_with_fewest():
    # The artifact's default cluster: 6 x 4 aws (24 GPUs), 2 x 8 dgx-ext (16), 3 x 8 rtx
    # (24): min(24, 16, 24) = 16 GPUs for any one job (max_num_replicas).
    nodes = {i: ("aws", 4) for i in range(6)}
    nodes |= {6 + i: ("dgx-ext", 8) for i in range(2)} | {8 + i: ("rtx", 8) for i in range(3)}
    assert smallest_type(nodes) == 16
    assert smallest_type({}) == 0


def test_unaware_pollux_caps_a_job_at_the_smallest_type(tmp_path):
    # test_unaware_pollux_reduces_a_mixed_allocation_to_its_majority_type's setting (one
    # job worth every GPU; 2 slow + 4 fast): with the artifact's cap the slow type's 2
    # GPUs bound the job, so it gets 2 where without the cap it got the 4 fast ones.
    alloc, _ = _noisy_job_first_decision(tmp_path, unaware=True)
    assert alloc.gpus == 2


def test_unaware_speedups_assume_the_reference_types_batch_range(tmp_path):
    # The toy's fast profile measured local batches 16 and 32: a job whose own range is
    # 16..64 is valued, unaware, over 16..32, whatever type it runs on (the artifact reads
    # applications['aws']). No reference type, or one without its own profile: unchanged.
    root = str(_profiles(tmp_path).resolve())
    table = JobGoodput(None, (1.0, 0.0), BatchLimits(32, 128, 16, 64), True)
    assert reference_limits(table, root, "pollux/toy", "fast").limits == BatchLimits(32, 128, 16, 32)
    assert reference_limits(table, root, "pollux/toy", "slow").limits == BatchLimits(32, 128, 16, 64)
    assert reference_limits(table, root, "pollux/toy", "").limits == table.limits
    assert reference_limits(table, root, "pollux/toy", "other").limits == table.limits
