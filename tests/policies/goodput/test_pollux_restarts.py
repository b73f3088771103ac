"""The restarts ``pollux``'s restart factor counts (``restart_count``): the Sia artifact's
unaware Pollux counts a restart only when a job's GPUs per node (in node order, within one
GPU type) change (``sia-simulator/job.py``, ``Job.reallocate`` compares that tuple), the
Pollux artifact every move (``simulator/simulator.py``, ``Job.reallocate``)."""

from __future__ import annotations

import pytest

from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.engine import Engine
from shapeshift.engine.view import ClusterView
from shapeshift.model import BatchSpec, JobSpec
from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth
from shapeshift.policies.goodput import pollux as module
from shapeshift.policies.goodput.pollux import PolluxParams, PolluxPolicy
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor
from tests.conftest import bundled

CIFAR = BatchSpec(128, 128, 4096, 32, 1024, adaptive=True)


def _factor_after_a_same_shape_move(monkeypatch, **params) -> float:
    """One CIFAR-10 job on two 4-GPU nodes of one type, at most 4 GPUs, submitted at 0 (at
    age 0 its factor is 0, so it starts at the next round): it starts on node 0 at 60 s,
    the placement is forced to node 1 at 120 s (same count, same GPUs per node, same
    type), and its restart factor is read at 180 s. The exact search, whose placement step
    (``keep_or_pack``) the test replaces to force the move."""
    policy = PolluxPolicy(
        PolluxParams(profiles=str(bundled("pollux-profiles")), explore=False, max_replicas=4, search="exact", **params)
    )
    engine = Engine(
        shorthand_cluster(2, 4),
        policy,
        SimulatedExecutor(PolluxGroundTruth(bundled("pollux-profiles")), CompletionQueue()),
    )
    engine.submit(JobSpec("c", 0.0, 1, iterations=10**6, model="pollux/cifar10", batch=CIFAR), 0.0)
    engine.fire_timer()
    engine.step(0.0)
    engine.fire_timer()
    first = engine.step(60.0)
    assert {n: r.gpus for n, r in first.changes["c"].placement} == {0: 4}
    monkeypatch.setattr(module, "keep_or_pack", lambda wanted, *a, **k: {"c": {1: 4}})
    engine.fire_timer()
    moved = engine.step(120.0)
    monkeypatch.undo()
    assert {n: r.gpus for n, r in moved.changes["c"].placement} == {1: 4}
    assert engine.jobs["c"].reconfigurations == 1
    view = ClusterView(engine, 180.0, frozenset({""}), True)
    (job,) = policy._jobs(view, "", 8)
    return job.factor


def test_a_move_to_the_same_shape_is_no_restart_in_the_unaware_count(monkeypatch):
    # Age 180 s, restart delay 30 s: factor (age - restarts x 30) / (age + 30). The Sia
    # artifact does not count the move (same type, (4,) before and after): 180 / 210.
    assert _factor_after_a_same_shape_move(monkeypatch, unaware=True) == pytest.approx(180 / 210)


def test_every_move_is_a_restart_for_plain_pollux_and_with_restart_count_moves(monkeypatch):
    # The Pollux artifact counts every move, and so does restart_count=moves (ours) when
    # unaware: one restart, (180 - 30) / 210.
    assert _factor_after_a_same_shape_move(monkeypatch) == pytest.approx(150 / 210)
    assert _factor_after_a_same_shape_move(monkeypatch, unaware=True, restart_count="moves") == pytest.approx(150 / 210)
