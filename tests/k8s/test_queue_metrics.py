"""Per-queue figures of kueue/kai replays (``summary_fields``), hand-computed."""

from __future__ import annotations

import pytest

from shapeshift.cli.simulate import queue_table
from shapeshift.engine.overheads import Overheads
from shapeshift.k8s.queue_metrics import QueueLedger, _above, _jain
from shapeshift.policies.framework.registry import make_policy
from tests.conftest import job, run
from tests.policies.k8s.test_policy import KAI, KUEUE

NO_COST = Overheads(0.0, 0.0)
JOBS = [job("a1", 0, 4, 100, tenant="a"), job("b1", 10, 2, 50, tenant="b")]


def test_kueue_reclaim_figures(tmp_path):
    # 4 GPUs, team-a-cq and team-b-cq 2 nominal each in one cohort, reclaimWithinCohort Any.
    # a1 (4 GPUs) runs 0-10, is evicted for b1 (2 GPUs, 10-60), runs again 60-150.
    # team-a: 4 x 10 + 4 x 90 = 400 GPU-s, above its 2 nominal by 2 x 100 = 200 GPU-s
    # (0.0556 h), 1 eviction, waited 0. team-b: 2 x 50 = 100 GPU-s, never borrowed.
    # Shares 400/500 = 0.8 and 0.2 against 0.5 each: ratios 1.6 and 0.4, Jain
    # (1.6 + 0.4)^2 / (2 (1.6^2 + 0.4^2)) = 4 / 5.44 = 0.7353.
    path = tmp_path / "kueue.yaml"
    path.write_text(KUEUE % "Any")
    policy = make_policy("kueue", {"config": str(path), "queue_from": "tenant"})
    run(JOBS, "1x4", policy, overheads=NO_COST)
    fields = policy.summary_fields()
    a, b = fields["queues"]["team-a-cq"], fields["queues"]["team-b-cq"]
    assert a["gpu_hours"] == pytest.approx(400 / 3600) and a["borrowed_gpu_hours"] == pytest.approx(200 / 3600)
    assert (a["preemptions_suffered"], a["admission_wait_mean_s"], a["gpu_share"], a["deserved_share"]) == (
        1,
        0,
        pytest.approx(0.8),
        0.5,
    )
    assert (b["gpu_hours"], b["borrowed_gpu_hours"], b["preemptions_suffered"]) == (pytest.approx(100 / 3600), 0, 0)
    assert fields["queues_jain_share_vs_deserved"] == pytest.approx(4 / 5.44)
    assert fields["queues_borrowed_gpu_hours"] == pytest.approx(200 / 3600)
    table = queue_table(fields)
    assert table.row_count == 2


def test_kueue_without_reclaim_waits(tmp_path):
    # reclaimWithinCohort Never: a1 runs 0-100 borrowing 2 GPUs all along (200 GPU-s),
    # b1 waits from 10 to 100: team-b's mean wait 90 s, the worst queue's.
    path = tmp_path / "kueue.yaml"
    path.write_text(KUEUE % "Never")
    policy = make_policy("kueue", {"config": str(path), "queue_from": "tenant"})
    run(JOBS, "1x4", policy, overheads=NO_COST)
    fields = policy.summary_fields()
    assert fields["queues"]["team-b-cq"]["admission_wait_mean_s"] == 90
    assert fields["queues_worst_mean_wait_s"] == 90
    assert fields["queues"]["team-a-cq"]["borrowed_gpu_hours"] == pytest.approx(200 / 3600)
    assert fields["queues"]["team-a-cq"]["preemptions_suffered"] == 0


def test_kai_reclaim_figures(tmp_path):
    # KAI queues a and b deserve 2 GPUs each: the same timeline as Kueue's reclaim above.
    path = tmp_path / "kai.yaml"
    path.write_text(KAI)
    policy = make_policy("kai", {"config": str(path), "queue_from": "tenant"})
    run(JOBS, "1x4", policy, overheads=NO_COST)
    fields = policy.summary_fields()
    assert fields["queues"]["a"]["borrowed_gpu_hours"] == pytest.approx(200 / 3600)
    assert fields["queues"]["a"]["preemptions_suffered"] == 1
    assert fields["queues_jain_share_vs_deserved"] == pytest.approx(4 / 5.44)


def test_unlimited_queue_has_no_deserved_share_and_never_borrows():
    ledger = QueueLedger({"q": float("inf")})
    assert ledger.summary()["queues"] == {}
    assert _above([(0, 4), (10, -4)], float("inf")) == 0
    # 4 GPUs 0-10 and 2 more 5-10, above a level of 3: 1 x 5 + 3 x 5 = 20 GPU-s.
    assert _above([(0, 4), (5, 2), (10, -4), (10, -2)], 3) == 20
    assert _jain([1.0, 1.0]) == 1 and _jain([]) is None
