"""Themis: finish-time fairness and its leases."""

from __future__ import annotations

import pytest

from shapeshift.cluster import shorthand_cluster
from shapeshift.model import Allocation, Resources
from shapeshift.perf.throughput import TraceSpeedModel
from shapeshift.policies.framework.registry import make_policy
from tests.conftest import by_id, jcts, job, run


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

