"""Optimus: marginal-gain elasticity."""

from __future__ import annotations

import pytest

from tests.conftest import by_id, jcts, job, run


def test_optimus_gives_the_next_gpu_to_the_largest_marginal_gain():
    # 3 GPUs, two jobs asking for 2 GPUs each: a has 100 s of work, b 1000 s (at 2 GPUs).
    # Each starts at 1 GPU; the third GPU cuts b's remaining time by 1000 s (2000 -> 1000)
    # and a's by only 100 s (200 -> 100): b gets it. a runs at half speed: 200 s.
    result = run([job("a", 0, 2, 100), job("b", 0, 2, 1000)], "1x3", "optimus")
    assert jcts(result) == {"a": 200, "b": 1000}
    assert all(j.reconfigurations == 0 for j in result.jobs)


def test_optimus_resizes_a_running_job_at_the_round_and_pays_the_restore():
    # Same start; with max_factor 1.5 b may grow to 3 GPUs. a ends at 200; at the 600 s
    # round b (400 s of work left) grows from 2 to 3 GPUs: a reconfiguration, 30 s restore,
    # then 400 / 1.5 s at linear scaling: ends at 600 + 30 + 266.67.
    result = run([job("a", 0, 2, 100), job("b", 0, 2, 1000)], "1x3", "optimus", {"max_factor": "1.5"})
    b = by_id(result)["b"]
    assert b.reconfigurations == 1 and b.end_time == pytest.approx(600 + 30 + 400 / 1.5)


def test_optimus_scales_with_the_catalog_curve():
    # vgg16 keeps 80 % of the ideal gain per doubling: S(2) = 1.6, so at 1 GPU a job that
    # asked for 2 runs at 1 / 1.6 of its speed.
    result = run([job("a", 0, 2, 100, model="vgg16"), job("b", 0, 2, 1000, model="vgg16")], "1x3", "optimus")
    assert jcts(result)["a"] == pytest.approx(160.0)

