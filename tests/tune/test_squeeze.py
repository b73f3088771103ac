"""Bubble squeezing on the shared-GPU engine, hand-computed (no torch needed)."""

from __future__ import annotations

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.model import ClusterSpec, ExecutionPlan, FusedTrials, JobSpec, ModelError, NodeSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.tune.squeeze import BubbleInterference, BubbleSqueeze, bubble_fraction


def cluster(limit: int = 2) -> ClusterSpec:
    return ClusterSpec((NodeSpec("n0", gpus=2, cpus=16, mem_gb=128, gpu_mem_gb=80.0),), gpu_share_limit=limit)


def jobs() -> list[JobSpec]:
    host = JobSpec("H", 0.0, 2, duration=100.0, plan=ExecutionPlan(pp=2, micro_batches=1))
    # 4 trials fused 2 at a time: 2 groups x 10 steps at 1 step/s = 20 s on a whole GPU
    tuning = FusedTrials(trials=4, fused=2, steps=10, trial_rate=1.0)
    return [host, JobSpec("T", 0.0, 1, duration=tuning.duration, tuning=tuning)]


def ends(policy, interference=None) -> dict[str, float]:
    result = simulate(jobs(), cluster(), policy, overheads=Overheads(0.0, 0.0), interference=interference)
    return {j.job_id: j.end_time for j in result.jobs}


def test_bubble_fraction_is_gpipe_idle_share():
    assert bubble_fraction(ExecutionPlan(pp=4, micro_batches=4)) == pytest.approx(3 / 7)
    assert bubble_fraction(ExecutionPlan(dp=2)) == 0.0


def test_without_squeezing_the_tuning_job_waits_for_the_host():
    # strict FIFO: H holds both GPUs 0-100; T runs alone 100-120
    assert ends(make_policy("fifo")) == {"H": 100.0, "T": 120.0}


def test_squeezed_tuning_job_runs_in_the_bubble_and_the_host_is_unaffected():
    # H launches at 0 with room for a guest; T joins GPU 0 one microsecond later at 15% speed:
    # by t=100 it has done 0.15 * (100 - 1e-6) ~= 15 s of its 20; alone after H ends -> 105.
    got = ends(BubbleSqueeze(make_policy("fifo")), BubbleInterference())
    assert got["H"] == pytest.approx(100.0)
    assert got["T"] == pytest.approx(105.0, abs=1e-5)


def test_host_slowdown_and_cap_are_parameters():
    # host_slowdown 0.1: H runs at 0.9 while T is beside it. T at 0.15 needs 20/0.15 = 133 s
    # alone-equivalent, so T is still there when H would end: H ends at ~100/0.9 = 111.1;
    # T has 0.15 * 111.1 = 16.67 done, 3.33 left alone -> 114.4.
    got = ends(BubbleSqueeze(make_policy("fifo")), BubbleInterference(host_slowdown=0.1))
    assert got["H"] == pytest.approx(100 / 0.9, abs=1e-4)
    assert got["T"] == pytest.approx(100 / 0.9 + 20 - 0.15 * 100 / 0.9, abs=1e-4)
    # with the cap, a host with bubble 1/2 still allows 0.15; one with m=8 (bubble 1/9) caps it
    capped = BubbleInterference(cap_at_bubble=True)
    host = JobSpec("H", 0.0, 2, duration=1.0, plan=ExecutionPlan(pp=2, micro_batches=8))
    guest = jobs()[1]
    assert capped.pair_speed(guest, host) == pytest.approx(1 / 9)
    assert capped.pair_speed(host, guest) == 1.0


def test_fused_trials_validate():
    with pytest.raises(ModelError, match="trial_rate"):
        FusedTrials(trials=2, fused=2, steps=1, trial_rate=float("nan"))


def test_promote_moves_a_squeezed_job_to_a_freed_gpu():
    # 3 GPUs: H (pp=2) on GPUs 0-1 for 100 s, X on GPU 2 for 10 s, T (20 s) squeezed beside H
    # at 0.15 from ~0. X ends at 10: T has ~1.5 s done, moves to GPU 2 (no overheads) and
    # finishes the other 18.5 s at full speed -> 28.5. Without promote: 15 done by 100 -> 105.
    three = ClusterSpec((NodeSpec("n0", gpus=3, cpus=24, mem_gb=128, gpu_mem_gb=80.0),), gpu_share_limit=2)
    work = [jobs()[0], JobSpec("X", 0.0, 1, duration=10.0), jobs()[1]]
    for promote, expected in ((True, 28.5), (False, 105.0)):
        policy = BubbleSqueeze(make_policy("fifo", {"backfill": True}), promote=promote)
        result = simulate(work, three, policy, overheads=Overheads(0.0, 0.0), interference=BubbleInterference())
        got = {j.job_id: j.end_time for j in result.jobs}
        assert got["T"] == pytest.approx(expected, abs=1e-5)
        assert got["H"] == pytest.approx(100.0)
