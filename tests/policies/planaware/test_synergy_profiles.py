"""Synergy's published profiles, the speed model that charges them, and Synergy-Tune on them.

Expectations come from Synergy's rule (OSDI 2022, Sec. 4) and its profiles
(msr-fiddle/synergy ``simulator/models/<model>_1.py``), on one server of Synergy's shape:
8 GPUs, 24 CPUs, 500 GB, so the GPU-proportional share is 3 CPUs and 62.5 GB per GPU.
"""

from __future__ import annotations

import pytest

from shapeshift.engine.engine import Engine
from shapeshift.engine.overheads import Overheads
from shapeshift.model import Allocation, ClusterSpec, JobSpec, NodeSpec, Resources
from shapeshift.perf.synergy_profiles import CPU_GRID, MEM_GRID, PROFILES
from shapeshift.perf.synergy_speed import SynergySpeedModel
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload
from tests.conftest import jcts

SERVER = ClusterSpec((NodeSpec(name="s0", gpus=8, cpus=24, mem_gb=500, gpu_type="V100"),))
NO_PAUSE = Overheads(0.0, 0.0)


def _jobs(tmp_path, rows: list[str]):
    path = tmp_path / "trace.csv"
    path.write_text("job_id,model,arrival,num_iters,gpu_demand\n" + "\n".join(rows) + "\n")
    return read_workload(path, "synergy").jobs()


def _alloc(cpus: float, mem: float, gpus: int = 1) -> Allocation:
    return Allocation(((0, Resources(gpus, cpus, mem)),))


def test_profile_speed_rises_with_cpus_as_published():
    res18, alexnet = PROFILES["res18"], PROFILES["alexnet"]
    # res18_1.py: 1.0 at the proportional 3 CPUs, 1.75 at 6, 2.4 from 9 (its demand)
    assert res18.speed(3, 62.5) == pytest.approx(1.0)
    assert res18.speed(9, 62.5) == pytest.approx(2.4) == pytest.approx(res18.speedup)
    assert res18.speed(7.5, 62.5) == pytest.approx((1.75 + 2.4) / 2)  # linear between 6 and 9
    # alexnet_1.py: 2.94 at 12 CPUs needs 125 GB per GPU; with the proportional 62.5 GB, 2.0
    assert alexnet.speed(12, 125) == pytest.approx(2.94)
    assert alexnet.speed(12, 62.5) == pytest.approx(2.0)
    # every profile: 1 at the proportional share, never falling as CPUs grow
    for p in PROFILES.values():
        assert p.speed(3, 62.5) == pytest.approx(1.0), p.model
        for mem in MEM_GRID:
            speeds = [p.speed(c, mem) for c in CPU_GRID]
            assert speeds == sorted(speeds), p.model
        assert p.speed(p.cpus_per_gpu, p.gb_per_gpu) == pytest.approx(p.speedup), p.model


def test_speed_model_charges_the_cpus_and_memory_given(tmp_path):
    res18, alexnet = _jobs(tmp_path, ["0,res18,0,1000,1", "1,alexnet,0,1000,1"])
    truth = SynergySpeedModel(SERVER)
    assert truth.total_work(res18) == pytest.approx(1000 * 0.64)  # res18_1.py iter_time
    assert truth.rate(res18, _alloc(9, 62.5)) == pytest.approx(2.4)
    assert truth.rate(alexnet, _alloc(12, 62.5)) == pytest.approx(2.0)
    # an allocation naming no CPUs or memory is charged the node's proportional share
    assert truth.rate(res18, _alloc(0, 0)) == pytest.approx(1.0)


def _run(tmp_path, rows: list[str], **params):
    return simulate(
        _jobs(tmp_path, rows), SERVER, make_policy("synergy", params), throughput=SynergySpeedModel(SERVER),
        overheads=NO_PAUSE,
    )  # fmt: skip


def test_tune_gives_a_cpu_sensitive_job_more_than_proportional(tmp_path):
    # res18, 3000 iterations x 0.64 s = 1920 s at the proportional share. Alone on the
    # server, tune gives it its demand, 9 CPUs (idle GPUs' CPUs): 2.4x -> 800 s;
    # proportional gives 3 CPUs -> 1920 s.
    rows = ["0,res18,0,3000,1"]
    assert jcts(_run(tmp_path, rows))["0"] == pytest.approx(800.0)
    assert jcts(_run(tmp_path, rows, mode="proportional"))["0"] == pytest.approx(1920.0)


def test_proportional_mode_gives_exactly_the_proportional_share():
    pol = make_policy("synergy", {"mode": "proportional"})
    eng = Engine(SERVER, pol, SimulatedExecutor(SynergySpeedModel(SERVER), CompletionQueue()), NO_PAUSE)
    for i, (model, gpus) in enumerate([("res18", 1), ("gnmt", 2), ("alexnet", 4)]):
        eng.submit(JobSpec(str(i), float(i), gpus, duration=1e5, model=model), float(i))
        eng.step(float(i))
    for jid, gpus in (("0", 1), ("1", 2), ("2", 4)):
        total = eng.allocations[jid].total
        assert (total.cpus, total.mem_gb) == pytest.approx((3.0 * gpus, 62.5 * gpus)), jid


def test_no_job_runs_slower_than_at_its_proportional_share(tmp_path):
    # Eight 1-GPU jobs arrive one per second. Whatever tune decides, every job's speed is
    # at least its speed at 3 CPUs and 62.5 GB (Synergy's guarantee), the server is never
    # over-committed, and the insensitive gnmt gets its demand, 1 CPU and 20 GB, below the
    # proportional share at the same speed.
    models = ["alexnet", "res18", "res50", "mobilenet", "shufflenet", "gnmt", "lstm", "deepspeech"]
    jobs = _jobs(tmp_path, [f"{i},{m},{i},100000,1" for i, m in enumerate(models)])
    truth = SynergySpeedModel(SERVER)
    eng = Engine(SERVER, make_policy("synergy", {}), SimulatedExecutor(truth, CompletionQueue()), NO_PAUSE)
    for job in jobs:
        eng.submit(job, job.submit_time)
        eng.step(job.submit_time)
        allocs = eng.allocations
        assert sum(a.total.cpus for a in allocs.values()) <= 24 + 1e-9
        assert sum(a.total.mem_gb for a in allocs.values()) <= 500 + 1e-9
        for j in jobs[: int(job.job_id) + 1]:
            assert truth.rate(j, allocs[j.job_id]) >= truth.rate(j, _alloc(3, 62.5)) - 1e-9, j.model
    gnmt = eng.allocations["5"].total
    assert (gnmt.cpus, gnmt.mem_gb) == pytest.approx((1.0, 20.0))


def test_the_round_re_tunes_a_running_job_when_cpus_are_left_idle(tmp_path):
    # A (res18, 1920 s of work at the proportional share) starts alone at t=0 with its
    # demand, 9 CPUs (2.4x). B (7 GPUs of deepspeech, 10 x 0.757 s) arrives at 10 and needs
    # its share, 21 CPUs: A is brought back to 3 (peer adjustment). B ends at 17.57; C
    # (gnmt, 1 CPU) arrives at 30: neither event re-tunes A, which Synergy does only at
    # its rounds, so 20 CPUs sit idle until the round at 300 gives A its 9 again.
    # A's work: 10 x 2.4 = 24 s by t=10, 290 more by t=300, the remaining 1606 at 2.4x:
    # done at 300 + 1606 / 2.4 = 969.17 s. Without rounds it runs at 1x from t=10:
    # 10 + (1920 - 24) = 1906 s.
    rows = ["A,res18,0,3000,1", "B,deepspeech,10,10,7", "C,gnmt,30,100,1"]
    assert jcts(_run(tmp_path, rows))["A"] == pytest.approx(300 + 1606 / 2.4)
    assert jcts(_run(tmp_path, rows, retune_round="none"))["A"] == pytest.approx(1906.0)


def test_tune_places_a_job_where_its_demand_fits(tmp_path):
    # Two servers. A 7-GPU deepspeech job (3 CPUs per GPU: 21) fills server 0's GPUs
    # first (best fit, ties to the lower index). res18 then fits GPU-wise best on server 0
    # (1 GPU left) but only 3 CPUs are left there, below its 9: Synergy places it on the
    # server where its whole demand fits (allocate_synergy_placement), server 1, with 9
    # CPUs. Proportional shares place by GPUs alone: server 0, 3 CPUs.
    two = ClusterSpec(tuple(NodeSpec(name=f"s{i}", gpus=8, cpus=24, mem_gb=500, gpu_type="V100") for i in range(2)))
    jobs = _jobs(tmp_path, ["0,deepspeech,0,100000,7", "1,res18,1,100000,1"])
    for mode, where in (("tune", (1, 9.0)), ("proportional", (0, 3.0))):
        pol = make_policy("synergy", {"mode": mode})
        eng = Engine(two, pol, SimulatedExecutor(SynergySpeedModel(two), CompletionQueue()), NO_PAUSE)
        for job in jobs:
            eng.submit(job, job.submit_time)
            eng.step(job.submit_time)
        assert [n for n, _ in eng.allocations["0"].placement] == [0]
        ((node, share),) = eng.allocations["1"].placement
        assert (node, share.cpus) == pytest.approx(where), mode
