"""AntMan's global-scheduler rules (OSDI'20 Sec. 3.3) and our departures from them, on tiny
scenarios computed by hand.

Speeds come from ``tests.policies.planaware.stubs``: 10 samples/s per GPU at batch 32, so
one GPU runs 0.3125 it/s, two 0.625, three 0.9375, four 1.25. The clusters here have
``gpu_share_limit`` 1, so only the queueing rules act (no packing).
"""

from __future__ import annotations

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.policies.framework.registry import make_policy
from shapeshift.policies.planaware.antman import AntManParams, AntManScheduler, antman_variant
from shapeshift.sim.simulator import simulate
from tests.conftest import jcts
from tests.policies.planaware.stubs import StubKnowledge, StubTruth, cluster, pjob

PAUSE = Overheads(0.0, 78.0)


def run(jobs, tenants: dict[str, int], gpus: int = 4, **params):
    p = AntManParams(**params)
    policy = AntManScheduler(antman_variant(p), StubKnowledge(), p)
    return jcts(simulate(jobs, cluster(1, gpus, tenants), policy, throughput=StubTruth(), overheads=PAUSE))


def _blocked_by_gpus():
    return [
        pjob("g1", 0, 3, 960, guaranteed=True, tenant="A"),  # 960 it / 0.9375 it/s = 1024 s
        pjob("g2", 10, 2, 640, guaranteed=True, tenant="A"),  # 2 GPUs: 640 / 0.625 = 1024 s
        pjob("g3", 20, 1, 100, guaranteed=True, tenant="A"),  # 1 GPU: 100 / 0.3125 = 320 s
        pjob("b", 30, 1, 100, tenant="B"),  # best-effort, 320 s on 1 GPU
    ]


def test_blocked_guaranteed_job_reserves_the_free_gpu_for_itself_not_for_later_guaranteed_jobs():
    # At 10 s g2 needs 2 GPUs, 1 is free and no best-effort job holds any: it reserves
    # (Sec. 3.3). g3 (20 s) queues behind it; the opportunistic b (30 s) may use the
    # reserved GPU: it runs 30-350. At 1024 s g1 ends: g2 and g3 start together.
    t = run(_blocked_by_gpus(), {"A": 8, "B": 0})
    assert t["g2"] == pytest.approx(1024 + 1024 - 10)
    assert t["g3"] == pytest.approx(1024 + 320 - 20)
    assert t["b"] == pytest.approx(320.0)


def test_guaranteed_backfill_lets_later_guaranteed_jobs_pass_a_blocked_one():
    # Ours: g3 takes the free GPU at 20 s (done at 340), so b waits for it: 340-660.
    t = run(_blocked_by_gpus(), {"A": 8, "B": 0}, guaranteed_backfill=True)
    assert t["g2"] == pytest.approx(1024 + 1024 - 10)
    assert t["g3"] == pytest.approx(320.0)
    assert t["b"] == pytest.approx(660 - 30)


def _blocked_by_quota():
    return [
        pjob("g1", 0, 2, 640, guaranteed=True, tenant="A"),  # 1024 s on 2 GPUs
        pjob("a2", 10, 2, 640, guaranteed=True, tenant="A"),  # 2 + 2 > A's quota of 3
        pjob("a3", 20, 1, 100, guaranteed=True, tenant="A"),  # 2 + 1 <= 3
        pjob("c1", 30, 1, 100, guaranteed=True, tenant="C"),  # another tenant's quota
    ]


def test_quota_reservation_holds_back_only_the_same_tenants_later_jobs():
    # a2 is blocked by A's quota, which is then kept for it: a3 waits until g1 ends at
    # 1024 s, then both start (2 + 1 = 3 GPUs of A's quota). C's c1 starts at once.
    t = run(_blocked_by_quota(), {"A": 3, "C": 1})
    assert t["a2"] == pytest.approx(1024 + 1024 - 10)
    assert t["a3"] == pytest.approx(1024 + 320 - 20)
    assert t["c1"] == pytest.approx(320.0)


def test_quota_backfill_starts_the_later_job_that_fits_the_quota():
    t = run(_blocked_by_quota(), {"A": 3, "C": 1}, guaranteed_backfill=True)
    assert t["a3"] == pytest.approx(320.0)
    assert t["a2"] == pytest.approx(1024 + 1024 - 10)
    assert t["c1"] == pytest.approx(320.0)


def test_reservation_covers_only_the_gpus_the_blocked_job_could_use():
    # Two 4-GPU nodes. g1 (3 GPUs) fills node 0 to 1 free GPU, h (3 GPUs) node 1 likewise.
    # g2 needs 2 GPUs on one node: blocked; it reserves node 0's free GPU (the first of
    # the equally free nodes). g3 (1 GPU) still starts on node 1's free GPU at once; g2
    # starts when g1 ends at 1024 s.
    jobs = [
        pjob("g1", 0, 3, 960, guaranteed=True, tenant="A"),
        pjob("h", 1, 3, 960, guaranteed=True, tenant="A"),
        pjob("g2", 10, 2, 640, guaranteed=True, tenant="A"),
        pjob("g3", 20, 1, 100, guaranteed=True, tenant="A"),
    ]
    p = AntManParams()
    policy = AntManScheduler(antman_variant(p), StubKnowledge(), p)
    t = jcts(simulate(jobs, cluster(2, 4, {"A": 16}), policy, throughput=StubTruth(), overheads=PAUSE))
    assert t["g3"] == pytest.approx(320.0)
    assert t["g2"] == pytest.approx(1024 + 1024 - 10)


def _quota_blocked_small_job():
    return [
        pjob("g1", 0, 3, 960, guaranteed=True, tenant="A"),  # 1024 s on 3 GPUs
        pjob("g2", 10, 1, 100, guaranteed=True, tenant="A"),  # 3 + 1 > A's quota of 3; 320 s
    ]


def test_guaranteed_job_queued_past_the_threshold_runs_opportunistically():
    # Sec. 3.3: g2 waits for quota from 10 s; at 10 + 100 = 110 s it turns opportunistic and
    # takes the idle fourth GPU: 110-430.
    t = run(_quota_blocked_small_job(), {"A": 3}, opportunistic_after=100.0)
    assert t["g2"] == pytest.approx(430 - 10)
    assert t["g1"] == pytest.approx(1024.0)


def test_without_conversion_the_quota_blocked_job_waits_for_quota():
    # g1 frees A's quota at 1024 s; g2 then runs 320 s.
    t = run(_quota_blocked_small_job(), {"A": 3}, opportunistic_after=None)
    assert t["g2"] == pytest.approx(1024 + 320 - 10)


def _converted_job_and(c):
    return [
        pjob("g1", 0, 2, 640, guaranteed=True, tenant="A"),  # 1024 s; A's quota of 2 is full
        pjob("a2", 10, 1, 640, guaranteed=True, tenant="A"),  # 2048 s alone; opportunistic from 110 s
        c,
    ]


def test_opportunistic_job_is_preempted_by_a_guaranteed_job_until_upgraded():
    # At 500 s tenant C's c (2 GPUs) finds 1 free: a2 runs opportunistically (A's quota is
    # full), so c preempts it. c: 320 it / 0.625 = 512 s. a2 ran 390 s (121.875 it) and
    # comes back when c ends at 1012 s, with the 78 s pause: 518.125 / 0.3125 = 1658 s.
    t = run(_converted_job_and(pjob("c", 500, 2, 320, guaranteed=True, tenant="C")), {"A": 2, "C": 4},
            opportunistic_after=100.0)
    assert t["c"] == pytest.approx(512.0)
    assert t["a2"] == pytest.approx(1012 + 78 + 1658 - 10)


def test_upgraded_job_keeps_its_gpu():
    # g1 ends at 1024 s and a2 is guaranteed again (A's quota has room for its 1 GPU). At
    # 1100 s c needs all 4 GPUs: it cannot take a2's and waits for a2 to end at
    # 110 + 2048 = 2158 s, then runs 300 it / 1.25 = 240 s.
    t = run(_converted_job_and(pjob("c", 1100, 4, 300, guaranteed=True, tenant="C")), {"A": 2, "C": 4},
            opportunistic_after=100.0)
    assert t["a2"] == pytest.approx(2158 - 10)
    assert t["c"] == pytest.approx(2158 + 240 - 1100)


def test_dynamic_gpus_grow_into_free_gpus_and_shrink_for_guaranteed_jobs():
    # The Rubick artifact's AntMan baseline resizes jobs. b (2 GPUs asked) takes all 4:
    # 125 it by 100 s, when g (2 GPUs) arrives and b shrinks to 2 (78 s pause). g: 512 s,
    # ends at 612. b then has 125 + (612 - 178) x 0.625 = 396.25 it and grows back to 4
    # (78 s pause): 883.75 / 1.25 = 707 s, ending at 1397 s. Without resizing b runs
    # 1280 / 0.625 = 2048 s on the 2 GPUs it asked for.
    jobs = [pjob("b", 0, 2, 1280, tenant="B"), pjob("g", 100, 2, 320, guaranteed=True, tenant="A")]
    t = run(jobs, {"A": 4, "B": 0}, dynamic_gpus=True)
    assert t["g"] == pytest.approx(512.0)
    assert t["b"] == pytest.approx(612 + 78 + 707)
    assert run(jobs, {"A": 4, "B": 0})["b"] == pytest.approx(2048.0)


def test_conversion_switched_off_by_the_word_none_and_bad_values_refused():
    assert make_policy("antman", {"opportunistic_after": "none"}).params.opportunistic_after is None
    assert make_policy("antman", {"opportunistic_after": "1800"}).params.opportunistic_after == 1800.0
    for bad in ("nan", "-5", "soon"):
        with pytest.raises(InputError, match="opportunistic_after"):
            make_policy("antman", {"opportunistic_after": bad})
