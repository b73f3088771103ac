"""SJF, SRTF and LAS on hand-computed traces; the incremental heap path equals the sort path."""

from __future__ import annotations

import random
from typing import ClassVar

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec, NodeSpec
from shapeshift.policies.framework import estimators
from shapeshift.policies.framework.base import PartTraits
from shapeshift.policies.framework.composed import AcceptAll, ComposedPolicy
from shapeshift.policies.framework.estimators import OracleEstimator, make_estimator
from shapeshift.policies.framework.placement import Consolidated
from shapeshift.policies.framework.registry import make_policy
from shapeshift.policies.size_based.las import LeastAttainedService
from shapeshift.policies.size_based.sjf import ShortestJobFirst, ShortestRemainingFirst
from tests.conftest import by_id, jcts, job, run


def test_sjf_starts_the_shortest_waiting_job_and_never_preempts():
    # 1 GPU. a runs 0-100. b (50 s) and c (10 s) wait; c is shorter: c 100-110, b 110-160.
    result = run([job("a", 0, 1, 100), job("b", 1, 1, 50), job("c", 2, 1, 10)], "1x1", "sjf")
    assert jcts(result) == {"a": 100, "b": 159, "c": 108}
    assert all(j.preemptions == 0 for j in result.jobs)


@pytest.mark.parametrize(("penalty", "expected_a"), [(30.0, 150.0), (0.0, 120.0)])
def test_srtf_preempts_for_a_shorter_arrival_and_pays_the_penalty(penalty, expected_a):
    # a (100 s) runs from 0; b (20 s) arrives at 10, a has 90 s left: b runs 10-30.
    # a resumes at 30, restores for `penalty`, then runs its last 90 s.
    srtf = make_policy("srtf", {"lease": "0"})  # preempt at once, as the Helios simulator does
    result = run([job("a", 0, 1, 100), job("b", 10, 1, 20)], "1x1", srtf, overheads=Overheads(0.0, penalty))
    assert jcts(result) == {"a": expected_a, "b": 20}
    assert by_id(result)["a"].preemptions == 1


def test_srtf_lease_keeps_a_fresh_job_running_until_it_ends():
    # Default lease 300 s (Blox's round). a (1,000 s) starts at 0; b (20 s) arrives at 10.
    # a may not be preempted before 300: the policy decides again at exactly 300, b runs
    # 300-320, a resumes at 320 with 700 s left (penalty 0): ends at 1,020.
    result = run([job("a", 0, 1, 1000), job("b", 10, 1, 20)], "1x1", "srtf", overheads=Overheads(0.0, 0.0))
    assert by_id(result)["b"].first_start == 300
    assert jcts(result) == {"a": 1020, "b": 310}


@pytest.mark.parametrize("args", [{}, {"mode": "event"}], ids=["srtf", "las-event"])
def test_a_lease_wake_up_survives_decisions_in_other_partitions(args):
    # Two VCs of one 1-GPU node each, no restart penalty. In vc a, a1 (1,000 s) starts at
    # 0; a2 (50 s) arrives at 10 and outranks it (SRTF: 50 < 990 s left; LAS: no service
    # yet), but a1 holds its 300 s lease: a2 starts when it ends, at 300, and runs
    # 300-350; a1 resumes at 350 with 700 s left and ends at 1,050. b1 arriving in vc b
    # at 100 (runs 100-120) must change nothing in vc a: the decision it causes is vc b's.
    # (It once replaced vc a's wake-up with vc b's none, and a2 waited until 1,000.)
    policy = "srtf" if not args else "las"
    cluster = ClusterSpec(
        tuple(NodeSpec(f"n{i}", gpus=1, cpus=8, mem_gb=64) for i in range(2)), partitions={"a": ("n0",), "b": ("n1",)}
    )
    for other in ([], [job("b1", 100, 1, 20, vc="b")]):
        trace = [job("a1", 0, 1, 1000, vc="a"), job("a2", 10, 1, 50, vc="a"), *other]
        jobs = by_id(run(trace, cluster, policy, args={"lease": "300", **args}, overheads=Overheads(0.0, 0.0)))
        assert (jobs["a2"].first_start, jobs["a2"].end_time, jobs["a1"].end_time) == (300, 350, 1050)


def test_srtf_does_not_preempt_for_a_longer_arrival():
    result = run([job("a", 0, 1, 100), job("b", 10, 1, 200)], "1x1", "srtf")
    assert jcts(result) == {"a": 100, "b": 290}
    assert by_id(result)["a"].preemptions == 0


#: Continuous LAS in GPU-seconds without a lease (the event-driven variant).
EVENT_LAS = {"mode": "event", "lease": "0", "service": "gpu-time"}


def test_las_lets_a_newcomer_with_no_service_preempt():
    # a runs 0-10 (10 GPU-s); b (0 GPU-s) arrives at 10 and preempts it: b 10-60, a 60-150.
    las = make_policy("las", EVENT_LAS)
    result = run([job("a", 0, 1, 100), job("b", 10, 1, 50)], "1x1", las, overheads=Overheads(0.0, 0.0))
    assert jcts(result) == {"a": 150, "b": 50}
    assert by_id(result)["a"].preemptions == 1


def test_las_measures_service_in_gpu_seconds():
    # 1 node x 4 GPUs. a (2 GPUs) and b (1 GPU) run from 0. At 10, a has 20 GPU-s and b 10.
    # c (2 GPUs) arrives: ranking c (0) < b (10) < a (20); c and b fit the 4 GPUs, a does
    # not, so a is evicted (by plain seconds a and b would tie and a would stay).
    # c runs 10-20; a resumes at 20 with 90 s left (penalty 0): ends at 110.
    trace = [job("a", 0, 2, 100), job("b", 0, 1, 100), job("c", 10, 2, 10)]
    result = run(trace, "1x4", make_policy("las", EVENT_LAS), overheads=Overheads(0.0, 0.0))
    assert by_id(result)["a"].preemptions == 1 and by_id(result)["b"].preemptions == 0
    assert jcts(result) == {"a": 110, "b": 100, "c": 10}


def test_las_by_default_ranks_every_round_by_seconds_held_as_blox():
    # Blox LAS: decisions only at 300 s rounds, service = seconds held, one-round lease.
    # 1x1. a (1,000 s) arrives at 0 and starts at the first round (0); b (100 s) arrives at
    # 10 and waits for the round at 300, where it has 0 s against a's 300 s: b runs
    # 300-400. a resumes at the round at 600 (GPUs freed at 400 wait for the round) with
    # 700 s left (penalty 0): ends at 1,300.
    result = run([job("a", 0, 1, 1000), job("b", 10, 1, 100)], "1x1", "las", overheads=Overheads(0.0, 0.0))
    assert by_id(result)["b"].first_start == 300 and by_id(result)["a"].end_time == 1300


class _Reverse:
    """Test estimator: claims long jobs are short."""

    name = "reverse"
    needs_history = False
    static = True

    def estimate(self, job):
        return 1000.0 - job.spec.duration

    def observe(self, job):
        return None


class _Learner:
    """Test estimator that records what it is fed."""

    name = "learner"
    needs_history = True
    static = False
    seen: ClassVar[list[str]] = []

    def estimate(self, job):
        return 1.0

    def observe(self, job):
        assert job.end_time is not None
        _Learner.seen.append(job.job_id)


@pytest.fixture
def extra_estimators():
    estimators.ESTIMATORS["reverse"] = _Reverse
    estimators.ESTIMATORS["learner"] = _Learner
    _Learner.seen = []
    yield
    del estimators.ESTIMATORS["reverse"], estimators.ESTIMATORS["learner"]


def test_estimator_parameter_changes_the_order(extra_estimators):
    trace = [job("a", 0, 1, 100), job("b", 1, 1, 50), job("c", 2, 1, 10)]
    result = run(trace, "1x1", "sjf", {"estimator": "reverse"})
    # "reverse" believes b (950) is shorter than c (990): b 100-150, c 150-160.
    assert jcts(result) == {"a": 100, "b": 149, "c": 158}


def test_history_estimators_are_fed_every_finished_job_in_end_order(extra_estimators):
    trace = [job("a", 0, 1, 30), job("b", 1, 1, 20), job("c", 2, 1, 10)]
    run(trace, "1x1", "srtf", {"estimator": "learner"})
    assert _Learner.seen == ["a", "b", "c"]


def test_unknown_estimator_is_an_input_error_listing_the_known_ones():
    with pytest.raises(InputError, match="oracle"):
        make_policy("sjf", {"estimator": "crystal-ball"})
    with pytest.raises(InputError, match="oracle"):
        make_estimator("crystal-ball")
    assert make_estimator("oracle").static and isinstance(make_estimator("oracle"), OracleEstimator)


class _AllButNotAll(AcceptAll):
    traits = PartTraits(partition_local=True)  # not admits_all: forces the sort-every-decision path


def _random_trace(seed: int, n: int = 60):
    rng = random.Random(seed)
    t = 0.0
    jobs = []
    for i in range(n):
        t += rng.choice([0, 0, 5, 20, 60])
        jobs.append(job(f"j{i:02d}", t, rng.choice([1, 1, 2, 3, 4, 8]), float(rng.randint(1, 400))))
    return jobs


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    "make_ordering",
    [
        lambda: ShortestJobFirst(OracleEstimator()),
        lambda: ShortestRemainingFirst(OracleEstimator()),
        LeastAttainedService,
    ],
)
def test_incremental_queue_gives_the_same_schedule_as_sorting(seed, make_ordering):
    trace = _random_trace(seed)
    fast = ComposedPolicy("fast", AcceptAll(), make_ordering(), Consolidated(), head_of_line_blocking=False)
    slow = ComposedPolicy("slow", _AllButNotAll(), make_ordering(), Consolidated(), head_of_line_blocking=False)
    assert fast._queues is not None and slow._queues is None
    a, b = run(trace, "2x4", fast), run(trace, "2x4", slow)
    assert jcts(a) == jcts(b)
    assert [j.preemptions for j in a.jobs] == [j.preemptions for j in b.jobs]


_EVERY_QUEUEING_POLICY = [
    ("sjf", {}),
    ("sjf", {"backfill": "true"}),
    ("srtf", {}),
    ("las", {}),
    ("fifo", {"backfill": "true"}),
    ("tiresias", {}),
    ("tiresias", {"starvation": 2}),
    ("themis", {}),
    ("optimus", {}),
    ("qssf", {}),
    ("gavel", {}),
    ("gavel", {"priority": "age"}),
    ("gavel", {"rounds": "grid", "fill": "true"}),
]


def _engine(policy: str, args: dict, gpus: int):
    from shapeshift.engine.engine import Engine
    from shapeshift.perf.throughput import TraceSpeedModel
    from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor
    from tests.conftest import shorthand_cluster

    cluster = shorthand_cluster(1, gpus)
    return Engine(cluster, make_policy(policy, args), SimulatedExecutor(TraceSpeedModel(cluster), CompletionQueue()))


def _stop_outside_a_decision(engine, job_id: str, now: float) -> None:
    """What the live controller does when a worker fails: a reconcile without a decision."""
    from shapeshift.model import Schedule

    engine.reconcile(Schedule(base=dict(engine.allocations), changes={job_id: None}), now)


@pytest.mark.parametrize(("policy", "args"), _EVERY_QUEUEING_POLICY)
def test_a_job_requeued_between_decisions_does_not_hide_jobs_submitted_before_it(policy, args):
    """The live runtime re-queues a failed job outside any decision, behind the jobs
    submitted since the last decision. Bugs: the incremental queues found new jobs by
    scanning the waiting queue backwards to the first job they knew, so they stopped at
    the re-queued job and never saw the job submitted before it; tiresias went on
    counting the re-queued job as running.

    1 node x 2 GPUs. t=0: j (1 GPU) arrives and starts. t=1: x (1 GPU) arrives, then j fails
    and is re-queued. The next decision must start both: 2 GPUs, two 1-GPU jobs."""
    from shapeshift.engine.state import JobState

    engine = _engine(policy, args, 2)
    engine.submit(job("j", 0, 1, 100), 0.0)
    engine.fire_timer()  # round-based policies decide on the timer
    engine.step(0.0)
    assert engine.jobs["j"].state is JobState.RUNNING
    engine.submit(job("x", 1, 1, 50), 1.0)
    _stop_outside_a_decision(engine, "j", 1.0)
    engine.fire_timer()
    engine.step(1.0)
    assert engine.jobs["x"].state is JobState.RUNNING
    assert engine.jobs["j"].state is JobState.RUNNING


@pytest.mark.parametrize(("policy", "args"), _EVERY_QUEUEING_POLICY)
def test_jobs_withdrawn_between_decisions_free_their_place(policy, args):
    """1 node x 1 GPU: j runs, x waits. x is cancelled; j fails for good (stopped, then
    withdrawn, as the controller does). y arrives at t=2: the GPU is free, y must start.
    Bug: tiresias went on counting j as running, so y waited forever."""
    from shapeshift.engine.state import JobState

    engine = _engine(policy, args, 1)
    engine.submit(job("j", 0, 1, 100), 0.0)
    engine.submit(job("x", 0, 1, 100), 0.0)
    engine.fire_timer()
    engine.step(0.0)
    running = [j for j in ("j", "x") if engine.jobs[j].state is JobState.RUNNING]
    assert len(running) == 1
    first, second = running[0], ({"j", "x"} - set(running)).pop()
    for job_id in (second, first):  # the waiting one is cancelled; the running one fails for good
        status = engine.jobs[job_id]
        if status.state is JobState.RUNNING:
            _stop_outside_a_decision(engine, job_id, 1.0)
        del engine.pending[status.partition][job_id]
        status.state = JobState.UNFINISHED
        engine.progress_changed(job_id)
    engine.submit(job("y", 2, 1, 100), 2.0)
    engine.fire_timer()
    engine.step(2.0)
    assert engine.jobs["y"].state is JobState.RUNNING
