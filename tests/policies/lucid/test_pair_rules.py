"""Lucid's pair rules from the artifact's simulator (S-Lab-System-Group/Lucid,
``simulation/policy/lucid.py`` and ``cluster.py``): what a pair's end releases, and
partners placed earlier in the same allocation pass."""

from __future__ import annotations

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.model import ClusterSpec, JobSpec, NodeSpec
from shapeshift.policies.lucid.policy import Lucid, LucidParams
from shapeshift.sim.simulator import simulate


class FullSpeed:
    """Sharing costs nothing, so every end time below is submit/start + duration."""

    def pair_speed(self, job: JobSpec, partner: JobSpec) -> float:
        return 1.0


def one_node(gpus: int) -> ClusterSpec:
    return ClusterSpec((NodeSpec("n0", gpus, 8 * gpus, 64 * gpus, gpu_mem_gb=24.0),), gpu_share_limit=2)


def on_nodes(jobs: list[JobSpec], nodes: tuple[NodeSpec, ...], policy: Lucid):  # type: ignore[no-untyped-def]
    """``jobs`` under ``policy`` on ``nodes`` (two jobs per GPU), with free restarts and
    free sharing, so every time below is arithmetic on the durations."""
    cluster = ClusterSpec(nodes, gpu_share_limit=2)
    return simulate(jobs, cluster, policy, overheads=Overheads(0.0, 0.0), interference=FullSpeed())


def run(jobs: list[JobSpec], gpus: int, **params) -> tuple[Lucid, dict[str, tuple[float, float]]]:
    # No profiler, durations known: priority = GPUs x duration, so every binder test
    # below is arithmetic on the durations.
    policy = Lucid(LucidParams(profiler_nodes=0, oracle_durations=True, **params))
    result = on_nodes(jobs, one_node(gpus).nodes, policy)
    return policy, {j.job_id: (j.first_start, j.shared_seconds) for j in result.jobs}


# One GPU. old (ncf: Tiny) runs alone from 0 to 100. new (Tiny, 150 s) arrives at 1 and
# joins it (0 + 0 <= 2, 150 <= 2 x 100), running 1-151. late (Tiny, 100 s) arrives at
# 110, when old has ended and new runs alone.
OLDER_ENDS_FIRST = [
    JobSpec("old", 0.0, 1, duration=100.0, model="ncf"),
    JobSpec("new", 1.0, 1, duration=150.0, model="ncf"),
    JobSpec("late", 110.0, 1, duration=100.0, model="ncf"),
]


def test_the_artifacts_code_never_offers_a_pairs_newer_job_again_once_the_older_ended():
    # pair_release="newer": the artifact's check_colocate_jobs finds old itself when old
    # ends, so new keeps exclusive = 0 and no job may join it: late waits for the GPU
    # until new ends at 151.
    policy, jobs = run(OLDER_ENDS_FIRST, 1, pair_release="newer")
    assert jobs["new"][0] == pytest.approx(1.0)
    assert jobs["late"] == (pytest.approx(151.0), pytest.approx(0.0))
    assert policy.paired == 1
    assert not policy.locked  # forgotten once it ended


def test_by_default_the_older_jobs_end_frees_the_newer_to_take_a_partner():
    # Default (pair_release="both"): old's end releases new, and late joins it at 110
    # (0 + 0 <= 2, 100 <= 2 x 150), sharing 110-151 (new's end).
    policy, jobs = run(OLDER_ENDS_FIRST, 1)
    assert jobs["late"] == (pytest.approx(110.0), pytest.approx(41.0))
    assert policy.paired == 2


def test_the_older_job_is_released_when_the_newer_ends_first():
    # old runs 0-300; new (100 s) joins it at 1 (100 <= 600) and ends at 101; the artifact
    # then restores old (its partner lookup finds old). late (100 s) arrives at 110 and
    # joins old (100 <= 2 x 300), sharing 110-210.
    jobs_in = [
        JobSpec("old", 0.0, 1, duration=300.0, model="ncf"),
        JobSpec("new", 1.0, 1, duration=100.0, model="ncf"),
        JobSpec("late", 110.0, 1, duration=100.0, model="ncf"),
    ]
    policy, jobs = run(jobs_in, 1)
    assert jobs["late"] == (pytest.approx(110.0), pytest.approx(100.0))
    assert policy.paired == 2


# Two jobs arrive together on one GPU: first (Tiny, 100 s) is first in priority order and
# finds no running partner, so it takes the GPU alone; second (Tiny, 150 s) comes next in
# the same pass.
TOGETHER = [
    JobSpec("first", 0.0, 1, duration=100.0, model="ncf"),
    JobSpec("second", 0.0, 1, duration=150.0, model="ncf"),
]


def test_a_job_may_join_one_placed_earlier_in_the_same_pass():
    # The artifact appends first to its run_list when it starts it, so second joins it at
    # 0 (0 + 0 <= 2, 150 <= 2 x 100) and they share 0-100.
    policy, jobs = run(TOGETHER, 1)
    assert jobs["second"] == (pytest.approx(0.0), pytest.approx(100.0))
    assert policy.paired == 1


def test_partners_running_only_waits_for_the_next_decision():
    # Ours: only jobs running before the decision may take a partner; no GPU is free, and
    # the next decision is first's end at 100, when second starts alone.
    policy, jobs = run(TOGETHER, 1, partners_running_only=True)
    assert jobs["second"] == (pytest.approx(100.0), pytest.approx(0.0))
    assert policy.paired == 0


def test_a_partner_placed_in_the_same_pass_is_joined_on_its_own_gpu():
    # Two GPUs, all at 0. Priority order: jumbo (resnet50: Jumbo, 100 s), medium (resnet18:
    # Medium, 150 s), joiner (resnet18, 160 s). jumbo takes GPU 0 alone. medium may not join
    # it (1 + 2 > 2) and takes GPU 1 alone. joiner may not join jumbo (1 + 2 > 2) but may
    # join medium (1 + 1 <= 2, 160 <= 300): it must share GPU 1, never jumbo's GPU 0.
    jobs_in = [
        JobSpec("jumbo", 0.0, 1, duration=100.0, model="resnet50"),
        JobSpec("medium", 0.0, 1, duration=150.0, model="resnet18"),
        JobSpec("joiner", 0.0, 1, duration=160.0, model="resnet18"),
    ]
    policy, jobs = run(jobs_in, 2)
    assert [policy.scores[j] for j in ("jumbo", "medium", "joiner")] == [2, 1, 1]
    assert jobs["jumbo"] == (pytest.approx(0.0), pytest.approx(0.0))
    assert jobs["medium"] == (pytest.approx(0.0), pytest.approx(150.0))  # shared 0-150
    assert jobs["joiner"] == (pytest.approx(0.0), pytest.approx(150.0))


def test_a_job_leaving_the_profiler_is_no_partner_on_its_profiling_gpu():
    # Node 0 profiles (T_prof 200 s), node 1 is the main GPU; durations known, sharing free.
    # 0: p (ncf, Tiny, 1000 s) profiles. 1: m (resnet50, Jumbo, 5000 s) finds the profiler
    # busy and starts alone on node 1. 100: q (resnet50, 300 s) and 150: n (resnet18,
    # Medium, 100 s) may not join m (2 + 2, 1 + 2 > 2) and wait for the profiler.
    # 200: p leaves the profiler and q takes its GPU. In the main queue n (priority 100)
    # comes before p (1000). p still holds its profiling GPU in the ledger, but leaves it
    # in this very decision: it is no partner there (n would land on q's GPU; profiling
    # runs declare no memory, so that GPU is also full), and n waits. p joins m
    # (0 + 2 <= 2, 1000 <= 2 x 5000). 400: q leaves the profiler with 100 s left, and n
    # profiles 400-500, finishing there.
    jobs_in = [
        JobSpec("p", 0.0, 1, duration=1000.0, model="ncf"),
        JobSpec("m", 1.0, 1, duration=5000.0, model="resnet50"),
        JobSpec("q", 100.0, 1, duration=300.0, model="resnet50"),
        JobSpec("n", 150.0, 1, duration=100.0, model="resnet18"),
    ]
    policy = Lucid(LucidParams(oracle_durations=True))
    nodes = tuple(NodeSpec(f"n{i}", 1, 8, 64, gpu_mem_gb=24.0) for i in range(2))
    result = on_nodes(jobs_in, nodes, policy)
    jobs = {j.job_id: j for j in result.jobs}
    assert jobs["n"].first_start == pytest.approx(400.0) and jobs["n"].end_time == pytest.approx(500.0)
    assert jobs["n"].shared_seconds == pytest.approx(0.0)
    assert policy.paired == 1  # p beside m


def test_jobs_leaving_the_profiler_together_get_distinct_gpus_under_a_pair():
    # Reproduces a crash: node 0 profiles (2 GPUs, T_prof 200 s), node 1 (2 GPUs) is main.
    # 0: a (ncf, 2000 s) and b (ncf, 1000 s) profile; big (2 GPUs, 200 s) takes node 1.
    # 10, 20: f1, f2 (resnet50, 150 s) and 30: n (ncf, 1500 s) wait (no partner of their
    # GPU count, no free GPU). 200: big ends; a and b leave the profiler, f1 and f2 take
    # it. Main queue by priority: b (1000) goes alone to node 1, n (1500 <= 2 x 1000, Tiny
    # + Tiny) joins b at once, then a (2000) goes alone. a and b are moves the engine
    # holds in the order they entered the decision (a first): a must not land on b's GPU.
    # b has 800 s left: ends 1000, shared with n 200-1000; n ends 1700; a ends 2000.
    jobs_in = [
        JobSpec("a", 0.0, 1, duration=2000.0, model="ncf"),
        JobSpec("b", 0.0, 1, duration=1000.0, model="ncf"),
        JobSpec("big", 0.0, 2, duration=200.0, model="resnet50"),
        JobSpec("f1", 10.0, 1, duration=150.0, model="resnet50"),
        JobSpec("f2", 20.0, 1, duration=150.0, model="resnet50"),
        JobSpec("n", 30.0, 1, duration=1500.0, model="ncf"),
    ]
    policy = Lucid(LucidParams(oracle_durations=True))
    nodes = tuple(NodeSpec(f"n{i}", 2, 16, 128, gpu_mem_gb=24.0) for i in range(2))
    result = on_nodes(jobs_in, nodes, policy)
    jobs = {j.job_id: (j.first_start, j.end_time, j.shared_seconds) for j in result.jobs}
    assert jobs["n"] == (pytest.approx(200.0), pytest.approx(1700.0), pytest.approx(800.0))
    assert jobs["b"][1:] == (pytest.approx(1000.0), pytest.approx(800.0))
    assert jobs["a"][1:] == (pytest.approx(2000.0), pytest.approx(0.0))


def test_a_job_placed_without_declared_gpu_memory_is_not_offered_in_the_same_pass():
    # Under pair_profiled_only a job the profiler never measured is placed before its
    # features are read, so its placement declares no GPU memory: the engine counts it as
    # holding the whole GPU (engine/sharing.py), and a newcomer joining it in the same
    # decision overfilled the GPU's memory (a PolicyError on the Philly week). The same
    # placement with its memory declared may be offered.
    from shapeshift.model import Allocation, Resources
    from shapeshift.perf.colocation import SharingProfile

    policy = Lucid(LucidParams(pair_profiled_only=True))
    spec = JobSpec("solo", 0.0, 1, duration=100.0, model="ncf")
    policy.features["solo"] = SharingProfile(gpu_util=0.3, mem_bw=0.2, gpu_mem_gb=4.0)
    placed = ((0, Resources(1, 1, 1.0)),)
    assert not policy._may_offer(spec, Allocation(placed), largest=8)
    assert policy._may_offer(spec, Allocation(placed, gpu_mem_gb=4.0), largest=8)
