"""Sia's per-type goodput and restart factor against the artifact's rules, on the toy
two-type profile of ``tests/perf/test_pollux_typed.py`` (``slow`` and ``fast``, the fast
type's 1-GPU throughput twice the slow one's)."""

from __future__ import annotations

import pytest

from shapeshift.engine.engine import Engine
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, BatchSpec, ClusterSpec, JobSpec, NodeSpec, Resources
from shapeshift.perf.pollux.goodput import step_time
from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth
from shapeshift.policies.goodput.sia import SiaParams, SiaPolicy, _Job, _Option
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor
from tests.perf.test_pollux_typed import _profiles

CLUSTER = ClusterSpec(
    (NodeSpec("s0", 2, 16, 64, gpu_type="slow"), NodeSpec("f0", 2, 16, 64, gpu_type="fast"))
)
TYPES = {"fast": (2, 1), "slow": (2, 1)}


ADAPTIVE = BatchSpec(32, 32, 128, 16, 64, adaptive=True)


def _view(tmp_path, now=60.0, batch=ADAPTIVE, **params):
    root = _profiles(tmp_path)
    policy = SiaPolicy(SiaParams(profiles=str(root), **params), SiaParams().knowledge())
    truth = PolluxGroundTruth(root, tuple(n.gpu_type for n in CLUSTER.nodes))
    engine = Engine(CLUSTER, policy, SimulatedExecutor(truth, CompletionQueue()))
    spec = JobSpec("j", 0.0, 1, iterations=1, model="pollux/toy", batch=batch)
    engine.submit(spec, 0.0)
    return policy, ClusterView(engine, now, frozenset({""}), True)


def test_before_its_first_run_a_job_has_one_equal_option_per_type(tmp_path):
    # The artifact has no model for a job that never ran: its 1-GPU configuration on every
    # type, each worth 1 (``nnz_speedups``).
    policy, view = _view(tmp_path)
    job = policy._job(view, "j", TYPES)
    assert sorted((o.gpu_type, o.gpus, o.goodput) for o in job.options) == [("fast", 1, 1.0), ("slow", 1, 1.0)]


def test_a_type_not_run_on_is_projected_by_the_1gpu_throughput_ratio(tmp_path):
    policy, view = _view(tmp_path, goodput_model="offline")
    policy._ran["j"] = ["slow"]
    policy._seen["j"] = 1  # ran on 1 GPU: explores up to 2
    job = policy._job(view, "j", TYPES)
    got = {(o.gpu_type, o.gpus): o.goodput for o in job.options}
    assert set(got) == {("fast", 1), ("fast", 2), ("slow", 1), ("slow", 2)}
    # fast = slow's model at the same replicas x (640 / 320) examples/s on one GPU.
    assert got["fast", 1] == pytest.approx(2 * got["slow", 1])
    assert got["fast", 2] == pytest.approx(2 * got["slow", 2])


@pytest.mark.parametrize(
    ("fixed_batch", "pin", "counts"), [("keep", True, [1]), ("keep", False, [1, 2]), ("tune", True, [1, 2])]
)
def test_a_fixed_batch_job_is_pinned_at_its_request_unless_pin_fixed_batch_is_off(tmp_path, fixed_batch, pin, counts):
    # A fixed-batch job (NCF-like: global batch 64, adaptive=False) asking for 1 GPU that
    # has run on 1 GPU. Run at its fixed batch (``fixed_batch=keep``), the artifact means
    # to give NCF at most its request (``get_sia_multi_job_info``: 1 replica), so pinned
    # its options are 1 GPU per type. Unpinned (the artifact as it runs: its check never
    # fires) the cap is min(explore: 2 x 1 replica = 2, max_size / min_local = 64 / 16 =
    # 4) = 2, and each type's one 2-GPU node offers 1 and 2 GPUs. With its batch tuned
    # (the default) it is not a fixed-batch job for Sia, so the pin does not hold it.
    fixed = BatchSpec(64, 64, 64, 16, 64, adaptive=False)
    params = {"goodput_model": "offline", "pin_fixed_batch": pin, "fixed_batch": fixed_batch}
    policy, view = _view(tmp_path, batch=fixed, **params)
    policy._ran["j"] = ["slow"]
    policy._seen["j"] = 1
    job = policy._job(view, "j", TYPES)
    assert job.kind == "pollux"
    for gpu_type in ("fast", "slow"):
        assert sorted(o.gpus for o in job.options if o.gpu_type == gpu_type) == counts


def _ran_one_gpu_on_slow(policy, view):
    # The job reports one step on 1 slow GPU at batch 32 (no accumulation): the slow
    # profile's step there is interp(32; 16 -> 0.05, 64 -> 0.2) = 0.1 s, sync 0.
    on_slow = Allocation(((0, Resources(1)),), batch_size=32)
    policy.online.observe(view.job("j").spec, on_slow, "slow")


def test_the_online_model_is_the_jobs_own_on_the_type_it_ran_on(tmp_path):
    policy, view = _view(tmp_path)
    _ran_one_gpu_on_slow(policy, view)
    fitted = policy.online.params("j", "slow")
    assert policy.online.params("j", "fast") is None  # never ran there
    # One row: the artifact's fit fixes alpha_c at half the compute time and fits the
    # rest, so the model reproduces the one step it saw.
    assert float(step_time(fitted, 1, 1, 32)) == pytest.approx(0.1, rel=1e-3)
    assert policy.online.max_replicas("j") == 1


def test_online_a_type_not_run_on_is_projected_and_exploration_is_shared(tmp_path):
    policy, view = _view(tmp_path)
    _ran_one_gpu_on_slow(policy, view)
    job = policy._job(view, "j", TYPES)
    got = {(o.gpu_type, o.gpus): o.goodput for o in job.options}
    # Ran on 1 GPU (on slow): up to 2 GPUs on every type, fast included.
    assert set(got) == {("fast", 1), ("fast", 2), ("slow", 1), ("slow", 2)}
    # fast = the job's own slow model at the same replicas x (640 / 320) examples/s on one GPU.
    assert got["fast", 1] == pytest.approx(2 * got["slow", 1])
    assert got["fast", 2] == pytest.approx(2 * got["slow", 2])


def test_online_a_job_not_yet_past_its_pause_has_no_model(tmp_path):
    # Allocated but never run (no observation): still one equal 1-GPU option per type.
    policy, view = _view(tmp_path)
    policy._ran["j"] = ["slow"]
    policy._seen["j"] = 2
    job = policy._job(view, "j", TYPES)
    assert sorted((o.gpu_type, o.gpus, o.goodput) for o in job.options) == [("fast", 1, 1.0), ("slow", 1, 1.0)]


def test_a_waiting_job_pays_no_restart_factor(tmp_path):
    policy, view = _view(tmp_path, now=60.0)
    spec = view.job("j").spec
    # Waiting (no current configuration), age 60 s > the 30 s penalty: the artifact leaves
    # its row unscaled, so the 1-GPU option costs round(1^-0.5, 2) - 1.1 = -0.1 (it is
    # worth placing). Scaled by 60 / (60 + 30) it would cost round(1.5^0.5, 2) - 1.1 = +0.12.
    waiting = _Job("j", spec, "pollux", [_Option("slow", 1, 1, 5.0)])
    assert policy.costs(view, waiting)[0] == pytest.approx(-0.1)


def test_a_running_job_pays_the_restart_factor_elsewhere(tmp_path):
    policy, view = _view(tmp_path, now=60.0)
    spec = view.job("j").spec
    # Running on option 0 (goodput 5 -> normalised 1) at age 60, no restarts, penalty 30
    # (the artifact's default for other applications): option 1 (goodput 7.5 ->
    # normalised 1.5) x 60/90 = 1 -> round(1^-0.5, 2) - 1.1 = -0.1; its own stays -0.1.
    running = _Job("j", spec, "pollux", [_Option("slow", 1, 1, 5.0), _Option("slow", 1, 2, 7.5)], current=0)
    assert policy.costs(view, running).tolist() == pytest.approx([-0.1, -0.1])


# The toy application with noisy gradients (grad_sqr 1, grad_var 100 in both epochs of
# 100 steps at the initial batch 32): a bigger batch is statistically almost as good.
NOISY = "progress,iteration,metric,grad_sqr,grad_var\n100,100,0.5,1.0,100.0\n200,200,0.6,1.0,100.0\n"


def _one_slow_node(tmp_path, **params):
    root = _profiles(tmp_path)
    for name in ("validation-32.csv", "validation-128.csv"):
        (root / "toy" / name).write_text(NOISY)
    cluster = ClusterSpec((NodeSpec("s0", 2, 16, 64, gpu_type="slow"),))
    policy = SiaPolicy(SiaParams(profiles=str(root), **params), SiaParams().knowledge())
    truth = PolluxGroundTruth(root, ("slow",))
    engine = Engine(cluster, policy, SimulatedExecutor(truth, CompletionQueue()))
    spec = JobSpec("j", 0.0, 1, iterations=1, model="pollux/toy", batch=BatchSpec(32, 32, 128, 16, 64, adaptive=True))
    engine.submit(spec, 0.0)
    engine.fire_timer()
    first = engine.step(0.0)  # a round: the job starts on 1 GPU at its initial batch 32 (no model yet)
    assert first is not None and first.changes["j"].gpus == 1 and first.changes["j"].batch_size == 32
    return policy, engine, first


def test_a_job_retunes_its_batch_when_it_finishes_an_epoch(tmp_path):
    # The artifact's ``Job.step`` re-chooses the batch after every epoch. At batch 32 on
    # one slow GPU a step takes 0.1 s (no accumulation), efficiency 1: 320 examples/s, so
    # epoch 0 (100 steps x 32 = 3,200 examples) ends at t = 10 s.
    policy, engine, first = _one_slow_node(tmp_path)
    assert first.wake_at == pytest.approx(1e-6)  # its rate is known once the launch is applied
    engine.fire_wakeup()
    again = engine.step(1e-6)
    assert again is not None and not again.changes and again.wake_at == pytest.approx(10.0)
    engine.fire_wakeup()
    retuned = engine.step(10.0)
    # At t = 10 s the job has one row, (1 node, 1 GPU, 32) -> 0.1 s: its fit fixes alpha_c
    # at half the compute, 0.05, so beta_c = 0.05 / 32 and a step at atomic b takes
    # 0.05 + b / 640. On one GPU a batch B > 32 accumulates once (atomic B / 2): step
    # 0.1 + B / 640. Goodput = 32 x gain / step with gain = (100 + 1) / (100 x 32 / B + 1):
    # B = 32: 32 / 0.1 = 320; B = 128: 32 x 101 / 26 / 0.3 = 414.4, the best of the
    # candidates (it rises with B). Same GPU: a batch change, not a restart.
    assert retuned is not None
    assert retuned.changes["j"].batch_size == 128
    assert retuned.changes["j"].placement == first.changes["j"].placement
    assert policy.online.params("j", "slow") is not None


def test_batch_retune_round_keeps_the_batch_for_the_round(tmp_path):
    # Ours: the batch is chosen once per round; no wake-up between rounds.
    _, _, first = _one_slow_node(tmp_path, batch_retune="round")
    assert first.wake_at is None


def test_a_job_restoring_on_the_same_gpus_keeps_its_batch(tmp_path):
    # The artifact re-chooses a batch at the end of Job.step's loop, which a job still in
    # its restart countdown never reaches that round. The job holds 1 slow GPU at batch 64
    # and restores until 90 s; it has no model of its own yet, so a batch chosen anew is
    # the artifact's start, max(initial 32, 16 per GPU x 1) = 32.
    policy, view = _view(tmp_path, now=60.0)
    status = view.job("j")
    status.allocation = Allocation(((0, Resources(1, 8, 32)),), batch_size=64)
    status.stall_until = 90.0
    job = _Job("j", status.spec, "pollux", [_Option("slow", 1, 1, 1.0)], current=0)

    def batch(place):
        return policy._allocation(view, job, place, {0: 16.0, 1: 16.0}, {0: 64.0, 1: 64.0}).batch_size

    assert batch({0: 1}) == 64  # restoring, same type and shape: kept
    assert batch({1: 1}) == 32  # another type: a migration, chosen anew
    status.stall_until = 30.0  # it has run since 30 s: chosen anew at the round
    assert batch({0: 1}) == 32


@pytest.mark.parametrize(("goodput_batch", "expected"), [("submitted", 320.0), ("application", 32 * 101 / 26 / 0.3)])
def test_the_goodputs_search_batches_up_to_the_submitted_one(tmp_path, goodput_batch, expected):
    # The artifact's ``Job.get_speedup_fn`` gives the goodput search the job's submitted
    # batch (``target_batch_size``, here 32) as its largest. At t = 10 s the job has one row,
    # and its model steps 0.05 + b / 640 at atomic b (see the retune test above). On one
    # slow GPU: up to batch 32 the only candidate is 32, 32 / 0.1 = 320 examples/s; up to
    # the application's 128 the best is B = 128 (atomic 64, one accumulation, 0.3 s, gain
    # 101 / 26), 32 x 101 / 26 / 0.3 = 414.4. The job's own batch is not capped: it still
    # retunes to 128 (``Job.update_local_bsz`` uses the application's largest batch).
    policy, engine, _ = _one_slow_node(tmp_path, goodput_batch=goodput_batch)
    engine.fire_wakeup()
    engine.step(1e-6)
    engine.fire_wakeup()
    retuned = engine.step(10.0)
    assert retuned is not None and retuned.changes["j"].batch_size == 128
    job = policy._job(ClusterView(engine, 10.0, frozenset({""}), True), "j", {"slow": (2, 1)})
    one_gpu = [o.goodput for o in job.options if o.gpus == 1]
    assert one_gpu == [pytest.approx(expected, rel=1e-3)]


@pytest.mark.parametrize(
    ("placement", "expected"),
    [("artifact", {"a": {0: 1}, "b": {1: 1}, "c": {2: 1}}), ("keep", {"a": {0: 1}, "b": {0: 1}, "c": {1: 1}})],
)
def test_the_default_placement_is_the_artifacts_forward_cursor(tmp_path, placement, expected):
    # Three new 1-GPU jobs on three 2-GPU nodes of one type. The artifact
    # (``alloc_to_placement_fast``) takes them in order (all equally wide), each from the
    # cursor, which then stays one node past the job's last GPU: a on node 0, b on
    # node 1, c on node 2. ``keep`` (ours) packs them on the fewest nodes: a and b on
    # node 0, c on node 1.
    root = _profiles(tmp_path)
    cluster = ClusterSpec(tuple(NodeSpec(f"s{i}", 2, 16, 64, gpu_type="slow") for i in range(3)))
    # The default (no placement given) must be the artifact's.
    default = placement == "artifact"
    params = SiaParams(profiles=str(root)) if default else SiaParams(profiles=str(root), placement="keep")
    policy = SiaPolicy(params, SiaParams().knowledge())
    engine = Engine(cluster, policy, SimulatedExecutor(PolluxGroundTruth(root, ("slow",) * 3), CompletionQueue()))
    for name in "abc":
        engine.submit(JobSpec(name, 0.0, 1, iterations=1, model="pollux/toy", batch=ADAPTIVE), 0.0)
    view = ClusterView(engine, 60.0, frozenset({""}), True)
    jobs = [_Job(name, view.job(name).spec, "pollux", [_Option("slow", 1, 1, 1.0)]) for name in "abc"]
    desired: dict[str, Allocation] = {}
    policy._place(view, jobs, {j.job_id: j.options[0] for j in jobs}, "slow", [0, 1, 2], desired, {})
    assert {j: {n: r.gpus for n, r in a.placement} for j, a in desired.items()} == expected
