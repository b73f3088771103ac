"""Tiresias (discretized 2D-LAS, promotion, model-aware placement) and Themis (finish-time fairness)."""

from __future__ import annotations

from shapeshift.engine.overheads import Overheads
from shapeshift.policies.registry import make_policy
from tests.conftest import by_id, jcts, job, run

FAST = {"threshold": "100", "round": "10", "promote_after": "0"}


def test_tiresias_demotes_a_long_job_after_the_threshold_and_a_newcomer_overtakes_it():
    # 1 GPU, threshold 100 GPU-s, rounds every 10 s. a (1000 s) runs from 0. b arrives at 10:
    # both in queue 0, FIFO keeps a. At 100, a has 100 GPU-s -> queue 1; b (queue 0) preempts
    # it and runs 100-150. a resumes at 150, restores 30 s, runs its last 900 s: ends 1080.
    result = run([job("a", 0, 1, 1000), job("b", 10, 1, 50)], "1x1", "tiresias", FAST)
    assert jcts(result) == {"a": 1080, "b": 140}
    assert by_id(result)["a"].preemptions == 1 and by_id(result)["b"].first_start == 100


def test_tiresias_promotes_a_starving_job():
    # x (1000 s) runs 0-100 and drops to queue 1; y (from 10) runs 100-200 and drops too.
    # Both in queue 1: FIFO picks x. Without promotion x ends at 1100, then y runs its
    # last 900 s: 1100-2000.
    # With promote_after=300, y (waiting since 200) is promoted at 500 and runs 500-600
    # (100 GPU-s in queue 0), x runs 600-900, y promoted again at 900 runs 900-1000, x ends
    # at 1300, then y runs its last 700 s: 1300-2000 (restore penalty 0).
    trace = [job("x", 0, 1, 1000), job("y", 10, 1, 1000)]
    none = Overheads(0.0, 0.0)
    plain = run(trace, "1x1", "tiresias", FAST, overheads=none)
    assert jcts(plain) == {"x": 1100, "y": 1990}
    assert by_id(plain)["x"].preemptions == 1
    promoted = run(trace, "1x1", "tiresias", {**FAST, "promote_after": "300"}, overheads=none)
    assert jcts(promoted) == {"x": 1300, "y": 1990}
    assert by_id(promoted)["x"].preemptions == 3


def _fragmented(model: str):
    # 2 nodes x 4 GPUs; a and b take 3 GPUs on each node, leaving 1 + 1 free. c needs 2.
    trace = [job("a", 0, 3, 1000), job("b", 0, 3, 1000), job("c", 1, 2, 10, model=model)]
    return by_id(run(trace, "2x4", "tiresias", {"round": "1000"}))["c"]


def test_tiresias_spreads_placement_insensitive_models_and_consolidates_the_rest():
    assert _fragmented("resnet50").first_start == 1  # insensitive: takes 1 + 1 across nodes
    assert _fragmented("vgg16").first_start == 1000  # sensitive: waits for a whole node
    assert _fragmented("some-new-model").first_start == 1000  # unknown: consolidated


def test_themis_gives_the_next_lease_to_the_job_with_the_worst_rho():
    # 1 GPU, leases of 100 s. a (1000 s) runs from 0; b (100 s) and c (500 s) arrive at 10.
    # At 100, N = 3 share 1 GPU (1/3 each): rho = (elapsed + remaining) / (duration * 3):
    # a (100 + 900) / 3000 = 0.33, b (90 + 100) / 300 = 0.63, c (90 + 500) / 1500 = 0.39.
    # b has the worst rho: it gets the lease, a is preempted. b ends at 200; then N = 2:
    # a (200 + 900) / 2000 = 0.55, c (190 + 500) / 1000 = 0.69: c gets the GPU at 200.
    trace = [job("a", 0, 1, 1000), job("b", 10, 1, 100), job("c", 10, 1, 500)]
    result = run(trace, "1x1", "themis", {"round": "100", "fraction": "0.5"})
    jobs = by_id(result)
    assert jobs["b"].first_start == 100 and jobs["c"].first_start == 200
    assert jobs["a"].preemptions >= 1 and jcts(result)["b"] == 190


def test_themis_does_not_preempt_between_rounds():
    # An arrival mid-lease waits for the round even if its rho is the worst.
    trace = [job("a", 0, 1, 1000), job("b", 10, 1, 5)]
    result = run(trace, "1x1", "themis", {"round": "100"})
    assert by_id(result)["b"].first_start == 100


def test_every_new_policy_is_registered_with_a_description():
    for name in ("sjf", "srtf", "las", "tiresias", "themis", "gavel", "optimus"):
        policy = make_policy(name)
        assert policy.name == name
