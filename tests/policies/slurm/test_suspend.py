"""``preempt/qos`` with ``PreemptMode=SUSPEND``, and ``KillWait``/``MessageTimeout``.

Expectations derived by hand from Slurm 22.05 (tag ``slurm-22-05-8-1``):
``cons_common/job_test.c`` ``_run_now`` (the first candidate's mode decides: SUSPEND ->
only the extra-row test, where GPUs and memory must be free; else SUSPEND-mode
candidates are skipped, "can't remove job") and ``_build_cr_job_list`` (a SUSPEND-mode
job is taken off with ``JOB_RES_ACTION_RESUME``: cores only, its GRES and memory stay);
``node_scheduler.c`` ``select_nodes`` (``kill_pending``: no more jobs preempted while the
last preemption is younger than ``KillWait + MessageTimeout``); ``preempt_qos.c``
(candidates sorted by QOS priority << 16 + nodes). What the replay does not do (core
sharing under OverSubscribe=FORCE, time slices) is in docs/slurm.md's fidelity table.
"""

from __future__ import annotations

import pytest

from shapeshift.cluster import load_cluster
from shapeshift.engine.state import JobState
from shapeshift.errors import InputError
from shapeshift.policies.slurm.plan import Free, Need
from shapeshift.policies.slurm.preempt import Running, choose
from tests.conftest import by_id, job, run

QOS = """\
Name|Priority|GraceTime|Preempt|PreemptExemptTime|PreemptMode|Flags
normal|0|00:00:00|||cluster|
cq|10|00:00:00|||cancel|
sus|20|00:00:00|||suspend|
top|50|00:00:00|||cluster|
graced|10|00:01:40|||cancel|
young|5|00:00:00||00:00:30|cancel|
high|100|00:00:00|normal,cq,sus,graced,young||cluster|
"""


def _run(tmp_path, jobs, nodes=2, extra="PreemptMode=SUSPEND,GANG\n", sched="builtin"):
    path = tmp_path / "slurm.conf"
    path.write_text(
        f"NodeName=n[1-{nodes}] CPUs=8 RealMemory=1000 Gres=gpu:4\nPartitionName=p Nodes=n[1-{nodes}] Default=YES\n"
        f"SchedulerType=sched/{sched}\nPreemptType=preempt/qos\n" + extra
    )
    (tmp_path / "qos.txt").write_text(QOS)
    return by_id(run(jobs, load_cluster(path), "slurm", {"qos": str(tmp_path / "qos.txt")}))


def test_suspend_gang_is_accepted_and_plain_suspend_is_refused_as_slurmctld_does(tmp_path):
    # SUSPEND,GANG now replays (below); SUSPEND without GANG stays refused with one line:
    # slurmctld itself does not start ("PreemptMode=SUSPEND requires GANG too").
    jobs = [job("a", 0, 4, 100, vc="p", qos="normal", time_limit=600)]
    assert _run(tmp_path, jobs, nodes=1)["a"].end_time == 100
    with pytest.raises(InputError, match="requires GANG") as err:
        _run(tmp_path, jobs, nodes=1, extra="PreemptMode=SUSPEND\n")
    assert err.value.field == "PreemptMode"


def test_a_gpu_job_waits_for_the_gpus_a_suspend_mode_job_holds(tmp_path):
    # One 4-GPU node. a (normal: the cluster's SUSPEND) holds all 4 GPUs 0..100; h (high,
    # Preempt lists normal) asks for 4 at 10. The plain test fails; the first candidate
    # (a) is SUSPEND-mode, so _run_now tries only the extra row of cores: a keeps its
    # GRES, so no GPU is free and nothing is preempted. h waits for a's end: 100..120.
    jobs = [
        job("a", 0, 4, 100, vc="p", qos="normal", time_limit=600),
        job("h", 10, 4, 20, vc="p", qos="high", time_limit=600),
    ]
    out = _run(tmp_path, jobs, nodes=1)
    assert out["a"].state is JobState.COMPLETED and out["a"].preemptions == 0 and out["a"].end_time == 100
    assert (out["h"].first_start, out["h"].end_time) == (100, 120)


def _three(s_qos):
    # n1: s (1 GPU, 0..120) and c1 (cq, 3 GPUs, 0..90); n2: c2 (cq, 4 GPUs, 0..60).
    # h (high) asks for 4 GPUs at 10 for 20 s.
    return [
        job("s", 0, 1, 120, vc="p", qos=s_qos, time_limit=600),
        job("c1", 0, 3, 90, vc="p", qos="cq", time_limit=600),
        job("c2", 0, 4, 60, vc="p", qos="cq", time_limit=600),
        job("h", 10, 4, 20, vc="p", qos="high", time_limit=600),
    ]


@pytest.mark.parametrize("sched", ["builtin", "backfill"])
def test_a_suspend_mode_first_candidate_stops_all_preemption(tmp_path, sched):
    # Backfill (``_start_job`` -> ``select_nodes`` -> ``_run_now``) selects the same way.
    # Candidates by QOS priority << 16 + nodes: s (normal, 0 + 1) before c1, c2 (cq,
    # 10 << 16 + 1). s is first and SUSPEND-mode: only the extra-row test, which fails
    # (no node has 4 free GPUs), and the CANCEL-mode c1, c2 are never tried. h waits for
    # c2's end: 60..80; nobody is preempted.
    out = _run(tmp_path, _three("normal"), sched=sched)
    assert (out["h"].first_start, out["h"].end_time) == (60, 80)
    assert all(out[j].preemptions == 0 and out[j].state is JobState.COMPLETED for j in ("s", "c1", "c2"))
    # Contrast: s in QOS top (no candidate). Candidates c1, c2 (equal: submission order).
    # Pass 1: off c1 -> n1 has 3 free, no; off c2 -> fits on n2; reorder c2, c1. Pass 2:
    # off c2 -> fits, 2 candidates <= 2 passes: stop. c2 holds the chosen n2: cancelled
    # at 10, h runs 10..30.
    out = _run(tmp_path, _three("top"), sched=sched)
    assert out["c2"].state is JobState.CANCELLED and out["c2"].end_time == 10
    assert out["h"].first_start == 10 and out["c1"].preemptions == 0


def test_suspend_mode_candidates_are_skipped_and_nothing_is_preempted_in_vain(tmp_path):
    # n1: u (sus: SUSPEND, priority 20) 4 GPUs 0..200; n2: c (cq: CANCEL, priority 10)
    # 4 GPUs 0..300. h (high) asks for 8 GPUs (both nodes) at 10 for 20 s.
    # Candidates c (10 << 16 + 1), u (20 << 16 + 1): c first, CANCEL, so jobs are taken
    # off: c -> n2 free, 4 GPUs, no fit; u is skipped ("can't remove job"): no fit, so
    # no preemptee list and c is not cancelled. At 200 u ends: candidates c only, off c
    # -> fits n1 + n2: c is cancelled at 200 and h runs 200..220.
    jobs = [
        job("u", 0, 4, 200, vc="p", qos="sus", time_limit=600),
        job("c", 0, 4, 300, vc="p", qos="cq", time_limit=600),
        job("h", 10, 8, 20, vc="p", qos="high", time_limit=600),
    ]
    out = _run(tmp_path, jobs)
    assert out["u"].state is JobState.COMPLETED and out["u"].end_time == 200
    assert out["c"].state is JobState.CANCELLED and out["c"].end_time == 200
    assert (out["h"].first_start, out["h"].end_time) == (200, 220)


def _run_now_case(suspends):
    # Two 4-GPU nodes: n0 holds x (2 GPUs), n1 holds y (4 GPUs); a 4-GPU one-node job.
    free = Free([2, 0], [8.0, 8.0], [100.0, 100.0])
    x = Running("x", "q", 0, 0.0, 0, ((0, Need(2, 0, 0)),))
    y = Running("y", "q", 0, 0.0, 1, ((1, Need(4, 0, 0)),))
    return choose(Need(4, 0, 0), [[0, 1]], 4, free, [x, y], suspends=suspends)


def test_choose_with_suspend_mode_candidates():
    # x first and SUSPEND-mode: nothing is tried (None), though y's node would do.
    assert _run_now_case(lambda r: r.job_id == "x") is None
    # y SUSPEND-mode, x not: off x -> n0 has 4 free, fits: x is preempted, y never.
    placement, victims = _run_now_case(lambda r: r.job_id == "y")
    assert placement == [(0, Need(4, 0, 0))] and [v.job_id for v in victims] == ["x"]
    # Both REQUEUE/CANCEL: the same as before SUSPEND was read.
    placement, victims = _run_now_case(None)
    assert [v.job_id for v in victims] == ["x"]


def test_a_job_whose_cores_a_suspend_mode_job_holds_waits(tmp_path):
    # One node of 8 CPUs and 4 GPUs. a (normal: SUSPEND) 1 GPU and all 8 CPUs 0..100; h
    # (high) 1 GPU, 1 CPU at 10. The plain test fails (no free core); a is the first
    # candidate and SUSPEND-mode, so only the extra row of cores is tried, but the
    # partition does not share cores (OverSubscribe=NO: _get_job_node_req gives
    # NODE_CR_ONE_ROW, and _job_test then tries one row only): the same test, which
    # fails. Nothing is suspended; h waits for a's end: 100..120.
    jobs = [
        job("a", 0, 1, 100, vc="p", qos="normal", time_limit=600, num_cpus=8),
        job("h", 10, 1, 20, vc="p", qos="high", time_limit=600, num_cpus=1),
    ]
    out = _run(tmp_path, jobs, nodes=1)
    assert out["a"].preemptions == 0 and out["h"].first_start == 100


def _kill_wait_jobs():
    # n1: a (graced: CANCEL, GraceTime 100 s) 4 GPUs from 0; n2: b (young: CANCEL,
    # PreemptExemptTime 30 s) 4 GPUs from 0; both would run 1000 s. h (high) asks for
    # 4 GPUs at 10 for 30 s.
    return [
        job("a", 0, 4, 1000, vc="p", qos="graced", time_limit=1200),
        job("b", 0, 4, 1000, vc="p", qos="young", time_limit=1200),
        job("h", 10, 4, 30, vc="p", qos="high", time_limit=600),
    ]


@pytest.mark.parametrize(
    ("extra", "h_start"),
    [
        # KillWait 30 + MessageTimeout 10 (defaults): the window ends at 10 + 40 = 50.
        ("", 50),
        # KillWait=1: 1 + 10 = 11, the window ended at 21, so at 30 b is cancelled at once.
        ("KillWait=1\n", 30),
        # MessageTimeout=25 with KillWait=1: 10 + 26 = 36.
        ("KillWait=1\nMessageTimeout=25\n", 36),
    ],
)
def test_kill_wait_and_message_timeout_delay_a_second_preemption(tmp_path, extra, h_start):
    # At 10 b is exempt (until 30): the only candidate is a; off a -> fits n1: a is sent
    # SIGTERM, its end becomes 10 + 100 = 110, and h's preemption began at 10 (it waits).
    # At 30 b's exemption ends: candidates b (young: 5 << 16 + 1), a (10 << 16 + 1); off
    # b -> fits n2 (reordered, tried again: the same): b is chosen. Its preemption may
    # happen only once 10 + KillWait + MessageTimeout has passed (kill_pending); then b
    # is cancelled (no grace time) and h starts at once, h_start..h_start + 30. a was
    # signalled: it is cancelled at its grace end, 110, whatever h did.
    out = _run(tmp_path, _kill_wait_jobs(), extra="PreemptMode=CANCEL\n" + extra)
    assert out["b"].state is JobState.CANCELLED and out["b"].end_time == h_start
    assert (out["h"].first_start, out["h"].end_time) == (h_start, h_start + 30)
    assert out["a"].state is JobState.CANCELLED and out["a"].end_time == 110
