"""Tiny traces whose every JCT is computed by hand (see the comments)."""

from __future__ import annotations

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.engine.state import JobState
from shapeshift.model import Allocation, ClusterSpec, NodeSpec, Resources, Schedule
from shapeshift.policies.framework.composed import AcceptAll, ComposedPolicy
from shapeshift.policies.framework.placement import Consolidated
from shapeshift.policies.framework.registry import make_policy
from tests.conftest import by_id, jcts, job, run


def test_fifo_head_of_line_blocking():
    # 1 node x 4 GPUs. a: 0-100 on 2 GPUs. b (4 GPUs) waits for a: 100-150.
    # c (1 GPU) fits at t=2 but strict FIFO keeps it behind b: 150-160.
    trace = [job("a", 0, 2, 100), job("b", 1, 4, 50), job("c", 2, 1, 10)]
    result = run(trace, "1x4")
    assert jcts(result) == {"a": 100, "b": 149, "c": 158}
    assert by_id(result)["c"].first_start == 150


def test_fifo_backfill_lets_small_jobs_pass_a_blocked_head():
    # Same trace with backfill: c runs 2-12 in the 2 GPUs a leaves free; b still starts at 100.
    trace = [job("a", 0, 2, 100), job("b", 1, 4, 50), job("c", 2, 1, 10)]
    result = run(trace, "1x4", args={"backfill": "true"})
    assert jcts(result) == {"a": 100, "b": 149, "c": 10}


def _three_job_fragmentation(placement: str):
    # 2 nodes x 4 GPUs; a and b take 3 GPUs each (100 s); c needs 2 GPUs (50 s).
    trace = [job("a", 0, 3, 100), job("b", 0, 3, 100), job("c", 0, 2, 50)]
    return run(trace, "2x4", args={"placement": placement})


def test_consolidated_keeps_jobs_on_one_node_and_waits_for_a_whole_fit():
    # Consolidated: a on node 0, b on node 1, one GPU free on each; c (2 GPUs, fits on one
    # node) waits for a and b: 100-150.
    result = _three_job_fragmentation("consolidated")
    assert jcts(result) == {"a": 100, "b": 100, "c": 150}


def test_scattered_spreads_jobs_and_runs_into_fragments():
    # Scattered (worst fit, one GPU at a time): a = 2+1, b = 1+2, c = 1+1: all start at 0.
    result = _three_job_fragmentation("scattered")
    assert jcts(result) == {"a": 100, "b": 100, "c": 50}


def test_placements_are_recorded_per_node():
    seen = {}

    class Recorder(ComposedPolicy):
        def decide(self, view):
            schedule = super().decide(view)
            seen.update({j: a for j, a in schedule.changes.items() if a is not None})
            return schedule

    from shapeshift.policies.framework.composed import FifoOrdering

    policy = Recorder("rec", AcceptAll(), FifoOrdering(), Consolidated())
    run([job("a", 0, 3, 10), job("b", 0, 3, 10), job("c", 0, 12, 10)], "4x4", policy)
    assert seen["a"].placement == ((0, Resources(3)),)
    assert seen["b"].placement == ((1, Resources(3)),)
    # c (12 GPUs) is larger than a node, so it needs three whole free nodes: only nodes 2
    # and 3 are whole while a and b run, so c waits for them and then takes three whole nodes.
    assert seen["c"].gpus == 12 and len(seen["c"].nodes) == 3


class ShortestRemainingFirst:
    """A minimal preemptive ordering, defined here so the engine's preemption path is tested
    independently of the policy library."""

    name = "test-srtf"
    preemptive = True

    def order(self, view, partition, jobs):
        return sorted(jobs, key=lambda j: (view.remaining(j), j))


def _srtf():
    return ComposedPolicy("test-srtf", AcceptAll(), ShortestRemainingFirst(), Consolidated())


@pytest.mark.parametrize(("penalty", "expected_a"), [(30.0, 150.0), (0.0, 120.0)])
def test_preemption_pays_the_restore_penalty(penalty, expected_a):
    # 1 GPU. a (100 s) runs from 0; b (20 s) arrives at 10 and preempts a (90 s left).
    # b: 10-30. a restarts at 30, restores for `penalty`, then runs 90 s.
    result = run([job("a", 0, 1, 100), job("b", 10, 1, 20)], "1x1", _srtf(), overheads=Overheads(0.0, penalty))
    assert jcts(result) == {"a": expected_a, "b": 20}
    a = by_id(result)["a"]
    assert a.preemptions == 1 and a.first_start == 0
    # a held the GPU 0-10 and 30-end, restore pause included.
    assert a.run_seconds == pytest.approx(10 + (expected_a - 30))


def test_helios_restore_rule_by_gpu_count():
    overheads = Overheads(restore_penalty="helios")
    assert [overheads.restore(g) for g in (1, 2, 8, 9, 64)] == [7, 30, 30, 60, 60]
    result = run([job("a", 0, 1, 100), job("b", 10, 1, 20)], "1x1", _srtf(), overheads=overheads)
    assert jcts(result)["a"] == 30 + 7 + 90


def test_launch_delay_applies_to_every_launch():
    result = run([job("a", 0, 1, 100), job("b", 0, 1, 10)], "1x1", overheads=Overheads(launch_delay=5))
    # a: 0 + 5 + 100 = 105; b starts at 105: 105 + 5 + 10 = 120.
    assert jcts(result) == {"a": 105, "b": 120}


class Scripted:
    """Returns pre-written schedules, one per decision: exercises reconciliation directly."""

    name = "scripted"
    triggers = frozenset({"arrival", "completion"})
    default_round = None

    def __init__(self, script):
        self.script = list(script)

    def decide(self, view):
        desired = self.script.pop(0)(view) if self.script else dict(view.allocations)
        return Schedule.replace(view.allocations, desired)


def test_reconfiguration_moves_a_job_and_pays_the_pause():
    # a (1 GPU, 100 s) starts on node 0. At 10, b arrives; the script moves a to node 1 and
    # puts b on node 0. a has 90 s left, pauses 30 s: ends at 10 + 30 + 90 = 130.
    on = lambda n: Allocation(((n, Resources(1)),))  # noqa: E731
    script = [lambda v: {"a": on(0)}, lambda v: {"a": on(1), "b": on(0)}]
    result = run([job("a", 0, 1, 100), job("b", 10, 1, 10)], "2x1", Scripted(script))
    assert jcts(result) == {"a": 130, "b": 10}
    a = by_id(result)["a"]
    assert (a.reconfigurations, a.preemptions) == (1, 0)


def test_schedule_that_over_allocates_is_refused():
    from shapeshift.policies.framework.base import PolicyError

    both_on_0 = [lambda v: {"a": Allocation(((0, Resources(1)),)), "b": Allocation(((0, Resources(1)),))}]
    with pytest.raises(PolicyError, match="over-allocates"):
        run([job("a", 0, 1, 10), job("b", 0, 1, 10)], "2x1", Scripted(both_on_0))


def _partitioned() -> ClusterSpec:
    nodes = tuple(NodeSpec(f"n{i}", gpus=4, cpus=32, mem_gb=256) for i in range(3))
    return ClusterSpec(nodes, partitions={"vc1": ("n0", "n1"), "vc2": ("n2",)})


def test_jobs_that_can_never_fit_are_rejected_and_the_run_goes_on():
    trace = [
        job("ok", 0, 4, 10, vc="vc2"),
        job("too-big", 0, 8, 10, vc="vc2"),  # vc2 has 4 GPUs
        job("unknown", 0, 1, 10, vc="vc9"),
        job("none", 0, 1, 10),  # every node is in a named partition
        job("fits-vc1", 1, 8, 10, vc="vc1"),
    ]
    result = run(trace, _partitioned())
    states = {j.job_id: j.state for j in result.jobs}
    assert states == {
        "ok": JobState.COMPLETED,
        "too-big": JobState.REJECTED,
        "unknown": JobState.REJECTED,
        "none": JobState.REJECTED,
        "fits-vc1": JobState.COMPLETED,
    }
    reasons = {r.job_id: r.reason for r in result.rejections}
    assert "8 GPUs" in reasons["too-big"] and "vc2" in reasons["too-big"]
    assert "vc9" in reasons["unknown"]


def test_partitions_are_isolated():
    # vc2 is busy; a vc2 job waits even though vc1 has free GPUs.
    trace = [job("x", 0, 4, 100, vc="vc2"), job("y", 1, 4, 10, vc="vc2")]
    assert jcts(run(trace, _partitioned())) == {"x": 100, "y": 109}


def test_cpu_and_memory_are_enforced():
    # One node with 4 GPUs but 8 CPUs: two jobs of 1 GPU + 6 CPUs cannot share it.
    node = NodeSpec("n0", gpus=4, cpus=8, mem_gb=64)
    trace = [job("a", 0, 1, 10, num_cpus=6), job("b", 0, 1, 10, num_cpus=6)]
    assert jcts(run(trace, ClusterSpec((node,)))) == {"a": 10, "b": 20}


def test_round_timer_triggers_round_based_policies():
    # A round-only policy sees arrivals only at round boundaries (multiples of 60 s).
    policy = ComposedPolicy(
        "rounds", AcceptAll(), ShortestRemainingFirst(), Consolidated(), triggers=frozenset({"round"})
    )
    result = run([job("a", 5, 1, 100)], "1x1", policy, round_seconds=60)
    a = by_id(result)["a"]
    assert a.first_start == 60 and a.end_time == 160


def test_slo_attainment_counts_restore_pauses_as_missed():
    # g is guaranteed (100 s on 1 GPU). It runs 0-10 at full speed, is preempted by b,
    # relaunches at 30, restores for 30 s (no progress) and runs 60-150.
    # Held: 10 + 120 = 130 s; at target speed: 10 + 90 = 100 s.
    from shapeshift.analysis.metrics import summarize

    result = run([job("g", 0, 1, 100, guaranteed=True), job("b", 10, 1, 20)], "1x1", _srtf())
    g = by_id(result)["g"]
    assert (g.run_seconds, g.slo_met_seconds) == (130, 100)
    assert summarize(result)["slo_attainment"] == pytest.approx(100 / 130, abs=1e-6)
    assert summarize(run([job("b", 0, 1, 10)], "1x1"))["slo_attainment"] is None


def test_each_completion_is_reported_once_to_the_next_decision():
    # FIFO on 1 GPU: a ends at 10, b at 30, c at 35. Every decision sees exactly the jobs
    # that completed since the previous one, in completion order.
    seen = []
    fifo = make_policy("fifo")

    class Spy:
        name, triggers, default_round = "spy", fifo.triggers, None

        def decide(self, view):
            seen.append((view.now, view.finished))
            return fifo.decide(view)

    run([job("a", 0, 1, 10), job("b", 0, 1, 20), job("c", 5, 1, 5)], "1x1", Spy())
    assert [(t, f) for t, f in seen if f] == [(10, ("a",)), (30, ("b",)), (35, ("c",))]
    assert sum(len(f) for _, f in seen) == 3


def test_a_job_finishing_as_another_arrives_finishes_first():
    """0.1 + 0.2 is 0.30000000000000004 in floating point. a (submitted at
    0.1, 0.2 s) finishes at 0.3, the instant b arrives; LAS must not preempt the finishing
    job for b. Expected: a ends at 0.3, no preemption."""
    from shapeshift.engine.overheads import Overheads

    policy = make_policy("las", {"mode": "event"})
    result = run([job("a", 0.1, 1, 0.2), job("b", 0.3, 1, 1000)], "1x1", policy, overheads=Overheads(0.0, 30.0))
    a = by_id(result)["a"]
    assert a.end_time == pytest.approx(0.3, abs=1e-9) and a.preemptions == 0


def test_a_policy_can_ask_to_decide_at_an_exact_instant():
    """``Schedule.wake_at``: a policy that starts nothing until t = 123.5 gets a decision at
    exactly 123.5 with no event there, and the job starts then."""
    from shapeshift.model import Allocation, Resources, Schedule

    class StartAt:
        name, triggers, default_round = "start-at", frozenset({"arrival", "completion"}), None

        def decide(self, view):
            changes = {}
            if view.now >= 123.5:
                for j in view.pending(""):
                    changes[j] = Allocation(((0, Resources(1)),))
            return Schedule(base=view.allocations, changes=changes, wake_at=None if changes else 123.5)

    result = run([job("a", 0, 1, 10)], "1x1", StartAt())
    assert by_id(result)["a"].first_start == 123.5 and by_id(result)["a"].end_time == 133.5
