"""Backfill preempts (``preempt/qos``) where the main scheduler has stopped its partition.

Expectations derived by hand from Slurm 22.05: ``backfill.c`` (``_try_sched`` hands the
will-run test the preemptable jobs; ``_start_job`` excludes the nodes reserved for higher
jobs), ``cons_common/job_test.c`` (``_will_run_test``: with every candidate gone the
start is now), ``job_scheduler.c`` (the main scheduler stops a partition at its first
job that cannot start), in the comment beside each.
"""

from __future__ import annotations

from shapeshift.cluster import load_cluster
from shapeshift.engine.state import JobState
from tests.conftest import by_id, job, run

QOS = "Name|Priority|Preempt|GraceTime\nnormal|0||{grace}\nhigh|100|normal|0\ntop|200||0\n"


def _run(tmp_path, h_limit, grace=0):
    path = tmp_path / "slurm.conf"
    path.write_text(
        "NodeName=n[1-2] CPUs=8 RealMemory=1000 Gres=gpu:4\nPartitionName=p Nodes=n[1-2] Default=YES\n"
        "SchedulerType=sched/backfill\nSchedulerParameters=bf_interval=1,bf_resolution=1\n"
        "PreemptType=preempt/qos\nPreemptMode=CANCEL\n"
    )
    (tmp_path / "qos.txt").write_text(QOS.format(grace=grace))
    jobs = [
        job("r", 0, 4, 100, vc="p", qos="top", time_limit=120),
        job("a", 0, 4, 50, vc="p", qos="normal", time_limit=60),
        job("b", 1, 8, 10, vc="p", qos="top", time_limit=60),
        job("h", 2, 4, 20, vc="p", qos="high", time_limit=h_limit),
    ]
    return by_id(run(jobs, load_cluster(path), "slurm", {"qos": str(tmp_path / "qos.txt")}))


def test_backfill_preempts_for_a_job_the_main_scheduler_did_not_reach(tmp_path):
    # Two 4-GPU nodes. r (top, limit 120 s) takes n1 and a (normal, limit 60 s) n2 at 0.
    # b (top, 8 GPUs, at 1) cannot start and may preempt nothing (top lists no QOS): the
    # main scheduler stops partition p at b, so h (high, which lists normal; at 2) is not
    # tried there (priority/basic: b was submitted first, and neither may preempt the
    # other, sort_job_queue2). Backfill: b's will-run start is when r and a have both
    # ended (60 and 120 in one batch: 120), so b reserves n1, n2 over [120, 180]. h's
    # limit (60 s) ends at 62 < 120, so no node is reserved from h's view; it does not
    # fit the free resources, but with a (its candidate) gone it does: start now, a
    # cancelled at 2 (PreemptMode=CANCEL), h runs 2..22. r ends at 100, b runs 100..110.
    out = _run(tmp_path, h_limit=60)
    assert out["a"].state is JobState.CANCELLED and out["a"].end_time == 2
    assert (out["h"].first_start, out["h"].end_time) == (2, 22)
    assert out["b"].first_start == 100


def test_backfill_does_not_preempt_on_nodes_reserved_for_a_higher_job(tmp_path):
    # The same with h's limit 180 s: h's span [2, 182] overlaps b's reservation of n1 and
    # n2 over [120, 180], so both are excluded (exc_node_bitmap) and nothing can be
    # preempted for h. a completes at 50. r ends at 100: b (first in the queue) starts
    # 100..110, then h 110..130.
    out = _run(tmp_path, h_limit=180)
    assert out["a"].state is JobState.COMPLETED and out["a"].preemptions == 0
    assert out["b"].first_start == 100 and out["h"].first_start == 110


def test_backfill_preemption_with_a_grace_time_holds_the_nodes_until_it_ends(tmp_path):
    # As the first test, with normal's GraceTime 30 s: at 2 backfill chooses a, which runs
    # on to 32 (preempt.c); h cannot start and holds n2 from 2 (backfill reserves the
    # nodes of a job whose preemption is under way). At 32 a is cancelled; the main
    # scheduler still stops at b, and backfill starts h on n2 (its [32, 92] is clear of
    # b's [120, 180]): h 32..52.
    out = _run(tmp_path, h_limit=60, grace=30)
    assert out["a"].state is JobState.CANCELLED and out["a"].end_time == 32
    assert (out["h"].first_start, out["h"].end_time) == (32, 52)
