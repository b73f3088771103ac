"""``PreemptMode=SUSPEND,GANG`` on a real slurmctld beside the replay: a GPU job whose
GPUs a SUSPEND-mode job holds is not started by preemption; it waits for that job's end.

Runs only where Slurm's daemons are installed (``scripts/real_slurm.sh install``) and as
root; skips with the reason otherwise. Its own directory and ports, so it meets no other
Slurm. The expectation is the source's rule (22.05 ``cons_common/job_test.c``
``_run_now``: a SUSPEND-mode first candidate -> only the extra row of cores; the
preemptee keeps its GRES), checked on both sides: the real run, and the replay of the
same two jobs with the real run's slurm.conf, QOS table, submit offsets and run times.
"""

from __future__ import annotations

import os
import subprocess
import time
from datetime import datetime

import pytest

from shapeshift.cluster import load_cluster
from shapeshift.engine.state import JobState
from tests.conftest import by_id, job, run
from tests.slurm.real_cluster import NEEDS_REAL_SLURM, started_slurm

PORTS = {"CTLD_PORT": "6927", "DBD_PORT": "6929", "DBPORT": "3327", "NODE_PORT": "17200"}

pytestmark = NEEDS_REAL_SLURM


@pytest.fixture
def suspend_slurm():
    extra = "PreemptType=preempt/qos\nPreemptMode=SUSPEND,GANG"
    env = {**os.environ, **PORTS, "NODES": "1", "SLURM_EXTRA": extra}
    with started_slurm("ss-slurm-suspend-", env) as work:
        yield work, {**env, "SLURM_CONF": str(work / "slurm.conf")}


def _slurm(env: dict, *args: str, user: str | None = None) -> str:
    cmd = (["runuser", "-u", user, "--"] if user else []) + list(args)
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd="/tmp", env=env).stdout


def test_a_gpu_job_waits_for_a_suspend_mode_job_on_the_real_slurm_and_in_the_replay(suspend_slurm, tmp_path):
    work, env = suspend_slurm
    _slurm(env, "sacctmgr", "-i", "add", "qos", "high")
    _slurm(env, "sacctmgr", "-i", "modify", "qos", "where", "name=high", "set", "priority=100", "preempt=normal")
    _slurm(env, "sacctmgr", "-i", "modify", "user", "where", "name=alice", "set", "qos+=high")
    time.sleep(2)

    def submit(qos: str, seconds: int) -> str:
        args = ["sbatch", "--parsable", "-A", "A", "-p", "gpu", "-q", qos, "--gres=gpu:4", "-c", "1", "-t", "2"]
        args += ["-o", "/dev/null", "--wrap", f"sleep {seconds}"]
        return _slurm(env, *args, user="alice").strip().split(";")[0]

    a = submit("normal", 20)  # the whole node's 4 GPUs
    time.sleep(4)
    h = submit("high", 5)  # high lists normal in Preempt: it may preempt a, but not for GPUs
    deadline = time.monotonic() + 120
    while _slurm(env, "squeue", "-h", "-j", f"{a},{h}", "-o", "%i").strip() and time.monotonic() < deadline:
        time.sleep(1)
    rows = _slurm(env, "sacct", "-X", "-P", "-n", "-j", f"{a},{h}", "-o", "JobID,Submit,Start,End,State")
    got = {r.split("|")[0]: r.split("|")[1:] for r in rows.splitlines()}
    at = {k: [datetime.fromisoformat(t) for t in v[:3]] for k, v in got.items()}
    # The real Slurm: a completes (not PREEMPTED) and h starts no earlier than a's end.
    assert got[a][3] == "COMPLETED" and got[h][3] == "COMPLETED"
    assert at[h][1] >= at[a][2]
    # The replay of the same jobs: h starts at a's end, to the second.
    zero = at[a][0]
    qos = tmp_path / "qos.txt"
    qos.write_text(_slurm(env, "sacctmgr", "-P", "show", "qos"))

    def secs(t: datetime) -> float:
        return (t - zero).total_seconds()

    # a is submitted at its real start (it started at once); h at its real submit time.
    jobs = [
        job("a", secs(at[a][1]), 4, secs(at[a][2]) - secs(at[a][1]), vc="gpu", qos="normal", time_limit=120),
        job("h", secs(at[h][0]), 4, secs(at[h][2]) - secs(at[h][1]), vc="gpu", qos="high", time_limit=120),
    ]
    out = by_id(run(jobs, load_cluster(work / "slurm.conf"), "slurm", {"qos": str(qos)}))
    assert out["a"].state is JobState.COMPLETED and out["a"].preemptions == 0
    assert abs(out["h"].first_start - secs(at[h][1])) <= 2
