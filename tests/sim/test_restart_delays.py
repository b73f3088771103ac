"""The Sia artifact's per-application restart delays (``--restore-penalty sia-artifact``).

Expected pauses are the artifact's ``applications.py`` ``rescale_time`` values (CIFAR-10
50 s, ImageNet 250 s, any other application 30 s), charged on every start, the first one
included, once (its ``Job.reallocate`` restarts the countdown whenever the placement
changes, from none too).
"""

from __future__ import annotations

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.model import Allocation, ClusterSpec, NodeSpec, Resources
from shapeshift.policies.framework.composed import AcceptAll, ComposedPolicy
from shapeshift.policies.framework.placement import Consolidated
from tests.conftest import by_id, jcts, job, run
from tests.sim.test_simulator_exact import Scripted

SIA = Overheads(restore_penalty="sia-artifact")


def test_the_rule_reads_the_application_from_the_model():
    assert SIA.restore(4, "pollux/cifar10") == 50
    assert SIA.restore(1, "pollux/imagenet") == 250
    assert SIA.restore(2, "pollux/ncf") == 15
    # Another source's model, even with a Pollux application's name: the artifact's 30 s.
    assert SIA.restore(2, "bert") == 30
    assert SIA.restore(2, "") == 30


def test_a_first_start_pays_the_applications_delay():
    # 1 x 2 GPUs, both jobs start at 0: cifar10 0 + 50 + 100 = 150; imagenet 0 + 250 + 100 = 350.
    trace = [job("c", 0, 1, 100, model="pollux/cifar10"), job("i", 0, 1, 100, model="pollux/imagenet")]
    assert jcts(run(trace, "1x2", overheads=SIA)) == {"c": 150, "i": 350}


def test_a_numeric_penalty_still_spares_the_first_start():
    trace = [job("c", 0, 1, 100, model="pollux/cifar10")]
    assert jcts(run(trace, "1x1", overheads=Overheads(restore_penalty=50.0))) == {"c": 100}


class _ShortestRemainingFirst:
    name = "test-srtf"
    preemptive = True

    def order(self, view, partition, jobs):
        return sorted(jobs, key=lambda j: (view.remaining(j), j))


def test_a_relaunch_after_a_preemption_pays_one_delay_not_a_launch_plus_a_restore():
    # 1 GPU. a (imagenet, 1000 s of work) starts at 0, pauses 250 s, works 250-300 (50 s
    # done). b (cifar10, 20 s) arrives at 300 and preempts a: b pauses 50 s, works 350-370.
    # a relaunches at 370, pauses 250 s once, then works its 950 s left: 370 + 250 + 950.
    policy = ComposedPolicy("test-srtf", AcceptAll(), _ShortestRemainingFirst(), Consolidated())
    trace = [job("a", 0, 1, 1000, model="pollux/imagenet"), job("b", 300, 1, 20, model="pollux/cifar10")]
    result = run(trace, "1x1", policy, overheads=SIA)
    assert jcts(result) == {"a": 370 + 250 + 950, "b": 70}
    assert by_id(result)["a"].preemptions == 1


@pytest.mark.parametrize(("model", "delay"), [("pollux/cifar10", 50), ("pollux/yolov3", 80), ("other", 30)])
def test_a_reconfiguration_pays_the_applications_delay(model, delay):
    # 2 nodes x 2 GPUs. a (2 GPUs, 1000 s) starts on node 0 at 0 and pauses `delay`: at
    # 200, when b arrives, it has done 200 - delay. Moved to one GPU on each node (its
    # placement (2,) becomes (1, 1)), it pauses `delay` again and ends at
    # 200 + delay + (1000 - (200 - delay)) = 1000 + 2 x delay.
    split = Allocation(((0, Resources(1)), (1, Resources(1))))
    script = [
        lambda v: {"a": Allocation(((0, Resources(2)),))},
        lambda v: {"a": split, "b": Allocation(((1, Resources(1)),))},
    ]
    trace = [job("a", 0, 2, 1000, model=model), job("b", 200, 1, 10)]
    result = run(trace, "2x2", Scripted(script), overheads=SIA)
    assert jcts(result)["a"] == 1000 + 2 * delay
    # b (model "") starts at 200 with the artifact's default 30 s.
    assert jcts(result)["b"] == 30 + 10


def test_the_rule_is_named_on_the_command_line_and_an_unknown_name_is_refused():
    assert Overheads.parse_penalty("sia-artifact") == "sia-artifact"
    with pytest.raises(ValueError, match="sia-artifact"):
        Overheads(restore_penalty="sia")


SIA30 = Overheads(restore_penalty="sia-artifact-30")


def test_the_uniform_rule_charges_30_s_once_on_every_start_move_and_relaunch():
    # The artifact's homogeneous and uncalibrated settings set every rescale_time to 30 s.
    # Same scenario as the relaunch test above, every delay 30 s: a works 30-300 (270 s
    # done); b pauses 30 s, works 330-350; a relaunches at 350 and pauses 30 s once,
    # then works its 730 s left: 350 + 30 + 730 = 1110. (A launch delay of 30 s plus a
    # restore penalty of 30 s would charge the relaunch 60 s: 1140.)
    assert SIA30.restore(4, "pollux/imagenet") == 30
    assert SIA30.start(4, "pollux/bert", relaunch=False) == SIA30.start(4, "pollux/bert", relaunch=True) == 30
    policy = ComposedPolicy("test-srtf", AcceptAll(), _ShortestRemainingFirst(), Consolidated())
    trace = [job("a", 0, 1, 1000, model="pollux/imagenet"), job("b", 300, 1, 20, model="pollux/cifar10")]
    assert jcts(run(trace, "1x1", policy, overheads=SIA30)) == {"a": 1110, "b": 50}


def test_the_artifact_rules_let_a_job_move_free_to_nodes_of_the_same_shape():
    # The artifact's Job.reallocate restarts the countdown only when the placement, the
    # GPUs per node in node order, changes. 2 nodes x 2 GPUs, a (2 GPUs, 1000 s) starts
    # on node 0 and pauses 30 s. At 200 (b arrives) it moves:
    # - to node 1, shape (2,) -> (2,): free, a ends at 30 + 1000 = 1030;
    # - to one GPU on each node, shape (2,) -> (1, 1): a second 30 s, ends at 1060.
    # b (1 GPU, 10 s) pauses 30 s at its start: 40.
    both = Allocation(((0, Resources(2)),))
    moved = {
        "same": (Allocation(((1, Resources(2)),)), Allocation(((0, Resources(1)),))),
        "split": (Allocation(((0, Resources(1)), (1, Resources(1)))), Allocation(((1, Resources(1)),))),
    }
    ends = {}
    for name, (a_to, b_on) in moved.items():
        script = [lambda v: {"a": both}, lambda v, a_to=a_to, b_on=b_on: {"a": a_to, "b": b_on}]
        trace = [job("a", 0, 2, 1000), job("b", 200, 1, 10)]
        result = run(trace, "2x2", Scripted(script), overheads=SIA30)
        ends[name] = jcts(result)
    assert ends == {"same": {"a": 1030, "b": 40}, "split": {"a": 1060, "b": 40}}
    # A numeric penalty charges any move: 1000 + 30.
    result = run(
        [job("a", 0, 1, 1000), job("b", 200, 1, 10)],
        "2x1",
        Scripted(
            [
                lambda v: {"a": Allocation(((0, Resources(1)),))},
                lambda v: {"a": Allocation(((1, Resources(1)),)), "b": Allocation(((0, Resources(1)),))},
            ]
        ),
        overheads=Overheads(restore_penalty=30.0),
    )
    assert jcts(result)["a"] == 1030


def test_a_free_move_during_the_countdown_leaves_the_rest_of_it():
    # The artifact's Job.reallocate neither restarts nor ends the countdown when the
    # placement is unchanged: the delay left goes on. 2 nodes x 2 GPUs, a (2 GPUs,
    # 1000 s) starts on node 0 at 0 and pauses 30 s; at 10 (b arrives) it moves to node
    # 1, the same shape: 20 s of its pause are left, so it works from 30 and ends at
    # 1030, as if it had not moved (not at 10 + 1000 = 1010, the pause dropped). b (1
    # GPU, 10 s) starts at 10 on node 0 and pauses 30 s: ends at 50, a JCT of 40.
    script = [
        lambda v: {"a": Allocation(((0, Resources(2)),))},
        lambda v: {"a": Allocation(((1, Resources(2)),)), "b": Allocation(((0, Resources(1)),))},
    ]
    result = run([job("a", 0, 2, 1000), job("b", 10, 1, 10)], "2x2", Scripted(script), overheads=SIA30)
    assert jcts(result) == {"a": 1030, "b": 40}
    assert SIA30.move(
        Allocation(((0, Resources(2)),)), Allocation(((1, Resources(2)),)), "pollux/cifar10", countdown=20.0
    ) == 20.0


def test_a_move_of_the_same_shape_to_another_gpu_type_restarts():
    # The artifact keeps a job on one GPU type ("cluster"); a move to another type goes
    # through Job.migrate, which restarts the countdown whatever the shape. Two nodes of
    # 2 GPUs, node 0 of type "t4", node 1 of type "a100", both running at the same speed
    # (the trace's own duration): a (2 GPUs, 1000 s) starts on node 0 and pauses 30 s;
    # at 200 it moves to node 1, shape (2,) -> (2,) but another type: a second 30 s,
    # so a ends at 30 + 1000 + 30 = 1060. b (1 GPU, 10 s) starts at 200 on node 0 and
    # pauses 30 s: 40.
    cluster = ClusterSpec(
        nodes=(
            NodeSpec(name="n0", gpus=2, cpus=16, mem_gb=64, gpu_type="t4"),
            NodeSpec(name="n1", gpus=2, cpus=16, mem_gb=64, gpu_type="a100"),
        )
    )
    script = [
        lambda v: {"a": Allocation(((0, Resources(2)),))},
        lambda v: {"a": Allocation(((1, Resources(2)),)), "b": Allocation(((0, Resources(1)),))},
    ]
    result = run([job("a", 0, 2, 1000), job("b", 200, 1, 10)], cluster, Scripted(script), overheads=SIA30)
    assert jcts(result) == {"a": 1060, "b": 40}
