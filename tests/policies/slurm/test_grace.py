"""``preempt/qos`` with a QOS ``GraceTime``: the preempted job runs on for that long.

Expectations derived by hand from Slurm 22.05: ``src/slurmctld/preempt.c``
(``_job_check_grace_internal``: end time = min(own, preemption + GraceTime), SIGTERM),
``preempt_qos.c`` (``_get_grace_time``: the preemptee's QOS), ``job_mgr.c``
(``job_time_limit`` preempts it at that end; requeue: begin time + cred_expire + 1).
"""

from __future__ import annotations

from shapeshift.cluster import load_cluster
from shapeshift.engine.state import JobState
from tests.conftest import by_id, job, run

QOS = """\
Name|Priority|GraceTime|Preempt|PreemptMode
normal|0|00:00:30||cluster
high|100|00:00:00|normal|cluster
"""


def _run(tmp_path, mode, a_duration=100):
    path = tmp_path / "slurm.conf"
    path.write_text(
        "NodeName=n1 CPUs=8 RealMemory=1000 Gres=gpu:4\nPartitionName=p Nodes=n1 Default=YES\n"
        f"SchedulerType=sched/builtin\nPreemptType=preempt/qos\nPreemptMode={mode}\n"
    )
    (tmp_path / "qos.txt").write_text(QOS)
    # a (QOS normal, GraceTime 30 s) holds the whole 4-GPU node from 0; h (QOS high,
    # which lists normal in Preempt) asks for the whole node at 10 for 20 s.
    jobs = [
        job("a", 0, 4, a_duration, vc="p", qos="normal", time_limit=600),
        job("h", 10, 4, 20, vc="p", qos="high", time_limit=600),
    ]
    return by_id(run(jobs, load_cluster(path), "slurm", {"qos": str(tmp_path / "qos.txt")}))


def test_requeue_after_the_grace_time(tmp_path):
    # At 10 h chooses a; a is signalled and runs on to 10 + 30 = 40, holding the node, so
    # h waits. At 40 a is requeued (begin time 40 + 120 + 1 = 161, its work lost) and h
    # runs 40..60; a runs its whole 100 s again, 161..261.
    out = _run(tmp_path, "REQUEUE")
    assert (out["h"].first_start, out["h"].end_time) == (40, 60)
    assert out["a"].preemptions == 1 and out["a"].end_time == 261


def test_cancel_after_the_grace_time(tmp_path):
    # CANCEL: a is killed at 40, cancelled; h runs 40..60.
    out = _run(tmp_path, "CANCEL")
    assert out["a"].state is JobState.CANCELLED and out["a"].end_time == 40
    assert out["h"].first_start == 40


def test_a_job_that_ends_within_its_grace_time_completes(tmp_path):
    # a's own end (25) comes before its grace end (40): it completes at 25, never
    # preempted, and h starts then (25..45).
    out = _run(tmp_path, "CANCEL", a_duration=25)
    assert out["a"].state is JobState.COMPLETED and out["a"].preemptions == 0
    assert (out["h"].first_start, out["h"].end_time) == (25, 45)


def test_a_signalled_job_is_preempted_at_its_grace_end_even_if_the_preemptor_started_elsewhere(tmp_path):
    # Two 4-GPU nodes. x (top, not preemptable) holds n1 0..20, a (normal, GraceTime 30 s)
    # n2 from 0. h (high) at 10 chooses a: a's end becomes 10 + 30 = 40 and h waits. At
    # 20 x ends and h fits n1 without preempting: h 20..50. a was signalled: its end time
    # stays 40, and job_time_limit preempts it then (CANCEL: cancelled at 40).
    path = tmp_path / "slurm.conf"
    path.write_text(
        "NodeName=n[1-2] CPUs=8 RealMemory=1000 Gres=gpu:4\nPartitionName=p Nodes=n[1-2] Default=YES\n"
        "SchedulerType=sched/builtin\nPreemptType=preempt/qos\nPreemptMode=CANCEL\n"
    )
    (tmp_path / "qos.txt").write_text(QOS + "top|200|00:00:00||cluster\n")
    jobs = [
        job("x", 0, 4, 20, vc="p", qos="top", time_limit=600),
        job("a", 0, 4, 200, vc="p", qos="normal", time_limit=600),
        job("h", 10, 4, 30, vc="p", qos="high", time_limit=600),
    ]
    out = by_id(run(jobs, load_cluster(path), "slurm", {"qos": str(tmp_path / "qos.txt")}))
    assert (out["h"].first_start, out["h"].end_time) == (20, 50)
    assert out["a"].state is JobState.CANCELLED and out["a"].end_time == 40
