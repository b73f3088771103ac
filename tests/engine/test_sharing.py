"""Shared GPUs in the engine: hard limits, exact interference, metrics (hand-computed)."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from shapeshift.analysis.metrics import job_rows, summarize
from shapeshift.engine.contract import ARRIVAL, COMPLETION, PolicyError
from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.model import Allocation, ClusterSpec, JobSpec, NodeSpec, Resources, Schedule
from shapeshift.perf.colocation import PairTable, UtilisationInterference, profile_of
from shapeshift.sim.simulator import simulate


def one_gpu(limit: int = 2, gpu_mem: float = 24.0, gpus: int = 1) -> ClusterSpec:
    node = NodeSpec("n0", gpus=gpus, cpus=8 * gpus, mem_gb=64 * gpus, gpu_mem_gb=gpu_mem)
    return ClusterSpec((node,), gpu_share_limit=limit)


@dataclass
class Scripted:
    """Launches each job at arrival on the GPUs and memory the script names."""

    script: dict[str, Allocation]
    name: str = "scripted"
    triggers: frozenset[str] = frozenset({ARRIVAL, COMPLETION})
    default_round: float | None = None
    seen: list[str] = field(default_factory=list)

    def decide(self, view):
        changes = {}
        for job_id in list(view.pending("")):
            changes[job_id] = self.script[job_id]
        return Schedule(base=view.allocations, changes=changes)


def on_gpu0(mem: float | None) -> Allocation:
    return Allocation(((0, Resources(1)),), devices=((0, 0),), gpu_mem_gb=mem)


@dataclass(frozen=True)
class Fixed:
    """Pair speeds by job id: A runs at 0.5 beside B, B at 0.8 beside A."""

    def pair_speed(self, job, partner):
        return {"A": 0.5, "B": 0.8}[job.job_id]


def test_partners_slow_each_other_exactly_and_speed_returns():
    # A (100 s of work) starts alone at 0; B (40 s) joins A's GPU at 20.
    # 0-20: A alone, progress 20. From 20 both share: A at 0.5, B at 0.8.
    # B needs 40 / 0.8 = 50 s -> ends at 70; A gains 0.5 * 50 = 25 -> 45 done at 70.
    # After 70 A is alone again at full speed: 55 left -> ends at 125.
    jobs = [JobSpec("A", 0.0, 1, duration=100.0), JobSpec("B", 20.0, 1, duration=40.0)]
    policy = Scripted({"A": on_gpu0(10.0), "B": on_gpu0(10.0)})
    result = simulate(jobs, one_gpu(), policy, overheads=Overheads(0.0, 0.0), interference=Fixed())
    ends = {j.job_id: j.end_time for j in result.jobs}
    assert ends == {"A": pytest.approx(125.0), "B": pytest.approx(70.0)}
    shared = {j.job_id: j.shared_seconds for j in result.jobs}
    assert shared == {"A": pytest.approx(50.0), "B": pytest.approx(50.0)}
    summary = summarize(result)
    # The GPU is busy 0-125 and counted once: utilisation 125 / (1 GPU x 125 s) = 1.
    assert summary["gpu_utilization"] == pytest.approx(1.0)
    # Shared GPU time 20-70 = 50 of 125 busy GPU-seconds.
    assert summary["shared_gpu_time_share"] == pytest.approx(0.4)
    # 100 s held while sharing; lost to interference 0.5 * 50 + 0.2 * 50 = 35 -> 100 / 65.
    assert summary["shared_slowdown"] == pytest.approx(100.0 / 65.0)
    assert summary["shared_jobs"] == 2
    rows = {row[0]: row for row in job_rows(result)}
    assert rows["B"][-1] == pytest.approx(50.0)


def test_default_model_slows_busy_pairs_more_than_idle_ones():
    # 1 / (1 + 0.28 u_a u_b + 0.43 m_a m_b) with ResNet50 (0.989, 0.774) beside itself:
    # 1 / (1 + 0.28 * 0.978 + 0.43 * 0.599) = 1 / 1.5313 = 0.653.
    model = UtilisationInterference()
    busy = JobSpec("x", 0.0, 1, duration=1.0, model="resnet50")
    idle = JobSpec("y", 0.0, 1, duration=1.0, model="ncf")
    assert model.pair_speed(busy, busy) == pytest.approx(1 / (1 + 0.28 * 0.989**2 + 0.43 * 0.774**2))
    assert model.pair_speed(busy, busy) == pytest.approx(0.653, abs=1e-3)
    assert model.pair_speed(idle, idle) > 0.99
    assert profile_of(JobSpec("z", 0.0, 1, duration=1.0), seed=3) == profile_of(
        JobSpec("z", 5.0, 2, duration=9.0), seed=3
    )


def test_pair_table_replaces_the_formula_for_its_pairs(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("model_a,model_b,speed_a,speed_b\nvgg16,resnet50,0.7,0.9\n")
    table = PairTable.from_csv(path)
    vgg = JobSpec("a", 0.0, 1, duration=1.0, model="vgg16")
    resnet = JobSpec("b", 0.0, 1, duration=1.0, model="resnet50")
    assert (table.pair_speed(vgg, resnet), table.pair_speed(resnet, vgg)) == (0.7, 0.9)
    assert table.pair_speed(vgg, vgg) == UtilisationInterference().pair_speed(vgg, vgg)
    path.write_text("model_a,model_b,speed_a,speed_b\nvgg16,resnet50,nan,0.9\n")
    with pytest.raises(InputError, match=r"pairs.csv:2, field .speed_a."):
        PairTable.from_csv(path)


@pytest.mark.parametrize(
    ("cluster", "second", "message"),
    [
        (one_gpu(limit=1), on_gpu0(10.0), "one job per GPU"),
        (one_gpu(gpu_mem=24.0), on_gpu0(20.0), "24 GB memory"),
        (one_gpu(), on_gpu0(None), "24 GB memory"),  # no memory declared = the whole GPU
    ],
)
def test_engine_refuses_sharing_beyond_its_limits(cluster, second, message):
    jobs = [JobSpec("A", 0.0, 1, duration=100.0), JobSpec("B", 1.0, 1, duration=40.0)]
    first = on_gpu0(10.0) if cluster.gpu_share_limit > 1 else Allocation(((0, Resources(1)),))
    with pytest.raises(PolicyError, match=message):
        simulate(jobs, cluster, Scripted({"A": first, "B": second}), overheads=Overheads(0.0, 0.0))


def test_per_gpu_job_limit_is_hard():
    jobs = [JobSpec(j, float(i), 1, duration=100.0) for i, j in enumerate("ABC")]
    script = {j: on_gpu0(5.0) for j in "ABC"}
    with pytest.raises(PolicyError, match="limit 2"):
        simulate(jobs, one_gpu(limit=2), Scripted(script), overheads=Overheads(0.0, 0.0))


def test_count_based_placement_takes_empty_gpus_on_a_sharing_cluster():
    # A holds GPU 0 by name; B asks for 1 GPU by count: it gets GPU 1, alone, full speed.
    jobs = [JobSpec("A", 0.0, 1, duration=10.0), JobSpec("B", 0.0, 1, duration=10.0)]
    script = {"A": on_gpu0(10.0), "B": Allocation(((0, Resources(1)),))}
    result = simulate(jobs, one_gpu(gpus=2), Scripted(script), overheads=Overheads(0.0, 0.0), interference=Fixed())
    assert {j.job_id: (j.end_time, j.shared_seconds) for j in result.jobs} == {"A": (10.0, 0.0), "B": (10.0, 0.0)}


@pytest.mark.parametrize("run", ["timesliced-1", "timesliced-2", "mps"])
def test_the_h100_tables_in_docs_load_as_interference_tables(run):
    """docs/sharing.md tells users to pass these files as ``RunSpec(interference=...)``:
    each must load, hold all 15 pairs of its six models, and answer a pair of catalogued
    models (names match case-insensitively) with the speeds its row gives."""
    path = Path(__file__).resolve().parents[2] / "docs" / "data" / "h100-colocation" / run / "pairs.csv"
    table = PairTable.from_csv(path)
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 15 and all(0 < float(r[k]) <= 1.5 for r in rows for k in ("speed_a", "speed_b"))
    row = next(r for r in rows if {r["model_a"], r["model_b"]} == {"ncf", "bert-base"})
    first = JobSpec("a", 0.0, 1, duration=1.0, model=row["model_a"].upper())
    second = JobSpec("b", 0.0, 1, duration=1.0, model=row["model_b"].upper())
    assert table.pair_speed(first, second) == float(row["speed_a"])
    assert table.pair_speed(second, first) == float(row["speed_b"])


def test_the_combined_h100_table_covers_every_pair_of_its_six_models():
    """``timesliced-all-pairs.csv`` (the table docs/sharing.md recommends) is run 1's 15
    pairs of different models plus each model beside its own copy: 6 x 6 = 36 directed
    entries, and the same-model entry answers a job beside its own model."""
    base = Path(__file__).resolve().parents[2] / "docs" / "data" / "h100-colocation"
    table = PairTable.from_csv(base / "timesliced-all-pairs.csv")
    models = {r["model"] for r in csv.DictReader((base / "timesliced-1" / "solo.csv").open())}
    assert len(models) == 6
    assert set(table.speeds) == {(a, b) for a in models for b in models}
    same_rows = csv.DictReader((base / "timesliced-same-model" / "pairs.csv").open())
    same = next(r for r in same_rows if r["model_a"] == "lstm")
    lstm = JobSpec("a", 0.0, 1, duration=1.0, model="lstm")
    assert table.pair_speed(lstm, JobSpec("b", 0.0, 1, duration=1.0, model="LSTM")) == float(same["speed_a"])
