"""Submit limits (``MaxSubmitPU``, ``MaxSubmitPA``, ``GrpSubmit``, association ``MaxSubmit``):
a job over one is refused at submission.

Expectations derived by hand from Slurm 22.05's ``acct_policy.c`` (``_acct_policy_validate``)
and ``job_mgr.c`` (``_job_create``: ``ESLURM_ACCOUNTING_POLICY``; the count grows at
submission and shrinks in ``job_completion_logger``), in the comment beside each.
"""

from __future__ import annotations

from shapeshift.analysis.metrics import summarize
from shapeshift.cluster import load_cluster
from shapeshift.engine.state import JobState
from shapeshift.policies.slurm.submit_limits import SubmitLimits
from shapeshift.slurm.assoc import read_assoc
from shapeshift.slurm.qos import Qos, read_qos
from tests.conftest import by_id, job, run


def _setup(tmp_path, qos_text):
    path = tmp_path / "slurm.conf"
    path.write_text(
        "NodeName=n1 CPUs=8 RealMemory=1000 Gres=gpu:4\nPartitionName=p Nodes=n1 Default=YES\n"
        "SchedulerType=sched/builtin\n"
    )
    (tmp_path / "qos.txt").write_text(qos_text)
    return load_cluster(path), {"qos": str(tmp_path / "qos.txt")}


def test_max_submit_pu_refuses_the_job_over_it_and_counts_until_a_job_ends(tmp_path):
    # QOS normal: MaxSubmitPU 2. User u: a (0, 4 GPUs, 100 s) starts at 0; b (1, 4 GPUs)
    # waits; c (2) would be u's third job not ended (a running, b pending): 2 + 1 > 2, so
    # it is refused (QOSMaxSubmitJobPerUserLimit), never queued. d (3, user w) is another
    # user's first: accepted. At 100 a completes (completions before arrivals at one
    # instant), so e (u, 100) is u's second (b): accepted. FIFO: b 100..110, d 110..120,
    # e 120..130.
    cluster, args = _setup(tmp_path, "Name|Priority|MaxSubmitPU\nnormal|0|2\n")
    jobs = [
        job("a", 0, 4, 100, vc="p", qos="normal", user="u", time_limit=600),
        job("b", 1, 4, 10, vc="p", qos="normal", user="u", time_limit=600),
        job("c", 2, 1, 10, vc="p", qos="normal", user="u", time_limit=600),
        job("d", 3, 4, 10, vc="p", qos="normal", user="w", time_limit=600),
        job("e", 100, 1, 10, vc="p", qos="normal", user="u", time_limit=600),
    ]
    result = run(jobs, cluster, "slurm", args)
    out = by_id(result)
    assert out["c"].state is JobState.REJECTED and out["c"].reject_reason == "QOSMaxSubmitJobPerUserLimit"
    assert [(out[j].first_start, out[j].end_time) for j in "bde"] == [(100, 110), (110, 120), (120, 130)]
    assert summarize(result)["jobs_rejected"] == 1


def test_association_submit_limits_and_the_qos_limits_that_stand_for_them(tmp_path):
    (tmp_path / "assoc.txt").write_text(
        "Account|User|Share|GrpSubmit|MaxSubmit\nroot||1||\nA||1|3|\nA|u|1||1\nA|v|1||\n"
    )
    assocs = read_assoc(tmp_path / "assoc.txt")
    ended: set[str] = set()
    limits = SubmitLimits({"normal": Qos("normal", 0)}, assocs)
    assert limits.chain("A", "u") == ("A/u", "A", "root")

    def submit(job_id, user, qos="normal", lim=limits):
        return lim.submit(job_id, qos, "A", user, ended.__contains__)

    # u's own MaxSubmit 1: j1 accepted, j2 refused (1 + 1 > 1). v has none: j3, j4 make
    # A's count 3 (j1, j3, j4) = GrpSubmit 3, so j5 is refused (3 + 1 > 3).
    assert [submit("j1", "u"), submit("j2", "u")] == ["", "AssocMaxSubmitJobLimit"]
    assert [submit("j3", "v"), submit("j4", "v"), submit("j5", "v")] == ["", "", "AssocGrpSubmitJobsLimit"]
    # j1 ends: A counts 2 and u 0, so u's j6 is accepted.
    ended.add("j1")
    assert submit("j6", "u") == ""
    # A QOS GrpSubmit stands for the associations' GrpSubmit, a QOS MaxSubmitPU for their
    # MaxSubmit (qos_rec set first, the association checks only where it is INFINITE):
    # with QOS big (GrpSubmit 10, MaxSubmitPU 5) u's five jobs all pass, though A's
    # GrpSubmit is 3 and u's MaxSubmit 1; the sixth is over MaxSubmitPU 5.
    big = SubmitLimits({"big": Qos("big", 0, max_submit_per_user=5, grp_submit=10)}, assocs)
    answers = [submit(f"k{i}", "u", "big", big) for i in range(6)]
    assert answers == ["", "", "", "", "", "QOSMaxSubmitJobPerUserLimit"]


def test_qos_dump_reads_the_submit_columns(tmp_path):
    # The column names of sacctmgr show qos -P (22.05): GrpSubmit, MaxSubmitPU, MaxSubmitPA.
    (tmp_path / "q.txt").write_text("Name|Priority|GrpSubmit|MaxSubmitPU|MaxSubmitPA\nn|0|7|2|3\n")
    (q,) = read_qos(tmp_path / "q.txt")
    assert (q.grp_submit, q.max_submit_per_user, q.max_submit_per_account) == (7, 2, 3)
    assert not SubmitLimits({"m": Qos("m", 0)}, ()).active
