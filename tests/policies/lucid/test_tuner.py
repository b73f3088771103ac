"""Lucid's system tuner (Hu's thesis ch. 4): replay recent history under every candidate
T_prof and binder threshold, adopt the lowest average JCT."""

from __future__ import annotations

import pytest

from shapeshift.model import ClusterSpec, JobSpec, NodeSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.policies.lucid.policy import Lucid, LucidParams
from shapeshift.policies.lucid.tuner import TUNER_PROFILE_SECONDS, TUNER_THRESHOLDS, replay_jobs, sweep
from shapeshift.sim.simulator import replay, simulate


def one_gpu() -> ClusterSpec:
    return ClusterSpec((NodeSpec("n0", 1, 8, 64, gpu_mem_gb=24.0),))


def test_history_is_replayed_from_time_zero_in_submission_order():
    history = [JobSpec("b", 5000.0, 1, duration=10.0), JobSpec("a", 4000.0, 1, duration=20.0)]
    assert [(j.job_id, j.submit_time) for j in replay_jobs(history)] == [("a", 0.0), ("b", 1000.0)]


def test_sweep_adopts_the_lowest_average_jct_and_ties_keep_the_current_setting():
    # One GPU, a 1000 s job and two 10 s jobs submitted together. FIFO: 1000, 1010, 1020
    # (avg 1010 s). SJF: 10, 20, 1020 (avg 350 s). Only (400 s, 3) replays with SJF.
    history = [JobSpec("long", 0.0, 1, duration=1000.0)] + [JobSpec(f"s{i}", 0.0, 1, duration=10.0) for i in (1, 2)]

    def make(seconds: float, threshold: int):  # type: ignore[no-untyped-def]
        return make_policy("sjf" if (seconds, threshold) == (400.0, 3) else "fifo", {})

    choice = sweep(0.0, history, one_gpu(), make, current=(200.0, 2), replay=replay)
    assert (choice.profile_seconds, choice.threshold) == (400.0, 3)
    assert dict(((t, k), jct) for t, k, jct in choice.table)[(400.0, 3)] == pytest.approx(350.0)
    assert len(choice.table) == len(TUNER_PROFILE_SECONDS) * len(TUNER_THRESHOLDS)
    # All candidates equal: the current setting stays.
    same = sweep(0.0, history, one_gpu(), lambda t, k: make_policy("fifo", {}), current=(200.0, 2), replay=replay)
    assert (same.profile_seconds, same.threshold) == (200.0, 2)
    assert "chose T_prof 200 s, threshold 2" in same.explain()


def test_lucid_tunes_on_finished_jobs_only_and_adopts_the_choice():
    # 30 one-GPU jobs, 300 s apart, 500 s each, on 2 nodes (one is the profiler). With
    # tuner_jobs=10 the first sweep happens at the first decision after 10 have finished,
    # on exactly those 10; the next is due 7 days later, after the workload ends.
    jobs = [JobSpec(f"j{i:02d}", 300.0 * i, 1, duration=500.0, model="ncf") for i in range(30)]
    cluster = ClusterSpec(tuple(NodeSpec(f"n{i}", 1, 8, 64, gpu_mem_gb=24.0) for i in range(2)), gpu_share_limit=2)
    policy = Lucid(LucidParams(system_tuner=True, tuner_jobs=10))
    result = simulate(jobs, cluster, policy)
    assert len(policy.tunings) == 1
    choice = policy.tunings[0]
    ends = sorted(s.end_time for s in result.jobs)
    assert choice.jobs == 10 and ends[9] <= choice.at < ends[10]
    best = min(jct for _, _, jct in choice.table)
    picked = dict(((t, k), jct) for t, k, jct in choice.table)[(choice.profile_seconds, choice.threshold)]
    assert picked == best
    fields = policy.summary_fields()
    assert (fields["lucid_profile_seconds"], fields["lucid_share_threshold"]) == (
        choice.profile_seconds,
        choice.threshold,
    )
