"""The Sia artifact's Gavel round mechanism (``priority=sia-artifact``), worked by hand
from ``sia-simulator/gavel.py`` (``add_jobs``, ``update_priorities``,
``schedule_jobs_on_workers_helper``)."""

from __future__ import annotations

import numpy as np
import pytest

from shapeshift.policies.gavel.artifact_rounds import ArtifactLedger

ONES = np.ones((3, 2))


def test_a_lone_job_is_granted_the_type_its_allocation_names():
    # One job, types (a, b) of one GPU each, X = (0, 1). The artifact orders all pairs at
    # once: (b, priority > 0) before (a, priority 0), so the job runs on b. (Gavel's own
    # scheduler visits the types one after another and would give it a's leftover GPU.)
    ledger = ArtifactLedger(2, 360.0)
    ledger.add(["j0"])
    granted, order = ledger.grants(["j0"], np.array([[0.0, 1.0]]), np.array([1]), np.array([1, 1]), ONES[:1])
    assert granted.tolist() == [1] and order.tolist() == [0]


def test_priorities_use_time_received_since_arrival_and_leftovers_go_to_zero_shares():
    # Three 1-GPU jobs, round 360 s: each starts with 180 s on both types, so each type
    # has 540 s. X: j0 all on a, j1 all on b, j2 nothing. Priority = X / (180 / 540) = 3
    # for (a, j0) and (b, j1), 0 elsewhere. With a holding 2 GPUs the zero-priority pairs
    # follow in entry order (type a's jobs, then b's): (a, j1) skipped (granted), (a, j2)
    # granted a's second GPU.
    ledger = ArtifactLedger(2, 360.0)
    ids = ["j0", "j1", "j2"]
    ledger.add(ids)
    assert ledger.type_time.tolist() == [540.0, 540.0]
    x = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    granted, order = ledger.grants(ids, x, np.array([1, 1, 1]), np.array([2, 1]), ONES)
    assert granted.tolist() == [0, 1, 0] and order.tolist() == [0, 1, 2]
    # Each granted job is credited a whole round on its type: j0 and j2 540 s on a,
    # j1 540 s on b; type a 540 + 720, type b 540 + 360. Time is never reset.
    assert ledger.job_time["j0"].tolist() == [540.0, 180.0]
    assert ledger.job_time["j1"].tolist() == [180.0, 540.0]
    assert ledger.type_time.tolist() == [1260.0, 900.0]
    # A job that cannot run on a type (speed 0) is never granted it, even as a leftover.
    speed = np.array([[1.0, 1.0], [1.0, 1.0], [0.0, 1.0]])
    again = ArtifactLedger(2, 360.0)
    again.add(ids)
    granted, _ = again.grants(ids, x, np.array([1, 1, 1]), np.array([2, 1]), speed)
    assert granted.tolist() == [0, 1, -1]


def test_a_job_wider_than_what_is_left_waits():
    # Type a has 4 GPUs; j0 (4 GPUs, X 0.5) and j1 (2 GPUs, X 1): priorities 0.5 / (180 /
    # 360) = 1 and 1 / 0.5 = 2, so j1 first (2 GPUs), then j0 does not fit in 2.
    ledger = ArtifactLedger(1, 360.0)
    ledger.add(["j0", "j1"])
    granted, _ = ledger.grants(["j0", "j1"], np.array([[0.5], [1.0]]), np.array([4, 2]), np.array([4]), ONES[:2, :1])
    assert granted.tolist() == [-1, 0]
    assert ledger.type_time.tolist() == pytest.approx([720.0])


def test_gavel_runs_with_the_artifacts_rounds():
    # Wiring: one V100 (node 0) and one K80 (node 1); "big" gains 4x from the V100,
    # "small" 1.5x. Max-sum gives big the V100 and small the K80 (4 + 1 > 1.5 + 1); both
    # pairs have priority X / (180 / 360) = 2, so both are granted at the first round.
    from shapeshift.model import ClusterSpec, NodeSpec
    from shapeshift.policies.framework.registry import make_policy
    from tests.conftest import job, run
    from tests.policies.gavel.test_gavel import Recorder

    cluster = ClusterSpec((NodeSpec("v0", 1, 8, 64, gpu_type="V100"), NodeSpec("k0", 1, 8, 64, gpu_type="K80")))
    args = {"objective": "max-sum-throughput", "priority": "sia-artifact", "rounds": "grid"}
    policy = Recorder(make_policy("gavel", args))
    trace = [
        job("small", 0, 1, 100, gpu_speed=(("K80", 1.0), ("V100", 1.5))),
        job("big", 0, 1, 100, gpu_speed=(("K80", 1.0), ("V100", 4.0))),
    ]
    result = run(trace, cluster, policy)
    assert policy.first["big"].nodes == (0,) and policy.first["small"].nodes == (1,)
    assert all(j.end_time > 0 for j in result.jobs)
