"""Time limits, progress heartbeats, and the shutdown choice."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.runtime.conftest import demo_job, wait_for


def _demo_pids(under: Path) -> list[int]:
    """PIDs of demo workers whose checkpoint directory is under ``under``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"shapeshift.client.demo" in cmd and b"sh\x00-c" not in cmd and str(under).encode() in env:
            pids.append(int(entry.name))
    return pids


def test_a_job_over_its_time_limit_fails_and_is_not_retried(live):
    # Slurm's TimeLimit: 50 iterations of 0.1 s cannot finish in 1 s
    _, client = live("1x2")
    job = {**json.loads(demo_job("slow", iterations=50, iter_time=0.1)), "time_limit": 1.0}
    job_id = client.submit(json.dumps(job))
    wait_for(lambda: client.job(job_id)["state"] == "failed", 20, "the time limit", detail=client.jobs)
    row = client.job(job_id)
    assert row["attempts"] == 1 and row["reason"].startswith("time limit of 1 s exceeded")
    wait_for(lambda: all(n["used"] == 0 for n in client.nodes()), 10, "its slot to be released")


def test_a_hung_rank_misses_its_heartbeat_and_is_requeued_from_its_checkpoint(live, tmp_path):
    # The worker reports every second; after its first report it is stopped (SIGSTOP, as a
    # deadlocked rank would be): 2 s later the attempt is a failed rank, requeued, and the
    # second attempt resumes from the checkpoint and completes. 120 steps of 0.05 s: the
    # first report lands about 1.2 s in, leaving about 5 s to stop the job before it ends
    # (with 40 steps it was 0.85 s, too little on a loaded machine).
    _, client = live("1x2", stop_grace=1.0)
    job = {**json.loads(demo_job("hangs", iterations=120, iter_time=0.05)), "heartbeat_timeout": 2.0}
    job_id = client.submit(json.dumps(job))
    wait_for(lambda: (client.job(job_id)["progress"] or 0) >= 1, 20, "a first report")
    pids = _demo_pids(tmp_path / "state")
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    wait_for(lambda: client.job(job_id)["state"] == "completed", 30, "the requeued job to complete", detail=client.jobs)
    row = client.job(job_id)
    assert row["failures"] == 1 and row["attempts"] == 2
    assert "no progress report for 2 s" in row["result"]


def test_shutdown_with_drain_requeues_running_jobs_and_leaves_nothing_running(live, tmp_path):
    controller, client = live("1x2", on_shutdown="drain", stop_grace=5.0)
    job_id = client.submit(demo_job("drained", iterations=200, iter_time=0.05))
    wait_for(lambda: (client.job(job_id)["progress"] or 0) >= 2, 20, "the job to report")
    controller.shutdown()
    assert _demo_pids(tmp_path / "state") == []
    from shapeshift.runtime.store import Store

    row = Store(tmp_path / "state" / "state.db").job(job_id)
    assert row is not None and row["state"] == "queued" and "--on-shutdown drain" in row["reason"]
    # the worker checkpointed on its way out (lease revoked, not killed)
    assert int((controller.job_dir(job_id) / "checkpoint" / "demo-step").read_text()) >= 2
