"""Gavel: the heterogeneity-aware LP and its rounds, on hand-sized clusters."""

from __future__ import annotations

import numpy as np
import pytest

from shapeshift.model import ClusterSpec, NodeSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.policies.gavel.lp import max_sum_throughput_allocation
from shapeshift.policies.gavel.policy import max_min_allocation
from tests.conftest import by_id, jcts, job, run


class Recorder:
    """Wraps a policy and records the allocation it gives each job first."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name
        self.triggers, self.default_round = inner.triggers, inner.default_round
        self.first: dict = {}

    def decide(self, view):
        schedule = self.inner.decide(view)
        for job_id, alloc in schedule.changes.items():
            if alloc is not None:
                self.first.setdefault(job_id, alloc)
        return schedule


def _v100_k80() -> ClusterSpec:
    return ClusterSpec(nodes=(NodeSpec("v0", 1, 8, 64, gpu_type="V100"), NodeSpec("k0", 1, 8, 64, gpu_type="K80")))


def test_gavel_keeps_a_job_off_a_gpu_type_where_it_cannot_run():
    # Types (K80, V100), one GPU each. "v" gives throughput only for the V100 (it cannot
    # run on a K80); "any" runs at the same speed on both. Proportional throughputs (each
    # type half the cluster): v 0.5, any 1, so the objective is min(2 X_v,V100,
    # X_any,K80 + X_any,V100); the optimum 1 needs X_any = 1 in all and X_v,V100 >= 0.5.
    # The first round grants v the V100 and any the K80; both finish at their durations.
    cluster = _v100_k80()
    policy = Recorder(make_policy("gavel"))
    trace = [
        job("v", 0, 1, 100, gpu_speed=(("V100", 3.0),)),
        job("any", 0, 1, 120, gpu_speed=(("K80", 1.0), ("V100", 1.0))),
    ]
    result = run(trace, cluster, policy)
    assert policy.first["v"].nodes == (0,) and policy.first["any"].nodes == (1,)
    assert jcts(result) == pytest.approx({"v": 100.0, "any": 120.0})


def test_gavel_lp_is_max_min_fair_over_proportional_throughput():
    # Gavel's MaxMinFairnessPolicyWithPerf. Types (K80, V100), one GPU each; resnet50
    # (1, 7.10) and a3c (1, 2.09). Proportional throughput = mean over the types: 4.05 and
    # 1.545, so the per-job coefficients are res (0.247, 1.753) and a3c (0.647, 1.353).
    # Half of each type for each job gives both exactly 1; moving time e towards each
    # job's better type gives res 1 + 1.506 e but a3c 1 - 0.706 e (and the reverse move
    # hurts res), so the max-min optimum is X = 0.5 everywhere. (Normalising by the best
    # type instead, the previous objective, put resnet50 on the V100 most of the time.)
    speed = np.array([[1.0, 7.10], [1.0, 2.09]])
    x = max_min_allocation(speed, np.array([1.0, 1.0]), np.array([1, 1]))
    assert x == pytest.approx(np.full((2, 2), 0.5), abs=1e-6)
    # Our earlier objective (objective=best-type): normalised by the best type, res (0.141,
    # 1) and a3c (0.478, 1). a3c gets the K80 for 1 - d and the V100 for d, res the rest:
    # res 1 - 0.859 d = a3c 0.478 + 0.522 d -> d = 0.378, both at 0.675.
    old = max_min_allocation(speed, np.array([1.0, 1.0]), np.array([1, 1]), objective="best-type")
    assert ((speed * old).sum(axis=1) / speed.max(axis=1)) == pytest.approx([0.675, 0.675], abs=2e-3)
    assert old[0, 1] == pytest.approx(0.622, abs=2e-3) and old[1, 0] == pytest.approx(0.622, abs=2e-3)


def test_max_sum_throughput_lp_is_gavels_throughput_sum():
    # Gavel's ThroughputSumWithPerf (max_sum_throughput_perf): maximise sum T X under the
    # base constraints. Types (K80, V100), one GPU each, resnet50 (1, 7.10), a3c (1, 2.09):
    # an assignment problem; res->V100 + a3c->K80 = 8.10 beats res->K80 + a3c->V100 =
    # 3.09, so X = [[0, 1], [1, 0]] (max-min gave 0.5 everywhere, the test above).
    speed = np.array([[1.0, 7.10], [1.0, 2.09]])
    x = max_sum_throughput_allocation(speed, np.array([1.0, 1.0]), np.array([1, 1]))
    assert x == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]), abs=1e-6)
    # One type of 4 GPUs: a 4-GPU job at 10 steps/s (2.5 per GPU) and three 1-GPU jobs at 3
    # (3 per GPU). The LP fills GPUs best throughput per GPU first: the 1-GPU jobs all
    # their time (3 GPUs, 9 steps/s), the 4-GPU job the last GPU: X = 1/4 (2.5 steps/s).
    # No scale factor in the objective: the unit of T decides.
    one = max_sum_throughput_allocation(
        np.array([[10.0], [3.0], [3.0], [3.0]]), np.array([4.0, 1, 1, 1]), np.array([4])
    )
    assert one[:, 0] == pytest.approx([0.25, 1.0, 1.0, 1.0], abs=1e-6)
    # A job that runs on no type present gets nothing.
    none = max_sum_throughput_allocation(np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([1.0, 1.0]), np.array([1, 1]))
    assert none[0] == pytest.approx([0.0, 0.0])


def test_gavel_max_sum_throughput_splits_a_tie_between_identical_jobs_as_ecos_does():
    # One type of 4 GPUs: a 2-GPU job at 4 steps/s (2 per GPU) and two identical 2-GPU
    # jobs at 2 steps/s (1 per GPU). The fast job takes 2 GPUs all the time; the last 2
    # GPUs hold X = 1 of one slow job, and every split X2 + X3 = 1 is optimal. A vertex
    # gives one slow job 1 and the other 0; Gavel's ECOS answer (an interior point,
    # symmetric in identical jobs) gives each 1/2, rounded to 5 decimals as the Sia
    # artifact does: 0.5 each.
    x = max_sum_throughput_allocation(np.array([[4.0], [2.0], [2.0]]), np.array([2.0, 2, 2]), np.array([4]))
    assert x[:, 0].tolist() == [1.0, 0.5, 0.5]
    # Three identical 1-GPU jobs on 2 GPUs: 2/3 each, rounded to 0.66667.
    three = max_sum_throughput_allocation(np.full((3, 1), 3.0), np.ones(3), np.array([2]))
    assert three[:, 0].tolist() == [0.66667] * 3


def test_gavel_max_sum_throughput_objective_puts_the_fastest_gain_on_the_fast_type():
    # One V100 (node 0) and one K80 (node 1). "big" gains 4x from the V100, "small" 1.5x;
    # the total 4 + 1 beats 1 + 1.5, so the first round grants big the V100 and small the
    # K80 (max-min on the same speeds: coefficients big (0.4, 1.6), small (0.8, 1.2); a
    # tilt of e towards either job's V100 hurts the other, so X = 0.5 each there).
    cluster = _v100_k80()
    policy = Recorder(make_policy("gavel", {"objective": "max-sum-throughput"}))
    trace = [
        job("small", 0, 1, 100, gpu_speed=(("K80", 1.0), ("V100", 1.5))),
        job("big", 0, 1, 100, gpu_speed=(("K80", 1.0), ("V100", 4.0))),
    ]
    run(trace, cluster, policy)
    assert policy.first["big"].nodes == (0,) and policy.first["small"].nodes == (1,)


def test_gavel_gives_jobs_of_different_sizes_equal_gpu_time_on_one_type():
    # Replaces the "equal fractions" test: Gavel multiplies each job's throughput by its
    # scale factor (GPUs), so on one type demand_j * X_j is the same for every job. 4 GPUs,
    # jobs of 2, 2 and 4 GPUs: 3 t = 4 -> t = 4/3 -> X = (2/3, 2/3, 1/3) (the 4-GPU job
    # gets half the time of a 2-GPU job), all 4 GPUs used.
    single = max_min_allocation(np.ones((3, 1)), np.array([2.0, 2.0, 4.0]), np.array([4]))
    assert single[:, 0] == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    # The LP gives the same when a second type exists that none of them can use.
    lp = max_min_allocation(np.array([[1.0, 0.0]] * 3), np.array([2.0, 2.0, 4.0]), np.array([4, 4]))
    assert lp[:, 0] == pytest.approx([2 / 3, 2 / 3, 1 / 3], abs=1e-6) and lp[:, 1] == pytest.approx([0, 0, 0])
    # A 1-GPU job cannot use more than all its time: t = min(G / n, smallest demand) = 1
    # for a 1-GPU and a 4-GPU job on 8 GPUs: X = (1, 1/4).
    capped = max_min_allocation(np.ones((2, 1)), np.array([1.0, 4.0]), np.array([8]))
    assert capped[:, 0] == pytest.approx([1.0, 0.25])


def test_gavel_solves_its_lp_only_when_the_job_set_changes():
    # 1 GPU, two 1000 s jobs from 0: the job set {a, b} is the same at every round until
    # one of them finishes, then {the other} once: two solves, whatever the round count.
    policy = make_policy("gavel")
    run([job("a", 0, 1, 1000), job("b", 0, 1, 1000)], "1x1", policy)
    assert policy.solves == 2


def test_gavel_time_shares_an_overloaded_cluster_in_rounds():
    # 1 GPU, two 1000 s jobs: a runs the first round (360 s); at the next round b has
    # received nothing (priority infinite) and takes over.
    result = run([job("a", 0, 1, 1000), job("b", 0, 1, 1000)], "1x1", "gavel")
    assert by_id(result)["b"].first_start == 360 and by_id(result)["a"].preemptions >= 1
