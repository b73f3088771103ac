"""``preempt/qos`` (REQUEUE, CANCEL; SUSPEND: test_suspend.py; GraceTime: test_grace.py) and QOS/association limits.

Expectations derived by hand from Slurm's source (master after 25.05, checked against
22.05): preempt_qos.c, src/interfaces/preempt.c, cons_tres/job_test.c ``_run_now``,
job_mgr.c (requeue), acct_policy.c (limits), in the comment beside each.
"""

from __future__ import annotations

import pytest

from shapeshift.cluster import load_cluster
from shapeshift.engine.state import JobState
from shapeshift.errors import InputError
from shapeshift.policies.slurm.plan import Free, Need
from shapeshift.policies.slurm.preempt import Running, choose
from shapeshift.policies.slurm.qos_limits import Limits, Usage
from shapeshift.slurm.assoc import Assoc, read_assoc
from shapeshift.slurm.qos import Qos, read_qos
from tests.conftest import by_id, job, run

QOS = """\
Name|Priority|GraceTime|Preempt|PreemptExemptTime|PreemptMode|Flags|MaxTRESPU|MaxJobsPU|GrpTRES
normal|0|00:00:00|||cluster||||
high|100|00:00:00|normal||cluster||||
"""


def _cluster(tmp_path, extra="", gpus=4):
    path = tmp_path / "slurm.conf"
    path.write_text(
        f"NodeName=n1 CPUs=8 RealMemory=1000 Gres=gpu:{gpus}\nPartitionName=p Nodes=n1 Default=YES\n"
        "SchedulerType=sched/builtin\n" + extra
    )
    return load_cluster(path)


def _qos(tmp_path, text=QOS):
    (tmp_path / "qos.txt").write_text(text)
    return {"qos": str(tmp_path / "qos.txt")}


def _pair():
    # a (QOS normal) holds the whole 4-GPU node from 0 for 100 s; h (QOS high, which lists
    # normal in Preempt) asks for the whole node at 10.
    return [
        job("a", 0, 4, 100, vc="p", qos="normal", time_limit=600),
        job("h", 10, 4, 20, vc="p", qos="high", time_limit=600),
    ]


def test_requeue_restarts_the_job_from_nothing_after_its_begin_time(tmp_path):
    # preempt_p_preemptable: high's Preempt names normal, so h preempts a at 10 and starts
    # (10..30). REQUEUE (job_mgr.c, batch_requeue_fini): a is pending again with begin
    # time 10 + cred_expire (120) + 1 = 131, and its 10 s of work are lost: it runs its
    # whole 100 s again, 131..231. One job, preempted once.
    cluster = _cluster(tmp_path, "PreemptType=preempt/qos\nPreemptMode=REQUEUE\n")
    result = by_id(run(_pair(), cluster, "slurm", _qos(tmp_path)))
    assert result["h"].first_start == 10 and result["h"].end_time == 30
    assert result["a"].state is JobState.COMPLETED and result["a"].preemptions == 1
    assert result["a"].end_time == 231


def test_preemptions_are_counted_by_kind_in_the_summary(tmp_path):
    from shapeshift.policies.framework.registry import make_policy

    policy = make_policy("slurm", _qos(tmp_path))
    run(_pair(), _cluster(tmp_path, "PreemptType=preempt/qos\nPreemptMode=CANCEL\n"), policy)
    assert policy.summary_fields() == {"slurm_preempt_requeued": 0, "slurm_preempt_cancelled": 1}


def test_requeue_begin_time_follows_cred_expire(tmp_path):
    # AuthInfo=cred_expire=30: a may begin again at 10 + 30 + 1 = 41, and runs 41..141.
    extra = "PreemptType=preempt/qos\nPreemptMode=REQUEUE\nAuthInfo=cred_expire=30\n"
    result = by_id(run(_pair(), _cluster(tmp_path, extra), "slurm", _qos(tmp_path)))
    assert result["a"].end_time == 141


def test_cancel_ends_the_preempted_job_without_completing_it(tmp_path):
    # PreemptMode=CANCEL (slurm_job_preempt: SIGKILL): a ends at 10, cancelled, never
    # completed; h runs 10..30.
    cluster = _cluster(tmp_path, "PreemptType=preempt/qos\nPreemptMode=CANCEL\n")
    result = by_id(run(_pair(), cluster, "slurm", _qos(tmp_path)))
    assert result["a"].state is JobState.CANCELLED and result["a"].end_time == 10
    assert result["h"].first_start == 10


def test_qos_preempt_mode_overrides_the_cluster_one(tmp_path):
    # preempt_p_get_mode: the preemptee's QOS PreemptMode (cancel) wins over the
    # cluster's (REQUEUE).
    text = QOS.replace("normal|0|00:00:00|||cluster", "normal|0|00:00:00|||cancel")
    cluster = _cluster(tmp_path, "PreemptType=preempt/qos\nPreemptMode=REQUEUE\n")
    result = by_id(run(_pair(), cluster, "slurm", _qos(tmp_path, text)))
    assert result["a"].state is JobState.CANCELLED


def test_no_preemption_without_a_preempt_list_or_within_one_qos(tmp_path):
    # Both jobs in QOS normal, which lists nothing and has no WITHIN flag: h waits for a
    # (starts at 100).
    jobs = [job("a", 0, 4, 100, vc="p", qos="normal"), job("h", 10, 4, 20, vc="p", qos="normal")]
    cluster = _cluster(tmp_path, "PreemptType=preempt/qos\nPreemptMode=REQUEUE\n")
    result = by_id(run(jobs, cluster, "slurm", _qos(tmp_path)))
    assert result["h"].first_start == 100 and result["a"].preemptions == 0


def test_preempt_exempt_time_protects_a_young_job(tmp_path):
    # normal's PreemptExemptTime 00:00:30 (acct_policy_get_preemptable_time): a (started
    # at 0) may be preempted from 30 on. At h's arrival (10) it is exempt, so h waits; the
    # replay looks again when the exemption ends (Slurm: at its next scheduling pass or
    # backfill cycle after 30): h preempts a at 30 and runs 30..50.
    text = QOS.replace("normal|0|00:00:00|||cluster", "normal|0|00:00:00||00:00:30|cluster")
    cluster = _cluster(tmp_path, "PreemptType=preempt/qos\nPreemptMode=CANCEL\n")
    result = by_id(run(_pair(), cluster, "slurm", _qos(tmp_path, text)))
    assert result["h"].first_start == 30 and result["a"].end_time == 30
    # The cluster's PreemptExemptTime applies where the QOS sets none: 00:00:45 -> 45.
    extra = "PreemptType=preempt/qos\nPreemptMode=CANCEL\nPreemptExemptTime=00:00:45\n"
    result = by_id(run(_pair(), _cluster(tmp_path, extra), "slurm", _qos(tmp_path)))
    assert result["h"].first_start == 45


def _r(job_id, node, gpus, order):
    return Running(job_id, "low", 0, 0.0, order, ((node, Need(gpus, 0, 0)),))


def test_run_now_preempts_only_the_tried_jobs_on_the_chosen_nodes():
    # Two 4-GPU nodes. n0: c1 (2 GPUs) and a job that is no candidate (2 GPUs); n1: c2, c3
    # (2 GPUs each). A 4-GPU one-node job. Candidates are equal (QOS priority 0, 1 node:
    # preempt_p_get_prio), so in submission order c1, c2, c3 (_run_now):
    # pass 1: off c1 -> n0 has 2 free, no; off c2 -> n1 2, no; off c3 -> n1 4: fits on n1.
    #   3 candidates > 1 pass: reorder, last (c3) first, then by nodes held among the
    #   chosen {n1}: c2 (1), c1 (0) -> c3, c2, c1.
    # pass 2: off c3 -> no; off c2 -> fits on n1. Reorder: c2, c3, c1.
    # pass 3 (pass_count 2 > reorder_count 1): off c2 -> no, off c3 -> fits: stop.
    # Preempted: the tried jobs holding a chosen node: c2, c3; c1 is spared.
    free = Free([0, 0], [8.0, 8.0], [100.0, 100.0])
    cands = [_r("c1", 0, 2, 0), _r("c2", 1, 2, 1), _r("c3", 1, 2, 2)]
    placement, victims = choose(Need(4, 0, 0), [[0, 1]], 4, free, cands)
    assert placement == [(1, Need(4, 0, 0))]
    assert sorted(v.job_id for v in victims) == ["c2", "c3"]
    assert free.gpus.tolist() == [0, 0]  # left unchanged
    # Nothing fits even with every candidate gone: None.
    assert choose(Need(8, 0, 0), [[0]], 4, free, cands[:1]) is None


# -- limits (acct_policy.c) -----------------------------------------------------------

LIMITS = """\
Name|Priority|GraceTime|Preempt|PreemptExemptTime|PreemptMode|Flags|GrpTRES|GrpJobs|MaxTRESPU|MaxJobsPU|MaxSubmitPU
normal|0|00:00:00|||cluster||gres/gpu=6||gres/gpu=4|2|
"""


def test_qos_limit_reasons_in_slurm_order(tmp_path):
    (tmp_path / "q.txt").write_text(LIMITS)
    (q,) = read_qos(tmp_path / "q.txt")
    assert (q.grp_gpus, q.max_gpus_per_user, q.max_jobs_per_user, q.grp_jobs) == (6, 4, 2, None)
    tree = {"root": Assoc("root", "", "", 1), "A": Assoc("A", "", "root", 1), "A/u": Assoc("A", "u", "A", 1)}
    limits = Limits({"normal": q}, tree)
    u = Usage("normal", "u", limits.chain("A/u"), 3)
    assert u.chain == ("A/u", "A", "root")
    assert limits.reason(u) == ""
    limits.add(u, +1)
    # u holds 3 GPUs; 3 more would make 6 > MaxTRESPU 4: QOSMaxGRESPerUser.
    assert limits.reason(u) == "QOSMaxGRESPerUser"
    # another user's 4 GPUs: 3 + 4 = 7 > GrpTRES 6 (checked before the per-user limit).
    assert limits.reason(Usage("normal", "v", limits.chain("A/u"), 4)) == "QOSGrpGRES"
    limits.add(Usage("normal", "u", u.chain, 1), +1)
    # u runs 2 jobs = MaxJobsPU: a third is held by the job count first (pre_select).
    assert limits.reason(Usage("normal", "u", u.chain, 0)) == "QOSMaxJobsPerUserLimit"


def test_association_limits(tmp_path):
    (tmp_path / "assoc.txt").write_text(
        "Account|User|Share|GrpTRES|GrpJobs|MaxJobs\nroot||1|||\nA||1|gres/gpu=4||\nA|u|1|||1\nA|v|1|||\n"
    )
    tree = {a.key: a for a in read_assoc(tmp_path / "assoc.txt")}
    limits = Limits({}, tree)
    u, v = Usage("", "u", limits.chain("A/u"), 2), Usage("", "v", limits.chain("A/v"), 3)
    limits.add(u, +1)
    # MaxJobs of u's own association (1) is reached; v: 2 + 3 > A's GrpTRES 4.
    assert limits.reason(u) == "AssocMaxJobsLimit"
    assert limits.reason(v) == "AssocGrpGRES"


def test_max_gpus_per_user_holds_a_job_without_blocking_the_partition(tmp_path):
    # One 8-GPU node; QOS normal: MaxTRESPU gres/gpu=4, GrpTRES gres/gpu=6 (no preemption).
    # u1: 4 GPUs 0..50. u2 (user u, 2 GPUs, at 1): 4 + 2 > 4 -> held (QOSMaxGRESPerUser),
    # but the partition goes on: w (user w, 2 GPUs, at 2): 4 + 2 = 6 <= GrpTRES 6 -> starts
    # at 2. At 50 u1 ends: u2 starts (2 + 2 <= 6).
    jobs = [
        job("u1", 0, 4, 50, vc="p", qos="normal", user="u", time_limit=600),
        job("u2", 1, 2, 10, vc="p", qos="normal", user="u", time_limit=600),
        job("w", 2, 2, 10, vc="p", qos="normal", user="w", time_limit=600),
    ]
    text = LIMITS.replace("|2|\n", "||\n")
    result = by_id(run(jobs, _cluster(tmp_path, gpus=8), "slurm", _qos(tmp_path, text)))
    assert [result[j].first_start for j in ("u1", "u2", "w")] == [0, 50, 2]


def test_qos_dump_bad_limit_names_line_and_field(tmp_path):
    (tmp_path / "q.txt").write_text("Name|Priority|MaxJobsPU\nnormal|0|lots\n")
    with pytest.raises(InputError) as err:
        read_qos(tmp_path / "q.txt")
    assert err.value.line == 2 and "maxjobspu" in str(err.value).lower()


def test_qos_type_without_limits_is_inactive():
    assert not Limits({"n": Qos("n", 0)}, {"root": Assoc("root", "", "", 1)}).active


# The header and rows of a real ``sacctmgr show qos -P`` (Slurm 22.05.8, scripts/real_slurm.sh).
REAL_QOS = (
    "Name|Priority|GraceTime|Preempt|PreemptExemptTime|PreemptMode|Flags|UsageThres|UsageFactor|GrpTRES|"
    "GrpTRESMins|GrpTRESRunMins|GrpJobs|GrpSubmit|GrpWall|MaxTRES|MaxTRESPerNode|MaxTRESMins|MaxWall|MaxTRESPU|"
    "MaxJobsPU|MaxSubmitPU|MaxTRESPA|MaxJobsPA|MaxSubmitPA|MinTRES\n"
    "normal|0|00:00:00||00:00:30|cancel|||1.000000|gres/gpu=3||||||||||gres/gpu=2|1|||||\n"
    "high|100|00:00:00|normal||cluster|||1.000000|||||||||||||||||\n"
)


def test_real_sacctmgr_qos_dump_is_read(tmp_path):
    (tmp_path / "q.txt").write_text(REAL_QOS)
    normal, high = read_qos(tmp_path / "q.txt")
    assert (normal.preempt_mode, normal.preempt_exempt_time, normal.grace_time) == ("cancel", 30, 0)
    assert (normal.grp_gpus, normal.max_gpus_per_user, normal.max_jobs_per_user) == (3, 2, 1)
    assert (high.preempt, high.preempt_mode, high.max_gpus_per_user) == (("normal",), "cluster", None)


def test_a_requeued_job_queues_behind_equals_submitted_before_its_requeue(tmp_path):
    # Multifactor with every weight 0: all priorities equal, so submission order decides
    # (sort_job_queue2). a (normal) runs from 0; b (normal, 4 GPUs, 10 s) waits from 5;
    # h (high) preempts a at 10 and runs 10..30. The requeue gives a a new submit time
    # (10, job_mgr.c) and, with cred_expire=5, a begin time of 16. At 30 b (submitted at
    # 5) goes first: b 30..40, then a runs its whole 100 s, 40..140.
    jobs = [*_pair(), job("b", 5, 4, 10, vc="p", qos="normal", time_limit=600)]
    extra = "PreemptType=preempt/qos\nPreemptMode=REQUEUE\nAuthInfo=cred_expire=5\nPriorityType=priority/multifactor\n"
    result = by_id(run(jobs, _cluster(tmp_path, extra), "slurm", _qos(tmp_path)))
    assert (result["b"].first_start, result["a"].end_time) == (30, 140)
