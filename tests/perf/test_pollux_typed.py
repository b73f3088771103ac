"""Per-GPU-type Pollux profiles (the Sia artifact's ``placements-<type>.csv`` layout).

A tiny application ``toy`` with two GPU types: ``slow`` (the untyped files, and its own
typed copy) and ``fast`` (half the step time, and room for only 32 examples per GPU).
Every expectation below is worked from these rows by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shapeshift.model import Allocation, BatchSpec, ClusterSpec, JobSpec, NodeSpec, Resources
from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth
from shapeshift.perf.pollux.knowledge import GoodputKnowledge, single_gpu_throughput
from shapeshift.perf.pollux.profiles import load_profile, typed_profiles

# Two epochs of 100 steps at the initial batch 32; noise-free gradients (grad_var = 0), so
# batch 32 x scale has statistical efficiency (0 + g) / (0 / scale + g) / scale = 1 / scale.
VALIDATION = "progress,iteration,metric,grad_sqr,grad_var\n100,100,0.5,1.0,0.0\n200,200,0.6,1.0,0.0\n"
SLOW = "placement,local_bsz,step_time,sync_time\n1,16,0.05,0.0\n1,64,0.2,0.0\n2,16,0.06,0.01\n2,64,0.21,0.01\n"
FAST = "placement,local_bsz,step_time,sync_time\n1,16,0.025,0.0\n1,32,0.05,0.0\n2,16,0.03,0.005\n2,32,0.055,0.005\n"
SCALE = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n2,2,16,0.08,0.03\n"


def _profiles(tmp_path: Path) -> Path:
    app = tmp_path / "toy"
    app.mkdir()
    (app / "validation-32.csv").write_text(VALIDATION)
    (app / "validation-128.csv").write_text(VALIDATION)
    for name, text in (("placements.csv", SLOW), ("placements-slow.csv", SLOW), ("placements-fast.csv", FAST)):
        (app / name).write_text(text)
    for name in ("scalability.csv", "scalability-slow.csv", "scalability-fast.csv"):
        (app / name).write_text(SCALE)
    (app / "placements-half.csv").write_text(FAST)  # no scalability-half.csv: not a typed profile
    return tmp_path


def _job(size: int, adaptive: bool = False) -> JobSpec:
    batch = BatchSpec(size, 32, 128, 16, 64, adaptive=adaptive)
    return JobSpec("j", 0.0, 1, iterations=0, model="pollux/toy", batch=batch)


def _cluster() -> tuple[str, ...]:
    spec = ClusterSpec((NodeSpec("s0", 2, 16, 64, gpu_type="slow"), NodeSpec("f0", 2, 16, 64, gpu_type="fast")))
    return tuple(n.gpu_type for n in spec.nodes)


def test_typed_files_are_used_where_both_exist(tmp_path):
    root = str(_profiles(tmp_path).resolve())
    assert typed_profiles(root, "toy") == ("fast", "slow")
    assert load_profile(root, "toy", "fast").gpu_type == "fast"
    # "half" has placements but no scalability file, "other" has neither: the untyped profile.
    assert load_profile(root, "toy", "half").gpu_type is None
    assert load_profile(root, "toy", "other").gpu_type is None
    # The fast type measured local batches up to 32: its per-GPU limit.
    assert load_profile(root, "toy", "fast").max_local == 32
    assert load_profile(root, "toy", None).max_local == 64


def test_ground_truth_runs_each_type_at_its_own_speed(tmp_path):
    truth = PolluxGroundTruth(_profiles(tmp_path), _cluster())
    job = _job(32)
    on_slow = Allocation(((0, Resources(1)),))
    on_fast = Allocation(((1, Resources(1)),))
    # Batch 32 on one GPU, no accumulation: slow step = interp(32; 16->0.05, 64->0.2)
    # = 0.05 + 16/48 x 0.15 = 0.1 s -> 320 examples/s; fast step 0.05 s -> 640 examples/s.
    assert truth.rate(job, on_slow) == pytest.approx(320.0)
    assert truth.rate(job, on_fast) == pytest.approx(640.0)


def test_a_types_memory_limit_makes_the_job_accumulate(tmp_path):
    truth = PolluxGroundTruth(_profiles(tmp_path), _cluster())
    job = _job(64)
    # Batch 64 on one slow GPU: local 64 fits (max 64) but one GPU above the initial
    # batch accumulates once: atomic 32, step 0.1 + 1 x (0.1 - 0) = 0.2 s; efficiency
    # with grad_var 0 is 1/2 -> 64 x 0.5 / 0.2 = 160 examples/s.
    assert truth.rate(job, Allocation(((0, Resources(1)),))) == pytest.approx(160.0)
    # On the fast type (32 per GPU at most) the same split: atomic 32, step 0.05 + 0.05 = 0.1 s
    # -> 64 x 0.5 / 0.1 = 320 examples/s.
    assert truth.rate(job, Allocation(((1, Resources(1)),))) == pytest.approx(320.0)


def test_calibration_divides_by_the_artifacts_slowdown(tmp_path):
    root = _profiles(tmp_path)
    plain = PolluxGroundTruth(root, _cluster())
    calibrated = PolluxGroundTruth(root, _cluster(), calibrate=True)
    job = JobSpec("c", 0.0, 1, iterations=0, model="pollux/toy", batch=BatchSpec(32, 32, 128, 16, 64))
    alloc = Allocation(((0, Resources(1)),))
    # "toy" has no slowdown in the artifact's table: factor 1.
    assert calibrated.rate(job, alloc) == pytest.approx(plain.rate(job, alloc))
    # The same rows under CIFAR-10's name: the artifact slows CIFAR-10 by 1.8.
    other = tmp_path / "named"
    other.mkdir()
    (_profiles(other) / "toy").rename(other / "cifar10")
    rows = "".join(f"{100 * e},{100 * e},0.5,1.0,0.0\n" for e in range(1, 101))  # CIFAR-10 trains 100 epochs
    for size in (32, 128):
        (other / "cifar10" / f"validation-{size}.csv").write_text(VALIDATION.splitlines()[0] + "\n" + rows)
    root = other
    cifar = JobSpec("c", 0.0, 1, iterations=0, model="pollux/cifar10", batch=BatchSpec(32, 32, 128, 16, 64))
    slow = PolluxGroundTruth(root, _cluster(), calibrate=True).rate(cifar, alloc)
    assert slow == pytest.approx(PolluxGroundTruth(root, _cluster()).rate(cifar, alloc) / 1.8)


def test_single_gpu_throughput_and_type_ratio(tmp_path):
    root = str(_profiles(tmp_path).resolve())
    # The artifact's rating: largest local batch / largest step time on one GPU:
    # slow 64 / 0.2 = 320, fast 32 / 0.05 = 640.
    assert single_gpu_throughput(root, "toy", "slow") == pytest.approx(320.0)
    assert single_gpu_throughput(root, "toy", "fast") == pytest.approx(640.0)
    knowledge = GoodputKnowledge(root)
    assert knowledge.type_ratio(_job(32), "fast", "slow") == pytest.approx(2.0)


def test_policy_limits_follow_the_type(tmp_path):
    knowledge = GoodputKnowledge(str(_profiles(tmp_path)))
    job = _job(32, adaptive=True)
    assert knowledge.job(job, None, 0.0, "fast").limits.max_local == 32
    assert knowledge.job(job, None, 0.0, "slow").limits.max_local == 64
    assert knowledge.job(job, None, 0.0, None).limits.max_local == 64


def test_fixed_batch_throughput_as_the_artifact_feeds_gavel(tmp_path):
    from shapeshift.perf.pollux.reference import fixed_batch_throughput

    root = str(_profiles(tmp_path).resolve())
    # 1 GPU, batch 32: the artifact's Gavel accumulates at least once on one GPU: atomic 16,
    # slow 0.05 + 1 x (0.05 - 0) = 0.1 s -> 320 examples/s; fast 0.025 x 2 = 0.05 s -> 640.
    assert fixed_batch_throughput(root, "toy", "slow", 1, 2, 32) == pytest.approx(320.0)
    assert fixed_batch_throughput(root, "toy", "fast", 1, 2, 32) == pytest.approx(640.0)
    # 2 GPUs on one node, local 16, no accumulation: placement "2" at 16: slow 0.06 s
    # -> 32 / 0.06 = 533.3; fast 0.03 s -> 1066.7.
    assert fixed_batch_throughput(root, "toy", "slow", 2, 2, 32) == pytest.approx(32 / 0.06)
    assert fixed_batch_throughput(root, "toy", "fast", 2, 2, 32) == pytest.approx(32 / 0.03)


def test_gavel_with_profiles_rates_pollux_jobs_per_type(tmp_path):
    from shapeshift.policies.gavel.policy import GavelPolicy

    root = str(_profiles(tmp_path).resolve())
    job = _job(32)
    # In steps/s, the artifact's predict_xput unit: 640 examples/s at batch 32 = 20 steps/s.
    assert GavelPolicy(360.0, profiles=root)._speed(job, "fast", 2) == pytest.approx(20.0)
    # Without profiles: the job's own or the catalog's speed (no per-type profile).
    assert GavelPolicy(360.0)._speed(job, "fast", 2) != pytest.approx(20.0)


def test_a_typed_profile_caps_the_local_batch_by_what_its_placement_measured(tmp_path):
    # The Sia artifact's ``get_max_local_bsz``: the largest local batch measured on the
    # placement; for one it never measured, on any larger configuration of the
    # scalability table; never above what any placement of as many GPUs measured.
    root = str(_profiles(tmp_path).resolve())
    slow = load_profile(root, "toy", "slow")
    assert slow.local_cap((1,)) == 64  # placement "1" measured 16 and 64
    assert slow.local_cap((2,)) == 64
    # "11" (two nodes, one GPU each) is not in placements-slow.csv: the scalability rows
    # with >= 2 nodes and >= 2 replicas measured 16; placement "2" (2 GPUs) measured 64.
    assert slow.local_cap((1, 1)) == 16
    assert load_profile(root, "toy", "fast").local_cap((1,)) == 32
    assert load_profile(root, "toy", None).local_cap((1, 1)) == 64  # untyped: the application's limit


def test_a_local_batch_above_the_placements_cap_accumulates(tmp_path):
    truth = PolluxGroundTruth(_profiles(tmp_path), ("slow", "slow"))
    job = _job(32, adaptive=True)
    # Batch 64 over two slow nodes, one GPU each: local 32 > the placement's cap 16, so one
    # accumulation step at atomic 16. The step at (2 nodes, 2 replicas, 16) is the
    # scalability row, 0.08 s with 0.03 s sync: 0.08 + 1 x (0.08 - 0.03) = 0.13 s; noise-free
    # gradients give efficiency 32 / 64 = 0.5 -> 64 x 0.5 / 0.13 examples/s.
    spread = Allocation(((0, Resources(1)), (1, Resources(1))), batch_size=64)
    assert truth.rate(job, spread) == pytest.approx(64 * 0.5 / 0.13)


def test_gavels_profiled_throughput_splits_by_the_placements_cap(tmp_path):
    from shapeshift.perf.pollux.reference import fixed_batch_throughput

    root = str(_profiles(tmp_path).resolve())
    # The artifact's ``predict_xput``: batch 64 on 2 slow GPUs one per node, placement "11",
    # local 32 above its cap 16 (``get_max_local_bsz``): one accumulation at atomic 16, the
    # scalability row's 0.08 s step with 0.03 s sync: 64 / (0.08 + 0.05) examples/s.
    assert fixed_batch_throughput(root, "toy", "slow", 2, 1, 64) == pytest.approx(64 / 0.13)


def test_typed_yolov3_limit_is_what_the_type_measured(tmp_path):
    # The Pollux simulator caps YOLOv3 at 8 per GPU (its APPLICATIONS table); the Sia
    # artifact builds its typed applications without that cap, so each type's limit is
    # the largest local batch in its placements-<type>.csv ("applications.py",
    # ``max_local_bsz or self.placements.local_bsz.max()``). Rows measured up to 16 on
    # "wide": typed limit 16, the untyped profile keeps the table's 8.
    app = tmp_path / "yolov3"
    app.mkdir()
    # 50 epochs: the table's training length for YOLOv3.
    epochs = "".join(f"{100 * e},{100 * e},0.5,1.0,0.0\n" for e in range(1, 51))
    (app / "validation-8.csv").write_text("progress,iteration,metric,grad_sqr,grad_var\n" + epochs)
    rows = "placement,local_bsz,step_time,sync_time\n1,4,0.1,0.0\n1,16,0.3,0.0\n"
    for kind, text in (("placements", rows), ("scalability", SCALE)):
        (app / f"{kind}.csv").write_text(text)
        (app / f"{kind}-wide.csv").write_text(text)
    root = str(tmp_path.resolve())
    assert load_profile(root, "yolov3", "wide").max_local == 16
    assert load_profile(root, "yolov3", None).max_local == 8
