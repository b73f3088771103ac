"""``gavel``'s array bookkeeping (``gavel.table``, ``gavel.rounds``) against the job-by-job
rules it replaced: the grant walk, the in-order sums, and a policy that finds jobs it never
placed (a controller that restarted)."""

from __future__ import annotations

import random

import numpy as np

from shapeshift.engine.state import JobState
from shapeshift.policies.framework.registry import make_policy
from shapeshift.policies.gavel.rounds import grant_greedily
from shapeshift.policies.gavel.table import add_in_order
from tests.conftest import job


def _walk(orders, gpus, left):
    """Gavel's walk job by job (``_schedule_jobs_on_workers_helper``): a job is granted the
    first type in the order where its GPUs still fit, at most one type."""
    granted, sequence = {}, []
    for k, order in orders:
        for row in order:
            if row in granted or gpus[row] > left[k]:
                continue
            granted[row] = k
            sequence.append(row)
            left[k] -= gpus[row]
    return granted, sequence


def test_grant_walk_skips_a_job_that_no_longer_fits_and_goes_on():
    # One type, 8 GPUs; jobs in grant order with 4, 2, 4, 1, 1 GPUs: 4 (4 left), 2 (2
    # left), the second 4 does not fit and is skipped, 1 (1 left), 1 (0 left).
    gpus = np.array([4, 2, 4, 1, 1])
    granted, sequence = grant_greedily([(0, np.arange(5))], gpus, np.array([8]), 5)
    assert granted.tolist() == [0, 0, -1, 0, 0]
    assert sequence.tolist() == [0, 1, 3, 4]


def test_grant_walk_gives_each_job_one_type_the_first_where_it_fits():
    # Types visited 1 then 0. Type 1 has 2 GPUs: job 0 (2 GPUs) takes it; job 1 (1 GPU)
    # no longer fits there. Type 0 (4 GPUs): job 0 is granted already, job 1 and job 2
    # (3 GPUs) fit: 1 + 3 = 4. A 0-GPU job is granted even where nothing is left.
    gpus = np.array([2, 1, 3, 0])
    orders = [(1, np.array([0, 1])), (0, np.array([0, 1, 2, 3]))]
    granted, sequence = grant_greedily(orders, gpus, np.array([4, 2]), 4)
    assert granted.tolist() == [1, 0, 0, 0]
    assert sequence.tolist() == [0, 1, 2, 3]


def test_grant_walk_equals_the_job_by_job_walk_on_random_orders():
    rng = random.Random(7)
    for _ in range(300):
        n, types = rng.randint(1, 80), rng.randint(1, 3)  # short walks go job by job, long ones in steps
        gpus = np.array([rng.choice([0, 1, 1, 2, 4, 8]) for _ in range(n)])
        orders = [(k, np.array(rng.sample(range(n), rng.randint(0, n)), dtype=np.int64)) for k in range(types)]
        rng.shuffle(orders)
        capacity = np.array([rng.randint(0, 16) for _ in range(types)])
        want_granted, want_sequence = _walk(orders, gpus, capacity.copy())
        left = capacity.copy()
        granted, sequence = grant_greedily(orders, gpus, left, n)
        assert {r: int(k) for r, k in enumerate(granted.tolist()) if k >= 0} == want_granted
        assert sequence.tolist() == want_sequence
        assert left.tolist() == [
            capacity[k] - sum(gpus[r] for r, t in want_granted.items() if t == k) for k in range(types)
        ]


def test_sums_in_order_round_as_adding_one_by_one():
    # 0.1 + 0.2 + 0.3 left to right is 0.6000000000000001; a pairwise sum may give 0.6.
    values = np.array([0.2, 0.3, 1e16, -1e16, 0.7])
    total = 0.1
    for v in values.tolist():
        total += v
    assert add_in_order(0.1, values) == total
    many = np.random.default_rng(3).normal(size=500) * 1e3  # long: summed by cumsum
    total = 0.1
    for v in many.tolist():
        total += v
    assert add_in_order(0.1, many) == total
    assert add_in_order(5.0, np.zeros(0)) == 5.0


def test_a_policy_that_never_placed_a_running_job_keeps_it_in_place():
    """A controller that restarts hands the engine's state to a fresh policy: jobs run that
    it never placed. Gavel's round counts them as active like any other. 1 x 2 GPUs: j
    (1 GPU) runs; x (1 GPU) arrives and a fresh policy plans a round. Both get X = 1 (2
    GPUs, 2 one-GPU jobs), both are granted the type, so j keeps its GPU and x takes the
    other: no preemption."""
    from tests.policies.size_based.test_sjf_srtf_las import _engine

    engine = _engine("gavel", {}, 2)
    engine.submit(job("j", 0, 1, 1000), 0.0)
    engine.step(0.0)
    assert engine.jobs["j"].state is JobState.RUNNING
    engine.policy = make_policy("gavel", {})
    engine.submit(job("x", 10, 1, 100), 10.0)
    engine.fire_wakeup()
    engine.step(10.0)
    assert engine.jobs["x"].state is JobState.RUNNING
    assert engine.jobs["j"].state is JobState.RUNNING
    assert engine.jobs["j"].preemptions == 0
