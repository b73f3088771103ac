"""Lucid's pair speeds: the artifact's "little influence" rule (S-Lab-System-Group/Lucid,
``simulation/updater.py`` ``ColocateUpdater.check_outside_job``): a pair runs at full speed
for both jobs when either is NeuMF, ResNet50, BERT or Transformer."""

from __future__ import annotations

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.model import ClusterSpec, JobSpec, NodeSpec
from shapeshift.perf.colocation import profile_of
from shapeshift.policies.lucid.params import LucidParams
from shapeshift.policies.lucid.speeds import artifact_model
from shapeshift.runs import RunSpec, run
from shapeshift.workloads.workload import Workload

# Profiles (shapeshift.perf.colocation.PROFILED): GPU utilisation u, memory bandwidth m.
U_NEUMF, M_NEUMF = 0.101, 0.020
U_RESNET18, M_RESNET18 = 0.694, 0.395
U_VGG, M_VGG = 0.452, 0.241


def default_speed(u_a: float, m_a: float, u_b: float, m_b: float) -> float:
    """The default interference model, 1 / (1 + 0.28 u_a u_b + 0.43 m_a m_b): the same for
    both jobs of a pair, as the formula is symmetric."""
    return 1.0 / (1.0 + 0.28 * u_a * u_b + 0.43 * m_a * m_b)


def ends(models: tuple[str, str], **params: object) -> tuple[dict[str, float], dict]:
    """Two 1-GPU jobs submitted at 0 on one GPU shared by at most two jobs (16 GB), no
    profiler, durations known (priority = GPUs x duration), no restart costs: "a" (1,000
    s) takes the GPU first (priority 1,000 < 2,000) and "b" (2,000 s) joins it in the same
    pass (2,000 <= 2 x 1,000; scores and memory checked per case). Through ``run()``, the
    path that hands the engine Lucid's interference model."""
    jobs = [
        JobSpec("a", 0.0, 1, duration=1000.0, model=models[0]),
        JobSpec("b", 0.0, 1, duration=2000.0, model=models[1]),
    ]
    cluster = ClusterSpec((NodeSpec("n0", 1, 8, 64, gpu_mem_gb=16.0),), gpu_share_limit=2)
    args = {"profiler_nodes": 0, "oracle_durations": True, **params}
    spec = RunSpec(
        Workload.from_jobs("pair", jobs), cluster, policy="lucid", params=tuple(args.items()),
        overheads=Overheads(0.0, 0.0),
    )
    result = run(spec)
    return {j.job_id: j.end_time for j in result.simulation.jobs}, result.summary


def test_a_pair_with_neumf_runs_both_jobs_at_full_speed():
    # a = ncf (NeuMF, Tiny 0), b = resnet18 (ResNet18, Medium 1): scores 0 + 1 <= 2,
    # memory 2.1 + 3.0 <= 16 GB, so b joins a at 0. NeuMF is listed: both run at speed 1
    # and end at their times alone, 1,000 and 2,000 s.
    t, summary = ends(("ncf", "resnet18"))
    assert t == {"a": pytest.approx(1000.0), "b": pytest.approx(2000.0)}
    assert summary["lucid_paired"] == 1 and summary["lucid_paired_full_speed"] == 1


def test_the_rule_off_slows_the_same_pair_by_the_model():
    # full_speed_pair_models= (empty, as typed on the command line): the same pair runs at
    # s = 1 / (1 + 0.28 x 0.101 x 0.694 + 0.43 x 0.020 x 0.395) = 0.9775 for both.
    # a's 1,000 s of work end at 1,000 / s = 1,023.0 s; b has done as much by then and
    # runs its last 1,000 s alone: 1,000 / s + 1,000 = 2,023.0 s.
    s = default_speed(U_NEUMF, M_NEUMF, U_RESNET18, M_RESNET18)
    t, summary = ends(("ncf", "resnet18"), full_speed_pair_models="")
    assert t == {"a": pytest.approx(1000.0 / s), "b": pytest.approx(1000.0 / s + 1000.0)}
    assert 1000.0 / s == pytest.approx(1023.0, abs=0.1)
    assert summary["lucid_paired"] == 1 and summary["lucid_paired_full_speed"] == 0


def test_a_pair_of_models_not_listed_is_slowed_by_the_model():
    # a = resnet18 (ResNet18, Medium 1), b = vgg16 (VGG, Medium 1): 1 + 1 <= 2, 3.0 + 3.3
    # GB; neither is listed, so both run at s = 1 / (1 + 0.28 x 0.694 x 0.452 + 0.43 x
    # 0.395 x 0.241) = 0.8859: a ends at 1,000 / s = 1,128.8 s, b at 1,000 / s + 1,000.
    s = default_speed(U_RESNET18, M_RESNET18, U_VGG, M_VGG)
    for params in ({}, {"full_speed_pair_models": ""}):
        t, summary = ends(("resnet18", "vgg16"), **params)
        assert t == {"a": pytest.approx(1000.0 / s), "b": pytest.approx(1000.0 / s + 1000.0)}
        assert summary["lucid_paired"] == 1 and summary["lucid_paired_full_speed"] == 0
    assert 1000.0 / s == pytest.approx(1128.8, abs=0.1)


def test_a_listed_model_of_our_own_list_counts_for_both_jobs():
    # Only ResNet18 listed: the pair of the test above (ResNet18 with VGG) runs at full
    # speed for both jobs, VGG included.
    t, _ = ends(("resnet18", "vgg16"), full_speed_pair_models="ResNet18")
    assert t == {"a": pytest.approx(1000.0), "b": pytest.approx(2000.0)}


def test_our_model_names_map_to_the_artifacts_explicitly():
    def named(model: str) -> str:
        return artifact_model(JobSpec("j", 0.0, 1, duration=1.0, model=model))

    assert [named(m) for m in ("ncf", "recommendation", "NeuMF")] == ["NeuMF"] * 3
    assert [named(m) for m in ("resnet50", "yolov3", "ResNet50")] == ["ResNet50"] * 3
    assert [named(m) for m in ("transformer", "bert-base")] == ["Transformer", "BERT"]
    # The whole-GPU transformers have no artifact model ("BERT" lower-cases to "bert").
    assert named("bert") == named("BERT") == named("gpt2") == ""
    # A job without a catalogued model (Philly) is the model its profile is drawn from.
    philly = JobSpec("4711", 0.0, 1, duration=1.0)
    assert artifact_model(philly, 3) == profile_of(philly, 3).profiled_as


def test_only_the_artifacts_model_names_are_accepted():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="not one of the artifact's models"):
        LucidParams(full_speed_pair_models=("resnet50",))
    assert LucidParams().full_speed_pair_models == ("NeuMF", "ResNet50", "BERT", "Transformer")
