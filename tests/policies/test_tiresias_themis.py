"""Tiresias (discretized 2D-LAS, promotion, model-aware placement) and Themis (finish-time fairness)."""

from __future__ import annotations

import pytest

from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.overheads import Overheads
from shapeshift.model import Allocation, Resources
from shapeshift.perf.throughput import TraceSpeedModel
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from tests.conftest import by_id, jcts, job, run

NONE = Overheads(0.0, 0.0)  # the reference simulator charges no checkpoint-restore pause


def test_tiresias_demotes_a_long_job_at_its_exact_limit_and_a_newcomer_overtakes_it():
    # dlas-gpu with one limit of 100 GPU-s. a (1 GPU, 1,000 s) runs from 0; b (50 s) arrives
    # at 10: both in queue 0 and running jobs stay ahead, so a keeps the GPU. At exactly
    # 100 (no event there: the reference's jump_time), a reaches 100 GPU-s -> queue 1, and
    # b (queue 0) preempts it: b 100-150, a resumes at 150 with 900 s left: ends 1,050.
    result = run([job("a", 0, 1, 1000), job("b", 10, 1, 50)], "1x1", "tiresias", {"thresholds": "100"}, overheads=NONE)
    assert jcts(result) == {"a": 1050, "b": 140}
    assert by_id(result)["a"].preemptions == 1 and by_id(result)["b"].first_start == 100


def test_tiresias_default_limits_are_the_reference_simulators():
    # queue_limit = [3250, 7200] GPU-s: a 2-GPU job is demoted after 1,625 s of running.
    # a (2 GPUs, 5,000 s) from 0 on 1x2; b (2 GPUs, 100 s) at 10 waits in queue 0 behind
    # running a until a is demoted at 1,625, then runs 1,625-1,725; a ends at 5,100.
    result = run([job("a", 0, 2, 5000), job("b", 10, 2, 100)], "1x2", "tiresias", overheads=NONE)
    assert by_id(result)["b"].first_start == 1625 and jcts(result) == {"a": 5100, "b": 1715}


def test_tiresias_keeps_running_jobs_ahead_of_waiting_ones_in_the_last_queue():
    # Limit 100 GPU-s, two queues. x runs 0-100 and drops to queue 1 behind y (queue 0),
    # which runs 100-200 and drops too, behind x (entered queue 1 first, and running jobs
    # lead their queue): at 200 x resumes (it entered queue 1 first) and runs to the end
    # (1,100) although y, waiting, is older than x's restart: no preemptive FIFO inside the
    # last queue. y then runs its last 900 s: 1,100-2,000.
    trace = [job("x", 0, 1, 1000), job("y", 10, 1, 1000)]
    result = run(trace, "1x1", "tiresias", {"thresholds": "100"}, overheads=NONE)
    assert jcts(result) == {"x": 1100, "y": 1990}
    assert by_id(result)["x"].preemptions == 1 and by_id(result)["y"].preemptions == 1


def test_tiresias_starvation_knob_promotes_a_waiting_job():
    # As above with starvation k = 1 (the reference's solve_starvation). At 200, x has run
    # 100 s since it entered queue 0 and waited 100 s: promoted to queue 0, it runs 200-300
    # while y (demoted at 200) waits; at 300 x drops to queue 1 and y, having waited 100 s
    # after running 100 s, is promoted. The two alternate in 100 s slices: x runs
    # 0-100, 200-300, ..., 1,800-1,900 (ends 1,900), y 100-200, ..., 1,900-2,000.
    trace = [job("x", 0, 1, 1000), job("y", 10, 1, 1000)]
    result = run(trace, "1x1", "tiresias", {"thresholds": "100", "starvation": "1"}, overheads=NONE)
    assert jcts(result) == {"x": 1900, "y": 1990}
    assert by_id(result)["x"].preemptions == 9 and by_id(result)["y"].preemptions == 9


def _fragmented(model: str):
    # 2 nodes x 4 GPUs; a and b take 3 GPUs on each node, leaving 1 + 1 free. c needs 2.
    trace = [job("a", 0, 3, 1000), job("b", 0, 3, 1000), job("c", 1, 2, 10, model=model)]
    return by_id(run(trace, "2x4", "tiresias", {"thresholds": "1e9"}))["c"]


def test_tiresias_spreads_placement_insensitive_models_and_consolidates_the_rest():
    assert _fragmented("resnet50").first_start == 1  # insensitive: takes 1 + 1 across nodes
    assert _fragmented("vgg16").first_start == 1000  # sensitive: waits for a whole node
    assert _fragmented("some-new-model").first_start == 1000  # unknown: consolidated


def test_tiresias_skew_placement_consolidates_only_models_with_skewed_tensors():
    # Tiresias Sec. 3.3 with the reference's profiled tensors: VGG-16's largest tensor is
    # 74% of the model (consolidated: waits for a node), ResNet-50's 11% (spread at once).
    # Transformer is not profiled: the reference takes it as Inception-3 (14%) and spreads
    # it, where the catalog flag ("Tiresias+", the default) consolidates it.
    def first_start(model: str, placement: str) -> float:
        trace = [job("a", 0, 3, 1000), job("b", 0, 3, 1000), job("c", 1, 2, 10, model=model)]
        return by_id(run(trace, "2x4", "tiresias", {"thresholds": "1e9", "placement": placement}))["c"].first_start

    assert first_start("vgg16", "skew") == 1000 and first_start("resnet50", "skew") == 1
    assert first_start("transformer", "skew") == 1 and first_start("transformer", "model-aware") == 1000


def test_a_spread_placement_sensitive_job_runs_slower_with_the_placement_model():
    # trace-placement (default changed by issue 18: Gavel's measured figures replace the
    # approximate 1.3x). Transformer at batch 64 on 2 V100s, Gavel's
    # simulation_throughputs.json: 15.876 steps/s on one server, 7.005 spread, so spread
    # over 2 nodes when one could hold its 2 GPUs it runs at 7.005 / 15.876 (the
    # "generic" GPUs of a shorthand cluster take the V100 figures). On one node, or with a
    # model Gavel did not measure and Tiresias does not flag (inception3), or with the
    # plain trace model, at full speed.
    cluster = shorthand_cluster(2, 4)
    model = TraceSpeedModel(cluster, placement_slowdown=True)
    spread = Allocation(((0, Resources(1)), (1, Resources(1))))
    packed = Allocation(((0, Resources(2)),))
    assert model.rate(job("t", 0, 2, 10, model="transformer"), spread) == pytest.approx(7.005 / 15.876)
    assert model.rate(job("t", 0, 2, 10, model="transformer"), packed) == 1.0
    assert model.rate(job("r", 0, 2, 10, model="inception3"), spread) == 1.0
    assert TraceSpeedModel(cluster).rate(job("t", 0, 2, 10, model="transformer"), spread) == 1.0
    # In a run: the skew rule spreads c (10 s of work) at t = 1 over the 1 + 1 free GPUs;
    # at 7.005 / 15.876 of full speed it ends at 1 + 10 * 15.876 / 7.005.
    trace = [job("a", 0, 3, 1000), job("b", 0, 3, 1000), job("c", 1, 2, 10, model="transformer")]
    policy = make_policy("tiresias", {"thresholds": "1e9", "placement": "skew"})
    result = simulate(trace, cluster, policy, throughput=model, overheads=NONE)
    assert by_id(result)["c"].end_time == pytest.approx(1 + 10 * 15.876 / 7.005)


def test_tiresias_decides_only_at_events_and_demotion_instants():
    # One long job alone: decisions at its arrival, its two demotions (3,250 and 7,200 GPU-s
    # on 1 GPU) and its completion; no periodic timer.
    result = run([job("a", 0, 1, 10000)], "1x1", "tiresias", overheads=NONE)
    assert result.decisions == 4


def test_themis_gives_the_next_lease_to_the_job_with_the_worst_rho():
    # 1 GPU, leases of 100 s, Themis's knob f = 0.8 (offer to the worst 20%, at least one
    # job). a (1000 s) runs from 0; b (100 s) and c (500 s) arrive at 10. At 100, T_ideal
    # uses each job's average contention: a 1 job for 10 s then 3 for 90 s: 2.8; b and c 3.
    # rho = (elapsed + remaining) / (duration * N_avg): a 1000 / 2800 = 0.36,
    # b 190 / 300 = 0.63, c 590 / 1500 = 0.39. b is offered the lease, a is preempted. b ends
    # at 200: a (200 + 900) / (1000 * 580 / 200) = 0.38, c 690 / 1500 = 0.46: c gets it.
    trace = [job("a", 0, 1, 1000), job("b", 10, 1, 100), job("c", 10, 1, 500)]
    result = run(trace, "1x1", "themis", {"round": "100"})
    jobs = by_id(result)
    assert jobs["b"].first_start == 100 and jobs["c"].first_start == 200
    assert jobs["a"].preemptions >= 1 and jcts(result)["b"] == 190


def test_themis_ideal_time_uses_the_average_contention_over_the_jobs_lifetime():
    # 1 GPU, leases of 100 s. a (1000 s) alone from 0 to 50, then b (200 s) arrives.
    # At 100: a has N_avg = (50 x 1 + 50 x 2) / 100 = 1.5, so rho_a = (100 + 900) / 1500
    # = 0.67 > rho_b = (50 + 200) / (200 x 2) = 0.63: a keeps the GPU. At 200: rho_a =
    # 1000 / (1000 x 350 / 200) = 0.57 < rho_b = 350 / 400 = 0.875: b runs 200-400.
    # With the current contention (2 for both) at 100: rho_a = 0.5 < rho_b: b runs 100-300.
    trace = [job("a", 0, 1, 1000), job("b", 50, 1, 200)]
    average = by_id(run(trace, "1x1", "themis", {"round": "100"}))
    assert average["b"].first_start == 200 and average["b"].end_time == 400
    current = by_id(run(trace, "1x1", "themis", {"round": "100", "contention": "current"}))
    assert current["b"].first_start == 100 and current["b"].end_time == 300


def test_themis_offers_leases_only_to_the_worst_one_minus_f_of_jobs():
    # 2 GPUs on one node, leases of 100 s. a1, a2 (1000 s) run from 0; b (100 s) and
    # c (300 s) arrive at 10. At 100 (C = 2; N_avg: a 3.8, b and c 4): rho_b = 190 / 200
    # = 0.95, rho_c = 390 / 600 = 0.65, rho_a = 1000 / (1000 x 3.8 / 2) = 0.53. With f = 0.8
    # one job (ceil(0.2 x 4)) is offered: b; the other GPU renews a running job's lease
    # (a1, the earlier), so c waits. With f = 0.5 both b and c are offered and win.
    trace = [job("a1", 0, 1, 1000), job("a2", 0, 1, 1000), job("b", 10, 1, 100), job("c", 10, 1, 300)]
    default = by_id(run(trace, "1x2", "themis", {"round": "100"}))
    assert default["b"].first_start == 100 and default["c"].first_start > 100
    assert default["a2"].preemptions >= 1
    half = by_id(run(trace, "1x2", "themis", {"round": "100", "knob": "0.5"}))
    assert half["b"].first_start == 100 and half["c"].first_start == 100


def test_themis_does_not_preempt_between_rounds():
    # An arrival mid-lease waits for the round even if its rho is the worst.
    trace = [job("a", 0, 1, 1000), job("b", 10, 1, 5)]
    result = run(trace, "1x1", "themis", {"round": "100"})
    assert by_id(result)["b"].first_start == 100


def test_every_new_policy_is_registered_with_a_description():
    for name in ("sjf", "srtf", "las", "tiresias", "themis", "gavel", "optimus"):
        policy = make_policy(name)
        assert policy.name == name


def test_tiresias_in_two_partitions_decides_each_as_if_alone():
    # Decisions skip a partition where nothing arrived, finished or reached a queue limit;
    # a demotion instant in one VC must still wake the other's due changes. Two VCs of one
    # 1-GPU node with the same kind of contention at different times: each VC's JCTs equal
    # those of the VC simulated alone (a from 0 demoted at 100 GPU-s, b overtakes it).
    from shapeshift.model import ClusterSpec, NodeSpec

    def trace(vc: str, t0: float):
        return [job(f"{vc}a", t0, 1, 1000, vc=vc), job(f"{vc}b", t0 + 10, 1, 50, vc=vc)]

    nodes = (NodeSpec("n0", 1, 8, 64), NodeSpec("n1", 1, 8, 64))
    both = ClusterSpec(nodes=nodes, partitions={"x": ("n0",), "y": ("n1",)})
    together = jcts(run([*trace("x", 0), *trace("y", 35)], both, "tiresias", {"thresholds": "100"}, overheads=NONE))
    alone_x = jcts(run(trace("x", 0), "1x1", "tiresias", {"thresholds": "100"}, overheads=NONE))
    alone_y = jcts(run(trace("y", 35), "1x1", "tiresias", {"thresholds": "100"}, overheads=NONE))
    assert together == {**alone_x, **alone_y}
    # As derived in the first Tiresias test: a ends at 1,050 after b runs 100-150.
    assert together["xa"] == 1050 and together["ya"] == 1050 and together["xb"] == 140


@pytest.mark.parametrize("contention", ["average", "current"])
def test_themis_ranks_from_its_table_as_job_by_job(contention, monkeypatch):
    """Differential check: rho from the waiting table's columns, the hand-out limited to
    jobs that fit and the failed-shape skip give every job the same start and end as
    ranking each job with ``finish_time_fairness`` and trying each in turn (the reference
    rule, forced by making every table look out of date)."""
    from shapeshift.policies.themis.table import WaitingTable
    from shapeshift.workloads.generators import poisson

    jobs = poisson(300, 60.0, seed=5, max_gpus=8).jobs()
    params = {"contention": contention, "round": 300}
    with_table = run(jobs, "2x8", "themis", params)
    monkeypatch.setattr(WaitingTable, "__len__", lambda self: 10**9)
    per_job = run(jobs, "2x8", "themis", params)
    times = lambda r: {j.job_id: (j.first_start, j.end_time, j.preemptions) for j in r.jobs}  # noqa: E731
    assert times(with_table) == times(per_job)
    assert any(j.first_start > j.spec.submit_time for j in per_job.jobs)


@pytest.mark.parametrize(
    "params,cluster,rate",
    [
        ({}, "3x8", 30.0),  # queues and drains: the running parts are kept whole and walked
        ({"thresholds": "200,1000"}, "2x8", 40.0),  # short queues: many demotions and preemptions
        ({"thresholds": "300", "starvation": "1.5"}, "2x8", 40.0),  # promotions of waiting jobs
        ({"thresholds": "500,2000", "placement": "consolidated"}, "4x4", 40.0),  # starts that fail to place
    ],
)
def test_tiresias_queues_decide_as_the_list_rule(params, cluster, rate):
    """Differential check: the incremental queues (running parts kept by their GPU sum,
    waiting parts by GPU count, positions as numbers) give every job the same start, end
    and preemptions as walking every queue as a list (``tests/policies/tiresias_lists.py``,
    the rule as written)."""
    from shapeshift.workloads.generators import poisson
    from tests.policies.tiresias_lists import ListTiresias

    jobs = poisson(300, rate, seed=11, max_gpus=8).jobs()
    fast = make_policy("tiresias", params)
    lists = ListTiresias(fast.thresholds, fast.admission, fast.placement, fast.gpu_time, fast.starvation)
    incremental, reference = run(jobs, cluster, fast), run(jobs, cluster, lists)
    times = lambda r: {j.job_id: (j.first_start, j.end_time, j.preemptions) for j in r.jobs}  # noqa: E731
    assert times(incremental) == times(reference)
    assert incremental.decisions == reference.decisions  # the same wake-ups too
    assert any(j.first_start > j.spec.submit_time for j in reference.jobs)
    assert sum(j.preemptions for j in reference.jobs) > 0


@pytest.mark.parametrize("seed", range(4))
def test_lazy_worst_first_hands_out_rows_in_the_full_sort_order(seed):
    """The hand-out sorts only the worst jobs up front; the order must be the full sort's
    (-rho, submit, id), ties included: rho drawn from a few values, submit times shared,
    so equal keys fall on both sides of the split."""
    import numpy as np

    from shapeshift.policies.themis.table import worst_first, worst_first_blocks

    rng = np.random.default_rng(seed)
    n = 1000
    rows = np.sort(rng.choice(5000, size=n, replace=False))
    ids: list[str | None] = [None] * 5000
    for r in rows.tolist():
        ids[r] = f"j{rng.integers(10**6):07d}-{r}"
    rho = rng.choice([0.5, 1.0, 1.5, 2.0, 7.25], size=n)
    submit = rng.choice([0.0, 10.0, 20.0], size=n)
    expected = worst_first([ids[r] for r in rows.tolist()], rho, submit)
    got = [ids[r] for block in worst_first_blocks(ids, rows, rho, submit, head=16) for r in block.tolist()]
    assert got == expected


@pytest.mark.parametrize("seed", range(4))
def test_lease_order_prefix_is_the_head_of_the_whole_order(seed):
    """A lease round under a long queue orders only the offered jobs (and any tied with
    the last on rho), then the other running jobs, then the waiting jobs tied with the
    last offered one; the result must be exactly the first positions of the whole order
    (offered, other running, other waiting, each by (-rho, submit)), and hold every
    running job. rho takes few values, so ties on rho straddle the offered cut; submit
    times are distinct, so no pair ties on both and the whole order is defined."""
    import numpy as np

    from shapeshift.policies.themis.lease import lease_order

    rng = np.random.default_rng(seed)
    n, n_running = 3000, 400
    rho = rng.choice([0.25, 0.5, 1.0, 1.5, 2.0, 7.25], size=n)
    submit = rng.permutation(n).astype(float)
    for offered in (1, 37, 600, 2999):
        whole = lease_order(rho, submit, n_running, offered, whole=True)
        prefix = lease_order(rho, submit, n_running, offered, whole=False)
        assert whole is not None and prefix is not None
        assert prefix.tolist() == whole[: prefix.size].tolist()
        assert set(range(n_running)) <= set(prefix.tolist())
        # by hand: the whole order's first `offered` positions are the worst by (-rho, submit)
        worst = sorted(range(n), key=lambda i: (-rho[i], submit[i]))[:offered]
        assert whole[:offered].tolist() == worst
    tied = submit.copy()
    first = int(np.argmax(rho))  # a worst job, always offered: a tie on both keys is seen
    twin = int(np.flatnonzero(rho == rho[first])[1])
    tied[twin] = tied[first]
    assert lease_order(rho, tied, n_running, 10, whole=False) is None


def test_themis_marks_a_job_adopted_while_running_at_its_first_lease_round():
    """A restarted live controller re-adopts running jobs with a reconcile, without a
    decision: Themis never saw them wait, so their contention mark is taken when a lease
    round first ranks them (the integral and the time then). Bug: the running jobs'
    table asked for the mark when the job entered it, and found none (KeyError).

    1 node x 2 GPUs, round 100 s. t=0: a (1 GPU, 1000 s) adopted running. t=50: b and c
    (1 GPU, 1000 s each) arrive; 3 active jobs from then on (the contention clock starts
    at this first decision, integral 0); b takes the free GPU, c waits. t=100: integral
    3 x 50 = 150; a is marked (150, 100), so its contention is the current count, 3; b
    and c have averaged 150 / 50 = 3 since their mark at 50. Share 2/3 GPU, so T_ideal =
    1000 x 1.5 = 1500 for each. T_shared: a 100 + 900 = 1000, b 50 + 950 = 1000, c 50 +
    1000 = 1050. rho: c 0.7 (the worst: offered), then running a (0.667, submitted at 0)
    before b (0.667, at 50). Two GPUs: c and a keep them, b is preempted for c."""
    from shapeshift.engine.engine import Engine
    from shapeshift.model import Schedule
    from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor

    cluster = shorthand_cluster(1, 2)
    policy = make_policy("themis", {"round": 100})
    engine = Engine(cluster, policy, SimulatedExecutor(TraceSpeedModel(cluster), CompletionQueue()))
    engine.submit(job("a", 0, 1, 1000), 0.0)
    adopted = Allocation(((0, Resources(1, 4, 16)),))
    engine.reconcile(Schedule(base=dict(engine.allocations), changes={"a": adopted}), 0.0)
    engine.submit(job("b", 50, 1, 1000), 50.0)
    engine.submit(job("c", 50, 1, 1000), 50.0)
    engine.step(50.0)
    assert set(engine.allocations) == {"a", "b"}
    engine.fire_timer()
    engine.step(100.0)
    assert set(engine.allocations) == {"a", "c"}
    assert engine.jobs["b"].preemptions == 1
    assert policy._contention.mark("a") == (150.0, 100.0)


def test_tiresias_instants_keep_one_current_instant_per_job():
    """The starvation rule's heaps: a job's latest instant replaces its earlier one, an
    infinite instant means none, and ``nearest`` gives every job within the window of the
    earliest (1e-3 s), which the policy recomputes exactly."""
    from shapeshift.policies.tiresias.instants import Instants

    instants = Instants()
    instants.set("a", 5.0)
    instants.set("b", 3.0)
    instants.set("c", float("inf"))
    assert len(instants) == 2
    assert instants.until(4.0) == ["b"] and instants.until(4.0) == ["b"]  # looking leaves them
    assert instants.nearest() == ["b"]
    instants.set("b", 10.0)  # b's state changed: its old instant no longer counts
    assert instants.until(4.0) == [] and instants.nearest() == ["a"]
    instants.drop("a")
    assert instants.nearest() == ["b"]
    instants.set("a", 10.0005)  # within 1e-3 s of b's 10.0: both are recomputed
    assert instants.nearest() == ["b", "a"]
    instants.set("a", 10.002)
    assert instants.nearest() == ["b"]
    assert instants.take_until(10.001) == ["b"]  # taken: b's instant is gone
    assert instants.first() == 10.002 and len(instants) == 1
