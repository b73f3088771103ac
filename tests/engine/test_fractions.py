"""Fractional GPUs and GPU-type constraints in the engine, on hand-sized clusters."""

from __future__ import annotations

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.engine.state import JobState
from shapeshift.model import ClusterSpec, JobSpec, ModelError, NodeSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate

NO_OVERHEAD = Overheads(0.0, 0.0)


def fractional(*nodes: NodeSpec) -> ClusterSpec:
    return ClusterSpec(nodes, gpu_fractions=True)


def node(name: str, gpus: int = 1, gpu_type: str = "T4") -> NodeSpec:
    return NodeSpec(name, gpus=gpus, cpus=32.0, mem_gb=128.0, gpu_type=gpu_type)


def run(jobs, cluster, policy="fifo"):
    result = simulate(jobs, cluster, make_policy(policy), overheads=NO_OVERHEAD)
    return {j.job_id: j for j in result.jobs}


def test_two_halves_share_one_gpu():
    # One GPU; A and B each ask for 500 thousandths at t=0 for 100 s. 500 + 500 = 1000
    # fits, so both start at 0 on GPU 0 and end at 100 (no interference: own shares).
    jobs = [JobSpec(j, 0.0, 1, duration=100.0, gpu_milli=500) for j in "AB"]
    out = run(jobs, fractional(node("n0")))
    assert {j: (s.first_start, s.end_time) for j, s in out.items()} == {"A": (0.0, 100.0), "B": (0.0, 100.0)}


def test_six_tenths_and_a_half_do_not_share():
    # 600 + 500 = 1100 > 1000: B waits for A (ends at 100), then runs 100..150.
    jobs = [
        JobSpec("A", 0.0, 1, duration=100.0, gpu_milli=600),
        JobSpec("B", 0.0, 1, duration=50.0, gpu_milli=500),
    ]
    out = run(jobs, fractional(node("n0")))
    assert (out["A"].first_start, out["A"].end_time) == (0.0, 100.0)
    assert (out["B"].first_start, out["B"].end_time) == (100.0, 150.0)


def test_a_fraction_never_joins_a_whole_gpu_job():
    # A takes the whole GPU (no fraction); B (300) must wait until A ends at 10.
    jobs = [JobSpec("A", 0.0, 1, duration=10.0), JobSpec("B", 0.0, 1, duration=5.0, gpu_milli=300)]
    out = run(jobs, fractional(node("n0")))
    assert out["B"].first_start == 10.0


def test_fractions_pack_the_fullest_gpu_first():
    # Two GPUs. A (700) takes GPU 0 (both idle: the tightest fit is a tie, lowest index);
    # B (200) joins GPU 0 (300 free, tighter than GPU 1's 1000); C (1 whole GPU) then
    # still finds GPU 1 idle and starts at 0 instead of waiting.
    jobs = [
        JobSpec("A", 0.0, 1, duration=10.0, gpu_milli=700),
        JobSpec("B", 0.0, 1, duration=10.0, gpu_milli=200),
        JobSpec("C", 0.0, 1, duration=10.0),
    ]
    out = run(jobs, fractional(node("n0", gpus=2)))
    assert [out[j].first_start for j in "ABC"] == [0.0, 0.0, 0.0]


def test_a_job_constrained_to_v100_waits_while_only_t4_is_free():
    # V100 node busy with A until 50; a T4 node idle. B allows only V100: it waits for A
    # and starts at 50, never on the idle T4.
    cluster = fractional(node("t4", gpu_type="T4"), node("v100", gpu_type="V100"))
    jobs = [
        JobSpec("A", 0.0, 1, duration=50.0, gpu_types=frozenset({"V100"})),
        JobSpec("B", 1.0, 1, duration=10.0, gpu_types=frozenset({"V100"})),
    ]
    out = run(jobs, cluster)
    assert out["A"].allocation is None and out["B"].first_start == 50.0
    # And on a whole-GPU cluster, by every placement the same.
    plain = ClusterSpec((node("t4", gpu_type="T4"), node("v100", gpu_type="V100")))
    for placement in ("consolidated", "first-fit", "scattered", "yarn"):
        result = simulate(jobs, plain, make_policy("fifo", {"placement": placement}), overheads=NO_OVERHEAD)
        assert {j.job_id: j.first_start for j in result.jobs} == {"A": 0.0, "B": 50.0}


def test_a_job_no_node_can_hold_is_rejected_with_its_reason():
    # Two T4 nodes of 32 CPUs. A allows only V100: no node of its type. B asks for half a
    # GPU and 40 CPUs: the cluster has 64 CPUs, but a fraction sits on one node, and no
    # node has 40. C fits and runs.
    cluster = fractional(node("t4a", gpu_type="T4"), node("t4b", gpu_type="T4"))
    jobs = [
        JobSpec("A", 0.0, 1, duration=5.0, gpu_types=frozenset({"V100"})),
        JobSpec("B", 0.0, 1, duration=5.0, gpu_milli=500, num_cpus=40.0),
        JobSpec("C", 0.0, 1, duration=5.0, gpu_milli=500),
    ]
    out = run(jobs, cluster)
    assert out["A"].state is JobState.REJECTED
    assert out["A"].reject_reason == "asks for GPU type V100 but the cluster has only T4"
    assert out["B"].state is JobState.REJECTED
    assert out["B"].reject_reason == "no node has its 1 GPU, 40 CPUs and 0 GB (a pod takes one node)"
    assert out["C"].state is JobState.COMPLETED


def test_a_fraction_needs_exactly_one_gpu():
    with pytest.raises(ModelError, match="needs num_gpus 1"):
        JobSpec("A", 0.0, 2, duration=1.0, gpu_milli=500)
    with pytest.raises(ModelError, match="gpu_milli"):
        JobSpec("A", 0.0, 1, duration=1.0, gpu_milli=1000)


def test_on_a_fractional_cluster_a_job_takes_one_node():
    # Two nodes of 32 CPUs and 2 GPUs. A asks for 2 whole GPUs and 40 CPUs: 4 GPUs and 64
    # CPUs in all, but jobs on a cluster of fractional GPUs are pods, one node each: no
    # node has 40 CPUs, so A is rejected at once instead of blocking the queue; B runs.
    cluster = fractional(node("a", gpus=2), node("b", gpus=2))
    jobs = [JobSpec("A", 0.0, 2, duration=5.0, num_cpus=40.0), JobSpec("B", 1.0, 1, duration=5.0)]
    out = run(jobs, cluster)
    assert out["A"].reject_reason == "no node has its 2 GPUs, 40 CPUs and 0 GB (a pod takes one node)"
    assert out["B"].first_start == 1.0


def test_a_job_limit_set_above_one_still_caps_the_jobs_on_a_gpu():
    # Limit 2: A, B and C (300 each, 900 <= 1000) fit by shares, but only two may hold
    # the GPU: C waits for the first to end at 10.
    cluster = ClusterSpec((node("n0"),), gpu_share_limit=2, gpu_fractions=True)
    jobs = [JobSpec(j, 0.0, 1, duration=10.0, gpu_milli=300) for j in "ABC"]
    out = run(jobs, cluster)
    assert [out[j].first_start for j in "ABC"] == [0.0, 0.0, 10.0]


def test_a_plan_giving_back_a_whole_gpu_frees_the_gpu_that_job_holds():
    # One node, two GPUs. A and B (500 each) fill GPU 0; W (whole) takes GPU 1. A plan
    # that gives W back must free GPU 1: GPU 0 stays full, so a 300 share fits only on
    # GPU 1. Guessing "a full GPU" would free GPU 0, whose 1000 are A's and B's.
    from shapeshift.model import Allocation, Resources, Schedule

    cluster = fractional(node("n0", gpus=2))
    jobs = [
        JobSpec("A", 0.0, 1, duration=10.0, gpu_milli=500),
        JobSpec("B", 0.0, 1, duration=10.0, gpu_milli=500),
        JobSpec("W", 0.0, 1, duration=10.0),
    ]
    result = {}

    class Probe:
        name = "probe"
        triggers = frozenset({"arrival"})
        default_round = None

        def decide(self, view):
            pending = list(view.pending(""))
            if len(pending) == 3:
                share = Resources(1, 0.0, 0.0)
                changes = {
                    "A": Allocation(((0, share),), devices=((0, 0),), gpu_milli=500),
                    "B": Allocation(((0, share),), devices=((0, 0),), gpu_milli=500),
                    "W": Allocation(((0, share),)),
                }
                return Schedule(base=view.allocations, changes=changes)
            if not result and len(view.allocations) == 3:
                free = view.scratch()
                free.give(view.allocations["W"])
                result["milli"] = free.milli[0].tolist()
            return Schedule(base=view.allocations, changes={})

    simulate([*jobs, JobSpec("X", 1.0, 1, duration=1.0, gpu_milli=300)], cluster, Probe(), overheads=NO_OVERHEAD)
    assert result["milli"] == [0, 1000]


def test_a_plan_names_the_gpus_it_gives_a_whole_gpu_job():
    # One node of two GPUs; a share of 400 sits on GPU 0. A whole-GPU allocation planned
    # now gets the lowest idle GPU, GPU 1, and names it, so the engine holds exactly that
    # GPU even if it applies the plan in another order or keeps a job where it was.
    from shapeshift.engine.state import FreeResources
    from shapeshift.model import Allocation, Resources

    free = FreeResources.of(fractional(node("n0", gpus=2)))
    free.take(Allocation(((0, Resources(1, 0.0, 0.0)),), devices=((0, 0),), gpu_milli=400))
    whole = Allocation(((0, Resources(1, 0.0, 0.0)),))
    assert free.naming_gpus(whole).devices == ((0, 1),)
    plain = FreeResources.of(ClusterSpec((node("n0", gpus=2),)))
    assert plain.naming_gpus(whole) is whole
