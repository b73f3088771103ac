"""``pollux``'s online goodput model and epoch batch re-tuning, worked from the Pollux
artifact's rules (petuum/adaptdl ``osdi21-artifact``, ``simulator/simulator.py``):
``Job.get_speedup_fn`` (linear before the first observation), ``Job.update_local_bsz``
(``max(initial, min_local x replicas)`` without a model), ``Job.update_params`` (one row
per distinct nodes, replicas and per-GPU batch, refitted on all of them) and ``Job.step``
(the batch re-chosen between epochs); and the Sia artifact's unaware Pollux, whose rows
merge across types (``job.py``, ``h_unaware``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.engine import Engine
from shapeshift.engine.overheads import Overheads
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, BatchSpec, JobSpec, Resources
from shapeshift.perf.pollux.goodput import fit_perf_params, step_time
from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth
from shapeshift.perf.pollux.online import FIT_TOL, POLLUX_FIT_TOL, OnlineFits
from shapeshift.perf.pollux.profiles import Row, load_profile
from shapeshift.policies.goodput.pollux import PolluxParams, PolluxPolicy
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor
from tests.conftest import bundled
from tests.perf.test_pollux_typed import _profiles

CIFAR = BatchSpec(128, 128, 4096, 32, 1024, adaptive=True)


def _engine(policy, nodes, gpus, launch_delay=0.0):
    truth = PolluxGroundTruth(bundled("pollux-profiles"))
    executor = SimulatedExecutor(truth, CompletionQueue())
    engine = Engine(shorthand_cluster(nodes, gpus), policy, executor, overheads=Overheads(launch_delay=launch_delay))
    engine.submit(JobSpec("c", 0.0, 1, iterations=1, model="pollux/cifar10", batch=CIFAR), 0.0)
    return engine


def _policy(**params):
    return PolluxPolicy(PolluxParams(profiles=str(bundled("pollux-profiles")), explore=False, **params))


def test_before_its_first_observation_a_job_scales_linearly_and_starts_at_the_prior_batch():
    # No row yet: the artifact's speedup is r (``get_speedup_fn`` without perf params),
    # so alone on 2 x 4 GPUs (explore off) the job takes all 8, spanning both nodes. Its
    # batch without a model: max(initial 128, min_local 32 x 8 replicas) = 256.
    policy = _policy()
    engine = _engine(policy, 2, 4)
    view = ClusterView(engine, 60.0, frozenset({""}), True)
    (job,) = policy._jobs(view, "", 8)
    assert job.table.params is None
    assert np.array_equal(job.table.best(1, [1, 2, 4])[0], [1.0, 2.0, 4.0])
    alloc = policy.decide(view).allocations["c"]
    assert alloc.gpus == 8 and len(alloc.placement) == 2
    assert alloc.batch_size == 256


def test_after_a_two_gpu_run_the_jobs_model_is_fitted_on_that_row():
    # 1 x 2 GPUs: the linear prior gives the job both GPUs at batch max(128, 32 x 2) = 128,
    # 64 per GPU. Once it has run (the next round), it has reported one row, (1 node,
    # 2 replicas, 64 per GPU) with the profile's step and sync times there, and its model
    # is the artifact's fit on that row alone (scipy's default tolerances).
    policy = _policy()
    engine = _engine(policy, 1, 2)
    schedule = policy.decide(ClusterView(engine, 60.0, frozenset({""}), True))
    assert schedule.allocations["c"].gpus == 2 and schedule.allocations["c"].batch_size == 128
    engine.reconcile(schedule, 60.0)
    view = ClusterView(engine, 120.0, frozenset({""}), True)
    (job,) = policy._jobs(view, "", 2)
    profile = load_profile(policy.knowledge.root, "cifar10", None)
    step, sync = profile.step_sync((2,), 64)
    expected = fit_perf_params([Row(1, 2, 64.0, step, sync)], tol=POLLUX_FIT_TOL)
    assert job.table.params == expected
    assert policy.online.max_replicas("c") == 2  # explore would now allow 4
    # Offline (ours), the same job uses its application's model on the whole profile.
    offline = _policy(goodput_model="offline")
    (other,) = offline._jobs(ClusterView(_engine(offline, 1, 2), 60.0, frozenset({""}), True), "", 2)
    assert other.table.params is not None and other.table.params != expected


def test_a_job_not_yet_past_its_restart_pause_has_no_row():
    # Allocated at 60 s with a 120 s launch delay: at 120 s it has not run, so it reports
    # nothing (the artifact's ``Job.step`` spends the round in ``rescale_time``).
    policy = _policy()
    engine = _engine(policy, 1, 2, launch_delay=120.0)
    engine.reconcile(policy.decide(ClusterView(engine, 60.0, frozenset({""}), True)), 60.0)
    (job,) = policy._jobs(ClusterView(engine, 120.0, frozenset({""}), True), "", 2)
    assert job.table.params is None and policy.online.max_replicas("c") == 0


def test_the_batch_is_re_chosen_between_epochs_by_default():
    # ``batch_retune=epoch``: a decision on a running job asks to be woken at its next
    # epoch boundary (``Job.step`` re-chooses the batch there); ``round`` asks nothing.
    for retune, woken in (("epoch", True), ("round", False)):
        policy = _policy(batch_retune=retune)
        engine = _engine(policy, 1, 2)
        engine.reconcile(policy.decide(ClusterView(engine, 60.0, frozenset({""}), True)), 60.0)
        schedule = policy.decide(ClusterView(engine, 120.0, frozenset({""}), True))
        assert (schedule.wake_at is not None and schedule.wake_at > 120.0) == woken


def test_unaware_rows_merge_across_types_first_one_kept(tmp_path):
    # The toy profile: 1 GPU at batch 32 takes interp(32; 16 -> 0.05, 64 -> 0.2) = 0.1 s
    # on slow, 0.05 s on fast; 16 per GPU takes 0.025 s on fast. Merged (``h_unaware``),
    # the row (1, 1, 32) seen on slow is not recorded again on fast, and one model serves
    # every type.
    online = OnlineFits(str(_profiles(tmp_path).resolve()), FIT_TOL, merged=True)
    spec = JobSpec("j", 0.0, 1, iterations=1, model="pollux/toy", batch=BatchSpec(32, 32, 128, 16, 64, adaptive=True))
    online.observe(spec, Allocation(((0, Resources(1)),), batch_size=32), "slow")
    online.observe(spec, Allocation(((1, Resources(1)),), batch_size=32), "fast")
    assert online.params("j", "fast") == online.params("j", "slow")
    assert float(step_time(online.params("j", "fast"), 1, 1, 32)) == pytest.approx(0.1, rel=1e-3)
    online.observe(spec, Allocation(((1, Resources(1)),), batch_size=16), "fast")
    expected = fit_perf_params([Row(1, 1, 32.0, 0.1, 0.0), Row(1, 1, 16.0, 0.025, 0.0)], tol=FIT_TOL)
    assert online.params("j", "slow") == expected
    assert online.types("j") == ["slow", "fast"]


def test_a_job_restoring_on_the_same_gpus_keeps_its_batch():
    # The artifact re-chooses the batch at the end of ``Job.step``'s loop, which a job
    # spending the whole round in ``rescale_time`` never reaches. Allocated at 60 s on both
    # GPUs with a 120 s launch delay, it is still restoring at 120 s: the round keeps its
    # batch (192 here) where a batch chosen anew without a model would be
    # max(initial 128, 32 x 2) = 128.
    policy = _policy()
    engine = _engine(policy, 1, 2, launch_delay=120.0)
    engine.reconcile(policy.decide(ClusterView(engine, 60.0, frozenset({""}), True)), 60.0)
    status = engine.jobs["c"]
    status.allocation = replace(status.allocation, batch_size=192)
    schedule = policy.decide(ClusterView(engine, 120.0, frozenset({""}), True))
    assert schedule.allocations["c"].batch_size == 192
