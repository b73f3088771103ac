"""Lucid's time-aware profiler scaling (artifact ``simulation/profiler/lgf.py``, step 3)."""

from __future__ import annotations

from shapeshift.model import ClusterSpec, JobSpec, NodeSpec
from shapeshift.policies.lucid.policy import Lucid, LucidParams
from shapeshift.sim.simulator import simulate


def three_single_gpu_nodes() -> ClusterSpec:
    # One VC: node 0 is the profiler (profiler_nodes=1), nodes 1 and 2 the main nodes.
    return ClusterSpec(tuple(NodeSpec(f"n{i}", 1, 8, 64, gpu_mem_gb=24.0) for i in range(3)))


# Every test here keeps jobs out of the main queue until profiled (profile_before_queue),
# so that only the profiler (and the node it borrows) can start a job at 0.
def burst(n: int) -> list[JobSpec]:
    # n one-GPU jobs at t=0, each longer than T_prof (200 s), so all profile for 200 s.
    return [JobSpec(f"j{i:02d}", 0.0, 1, duration=1000.0, model="ncf") for i in range(n)]


def started_at_zero(result) -> int:  # type: ignore[no-untyped-def]
    return sum(1 for j in result.jobs if j.first_start == 0.0)


def test_profiler_borrows_an_idle_main_node_when_more_than_ten_wait_and_returns_it():
    # 12 waiting > 10: lgf.py grows the profiler by one node, so two jobs profile at once
    # (the profiler's own node and the idle main node 1). When the queue is empty and the
    # lent node idle, with no forecast yet (counted as low, as lgf.py does), it goes back.
    policy = Lucid(LucidParams(profiler_scaling=True, profile_before_queue=True))
    result = simulate(burst(12), three_single_gpu_nodes(), policy)
    assert started_at_zero(result) == 2
    assert policy.scaler is not None and policy.scaler.grown == 1 and policy.scaler.shrunk == 1
    assert policy.summary_fields()["lucid_profiler_grown"] == 1


def test_no_scaling_at_ten_waiting_or_when_switched_off():
    # 10 waiting is not more than 10: one job profiles at a time.
    policy = Lucid(LucidParams(profiler_scaling=True, profile_before_queue=True))
    assert started_at_zero(simulate(burst(10), three_single_gpu_nodes(), policy)) == 1
    assert policy.scaler is not None and policy.scaler.grown == 0
    # Off (the default): 12 waiting still profile one at a time, and the summary is as before.
    plain = Lucid(LucidParams(profile_before_queue=True))
    assert started_at_zero(simulate(burst(12), three_single_gpu_nodes(), plain)) == 1
    assert "lucid_profiler_grown" not in plain.summary_fields()
