"""AntMan's GPU sharing (OSDI'20 Sec. 3.1 and 3.3) on tiny scenarios computed by hand.

Speeds come from ``tests.policies.planaware.stubs`` (10 samples/s per GPU, batch 32, so one GPU
runs 0.3125 it/s and two 0.625 it/s). The jobs' models have no architecture in the
catalog, so their GPU memory is their sharing profile's (Lucid artifact means): PPO and
NeuMF 2.1 GB, PointNet 5.9 GB. PPO keeps the GPU busy 13.1% of the time (profile
``gpu_util`` 0.131), so an opportunistic job beside it runs in the other 86.9%.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from shapeshift.analysis.metrics import summarize
from shapeshift.engine.overheads import Overheads
from shapeshift.model import ClusterSpec
from shapeshift.policies.planaware.antman import AntManParams, AntManScheduler, antman_variant
from shapeshift.policies.planaware.antman_jobs import AntManInterference
from shapeshift.sim.simulator import simulate
from tests.conftest import jcts
from tests.policies.planaware.stubs import StubKnowledge, StubTruth, cluster, pjob

PAUSE = Overheads(0.0, 78.0)
ONE_GPU = 10.0 / 32  # it/s on one GPU
IDLE_BESIDE_PPO = 1 - 0.131  # PPO's GPU utilisation 0.131 (Lucid profile)


class ProfiledKnowledge(StubKnowledge):
    """Knows no plan model for these jobs: the skeleton then runs them on their requested
    plan with linear speed-up (StubTruth charges 10 samples/s per GPU either way)."""

    def knowledge(self, model: str) -> object:
        return None


def sharing_cluster(gpu_mem_gb: float, limit: int = 2) -> ClusterSpec:
    base = cluster(1, 2, {"A": 2, "B": 0})
    return replace(base, nodes=tuple(replace(n, gpu_mem_gb=gpu_mem_gb) for n in base.nodes), gpu_share_limit=limit)


def run(jobs, gpu_mem_gb: float, **params):
    policy = AntManScheduler(antman_variant(), ProfiledKnowledge(), AntManParams(**params))
    interference = policy.interference_model(AntManInterference().fallback)
    result = simulate(
        jobs, sharing_cluster(gpu_mem_gb), policy, throughput=StubTruth(), overheads=PAUSE, interference=interference
    )
    return result, policy


def guaranteed(job_id: str, submit: float, model: str = "PPO", iterations: int = 800):
    return replace(pjob(job_id, submit, 2, iterations, guaranteed=True, tenant="A"), model=model)


def opportunistic(job_id: str, submit: float, iterations: int):
    return replace(pjob(job_id, submit, 1, iterations, tenant="B"), model="NeuMF")


def test_opportunistic_job_packed_beside_guaranteed_job_when_memory_fits():
    # 2.1 + 2.1 = 4.2 GB <= 5 GB: o joins one of g's GPUs at once (Sec. 3.3).
    result, policy = run([guaranteed("g", 0), opportunistic("o", 10, 100)], gpu_mem_gb=5.0)
    t = jcts(result)
    # g keeps its dedicated speed (GpuOpManager, Sec. 3.1.2): 800 it / 0.625 it/s
    assert t["g"] == pytest.approx(1280.0)
    # o runs in PPO's idle slots: 100 it / (0.3125 x 0.869) it/s, all before g ends
    assert t["o"] == pytest.approx(100 / (ONE_GPU * IDLE_BESIDE_PPO))
    assert policy.packings == 1
    assert summarize(result)["shared_gpu_time_share"] > 0


def test_no_packing_when_memory_does_not_fit():
    # 4.2 GB > 4 GB: o waits for g to finish (1280 s), then runs alone for 320 s
    result, policy = run([guaranteed("g", 0), opportunistic("o", 10, 100)], gpu_mem_gb=4.0)
    t = jcts(result)
    assert t["g"] == pytest.approx(1280.0)
    assert t["o"] == pytest.approx(1280 + 320 - 10)
    assert policy.packings == 0


def test_sharing_off_is_the_whole_gpu_antman():
    result, _ = run([guaranteed("g", 0), opportunistic("o", 10, 100)], gpu_mem_gb=5.0, sharing=False)
    assert jcts(result)["o"] == pytest.approx(1280 + 320 - 10)
    assert summarize(result)["shared_gpu_time_share"] == 0


def test_no_packing_beside_a_guaranteed_job_without_idle_slots():
    # ours (guaranteed_only_util_limit): min_idle_share 0.9 > PPO's idle share 0.869, so o
    # must wait although memory fits
    result, _ = run([guaranteed("g", 0), opportunistic("o", 10, 100)], gpu_mem_gb=5.0, min_idle_share=0.9,
                    guaranteed_only_util_limit=True)
    assert jcts(result)["o"] == pytest.approx(1280 + 320 - 10)


def besteffort(job_id: str, submit: float, iterations: int, model: str):
    return replace(pjob(job_id, submit, 1, iterations, tenant="B"), model=model)


def test_no_opportunistic_job_on_a_gpu_at_eighty_percent_utilisation():
    # antman.go limitedUtil: a GPU at >= 80% utilisation takes no opportunistic job, whoever
    # holds it. o1 and o2 (ResNet50, utilisation 0.989, 7.4 GB) take the two idle GPUs at
    # 0 s; o3 (NeuMF, 2.1 GB; 7.4 + 2.1 <= 20 GB, 7.4 < 16 GB used) may not join either, so
    # it starts when o1 ends at 100 / 0.3125 = 320 s and runs 320 s alone: JCT 640 - 1.
    jobs = [besteffort("o1", 0, 100, "ResNet50"), besteffort("o2", 0, 200, "ResNet50"),
            besteffort("o3", 1, 100, "NeuMF")]
    result, policy = run(jobs, gpu_mem_gb=20.0)
    assert jcts(result)["o3"] == pytest.approx(640 - 1)
    assert policy.packings == 0
    # Ours (guaranteed_only_util_limit): no limit beside best-effort jobs, so o3 packs at 1 s.
    _, legacy = run(jobs, gpu_mem_gb=20.0, guaranteed_only_util_limit=True)
    assert legacy.packings == 1


def test_the_used_memory_limit_of_a_gpu():
    # Paper Sec. 3.3: the candidates of an opportunistic job are the GPUs below M = 80%
    # utilisation, whatever memory their occupants use, so occupants using 17 GB at 10%
    # leave room. The plugin's limitedMem (16 GiB, ``max_used_gpu_mem_gb=16``) refuses them
    # and takes 15 GB; an empty GPU always takes one.
    from shapeshift.policies.planaware.antman_sharing import OpportunisticPacker

    paper = OpportunisticPacker(0.1, True)
    paper._profile = {"a": (0.1, False)}
    paper.occupants = {(0, 0): {"a": 17.0}}
    assert paper._takes_guest((0, 0))
    assert AntManParams().max_used_gpu_mem_gb is None

    packer = OpportunisticPacker(0.1, True, max_used_gpu_mem_gb=16.0)
    packer._profile = {"a": (0.1, False)}
    packer.occupants = {(0, 0): {"a": 17.0}, (0, 1): {"a": 15.0}}
    assert not packer._takes_guest((0, 0))
    assert packer._takes_guest((0, 1))
    assert packer._takes_guest((0, 2))
    packer._profile = {"a": (0.8, False)}  # utilisation exactly at the limit: refused
    assert not packer._takes_guest((0, 1))


def test_guaranteed_job_draws_its_gpus_at_random():
    # g1 (PPO, 2 GPUs) runs 0-1280 s; o (1000 it) packs beside it on GPU 0 (least utilised,
    # lowest index) and keeps GPU 0 alone after 1280 s. g2 (PointNet, 1 GPU, capped at
    # 5 GB: o's 2.1 GB does not fit beside it) arrives at 1300 s. Ours (prefer_empty_gpus)
    # always takes the empty GPU 1: no eviction. The source draws among GPUs 0 and 1, so
    # over seeds some runs evict o (the GPU it drew was o's) and some do not.
    jobs = [guaranteed("g1", 0), opportunistic("o", 10, 1000),
            replace(pjob("g2", 1300, 1, 400, guaranteed=True, tenant="A"), model="PointNet")]
    _, ours = run(jobs, gpu_mem_gb=5.0, prefer_empty_gpus=True)
    assert ours.evictions == 0
    outcomes = {run(jobs, gpu_mem_gb=5.0, seed=seed)[1].evictions for seed in range(8)}
    assert outcomes == {0, 1}


def test_guaranteed_job_evicts_packed_job_whose_memory_does_not_fit():
    # o (1000 it) packs beside g1 at 10 s; g1 ends at 1280 s and o keeps GPU 0 alone. At
    # 1300 s g2 (PointNet, 5.9 GB capped at the GPU's 5 GB) needs both GPUs: 5 + 2.1 > 5,
    # so o is evicted and g2 gets both GPUs at full speed.
    jobs = [guaranteed("g1", 0), opportunistic("o", 10, 1000), guaranteed("g2", 1300, model="PointNet")]
    result, policy = run(jobs, gpu_mem_gb=5.0)
    t = jcts(result)
    assert t["g1"] == pytest.approx(1280.0)
    assert t["g2"] == pytest.approx(1280.0)
    assert policy.evictions == 1
    assert summarize(result)["preemptions"] == 1
    # o's progress: 1270 s at 0.3125 x 0.869 it/s, then 20 s alone at 0.3125 it/s; it
    # restarts when g2 ends (2580 s) after the 78 s restore pause and runs alone.
    done = 1270 * ONE_GPU * IDLE_BESIDE_PPO + 20 * ONE_GPU
    assert t["o"] == pytest.approx(2580 + 78 + (1000 - done) / ONE_GPU - 10)


def test_guaranteed_job_keeps_packed_job_beside_it_when_memory_fits():
    # As above, but g2 is PPO (2.1 GB): 2.1 + 2.1 <= 5, so o stays, beside g2 from 1300 s.
    jobs = [guaranteed("g1", 0), opportunistic("o", 10, 1000), guaranteed("g2", 1300)]
    result, policy = run(jobs, gpu_mem_gb=5.0)
    t = jcts(result)
    assert t["g2"] == pytest.approx(1280.0)
    assert policy.evictions == 0
    # o: 1270 s shared, 20 s alone, 1280 s shared beside g2, then alone from 2580 s
    done = (1270 + 1280) * ONE_GPU * IDLE_BESIDE_PPO + 20 * ONE_GPU
    assert t["o"] == pytest.approx(2580 + (1000 - done) / ONE_GPU - 10)


def test_interference_protects_only_guaranteed_jobs():
    model = AntManInterference(guaranteed_slowdown=0.05)
    g, o, o2 = guaranteed("g", 0), opportunistic("o", 0, 1), opportunistic("o2", 0, 1)
    assert model.pair_speed(g, o) == pytest.approx(0.95)
    assert model.pair_speed(o, g) == pytest.approx(IDLE_BESIDE_PPO)
    # two opportunistic jobs: the default model, 1 / (1 + 0.28 x 0.101^2 + 0.43 x 0.020^2)
    assert model.pair_speed(o, o2) == pytest.approx(1 / (1 + 0.28 * 0.101**2 + 0.43 * 0.020**2))


def test_runs_use_the_policys_interference_model():
    # Through run(): g (guaranteed, a3c -> PPO profile) holds the only GPU; o (ncf -> NeuMF)
    # joins it at 10 s (2.1 + 2.1 GB of 80). Trace speeds: each job's duration alone. With
    # antman's model g keeps full speed (JCT 1000 s) and o runs in PPO's idle 86.9%
    # (100 / 0.869 s); the default model would give g 1 / (1 + 0.28 x 0.131 x 0.101).
    from shapeshift.model import JobSpec, NodeSpec
    from shapeshift.runs import RunSpec, run
    from shapeshift.workloads.workload import Workload

    jobs = [
        JobSpec("g", 0.0, 1, duration=1000.0, model="a3c", tenant="A", guaranteed=True),
        JobSpec("o", 10.0, 1, duration=100.0, model="ncf", tenant="B"),
    ]
    node = NodeSpec("n0", 1, 16, 64, "A800", 80.0, 400.0, 12.5, 25.0)
    spec = RunSpec(
        Workload.from_jobs("pair", jobs), ClusterSpec((node,), tenants={"A": 1}, gpu_share_limit=2), policy="antman"
    )
    result = run(spec)
    t = {j.job_id: j.end_time - j.spec.submit_time for j in result.simulation.jobs}
    assert t["g"] == pytest.approx(1000.0)
    assert t["o"] == pytest.approx(100 / IDLE_BESIDE_PPO)
    assert result.summary["antman_packings"] == 1


def test_the_plugin_limits_refuse_non_finite_values():
    from pydantic import ValidationError

    for bad in ({"max_used_gpu_mem_gb": float("inf")}, {"max_used_gpu_mem_gb": float("nan")},
                {"max_gpu_util": float("nan")}, {"max_gpu_util": 0.0}):
        with pytest.raises(ValidationError):
            AntManParams(**bad)
    assert AntManParams(max_used_gpu_mem_gb=None).max_used_gpu_mem_gb is None


IDLE_BESIDE_RESNET = 1 - 0.989  # ResNet50's GPU utilisation 0.989 (Lucid profile), 7.4 GB


def test_guaranteed_job_keeps_the_opportunistic_job_it_lands_on():
    # Paper Sec. 3.3 (local coordinator): a guaranteed job arriving on a GPU an
    # opportunistic job runs on throttles it; nobody is preempted. o (NeuMF, 2.1 GB, 1000
    # it) starts alone on an idle GPU at 0 s. g (ResNet50, 2 GPUs, 800 it) arrives at 100 s
    # and needs both GPUs: 7.4 + 2.1 <= 10 GB, so o stays beside it, in ResNet50's idle
    # 1.1%, until g ends at 100 + 800 / 0.625 = 1380 s, then runs alone.
    g = guaranteed("g", 100, model="ResNet50")
    o = opportunistic("o", 0, 1000)
    result, policy = run([g, o], gpu_mem_gb=10.0)
    t = jcts(result)
    assert t["g"] == pytest.approx(1280.0)
    done = 100 * ONE_GPU + 1280 * ONE_GPU * IDLE_BESIDE_RESNET
    assert t["o"] == pytest.approx(1380 + (1000 - done) / ONE_GPU)
    assert summarize(result)["preemptions"] == 0
    assert policy.packings == 1
    # Ours (preempt_opportunistic): g preempts o at 100 s; o may not join g's GPUs (98.9%
    # >= 80%), so it restarts when g ends, after the 78 s restore pause.
    result, _ = run([g, o], gpu_mem_gb=10.0, preempt_opportunistic=True)
    assert summarize(result)["preemptions"] == 1
    assert jcts(result)["o"] == pytest.approx(1380 + 78 + (1000 - 100 * ONE_GPU) / ONE_GPU)


def test_the_opportunistic_job_is_preempted_when_its_memory_does_not_fit():
    # As above on 9 GB GPUs: 7.4 + 2.1 > 9, so the engine's hard memory limit stops o at
    # 100 s (AntMan would move its tensors to host memory); it restarts at 1380 + 78 s.
    result, policy = run([guaranteed("g", 100, model="ResNet50"), opportunistic("o", 0, 1000)], gpu_mem_gb=9.0)
    assert summarize(result)["preemptions"] == 1
    assert policy.packings == 0
    assert jcts(result)["o"] == pytest.approx(1380 + 78 + (1000 - 100 * ONE_GPU) / ONE_GPU)


def test_a_new_opportunistic_job_evicts_nobody():
    # o1 (ResNet50, 7.4 GB, 200 it) starts alone at 0 s and stays beside g (ResNet50, 2 GPUs)
    # from 100 s (14.8 <= 20 GB). g ends at 1380 s; o1 has done 100 x 0.3125 + 1280 x
    # 0.3125 x 0.011 it and ends alone at 1380 + rest / 0.3125 s. o2 (NeuMF, 2 GPUs, 100
    # it) arrives at 1390 s: o1's GPU is at 98.9% >= 80%, so o2 may not join it (Sec. 3.3)
    # and starts when o1 ends, running 100 / 0.625 = 160 s.
    jobs = [guaranteed("g", 100, model="ResNet50"), besteffort("o1", 0, 200, "ResNet50"),
            replace(pjob("o2", 1390, 2, 100, tenant="B"), model="NeuMF")]
    result, policy = run(jobs, gpu_mem_gb=20.0)
    t = jcts(result)
    done = 100 * ONE_GPU + 1280 * ONE_GPU * IDLE_BESIDE_RESNET
    o1_end = 1380 + (200 - done) / ONE_GPU
    assert t["o1"] == pytest.approx(o1_end)
    assert t["o2"] == pytest.approx(o1_end + 160 - 1390)
    assert policy.evictions == 0
    assert summarize(result)["preemptions"] == 0
