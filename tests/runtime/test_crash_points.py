"""Crash-injection harness: the controller dies at a named
point (``SHAPESHIFT_CRASH_AT``, see ``store.crash_point``) exactly as if SIGKILLed, a new
controller starts on the same state directory, and the outcome must be the truth.

Every job here is the demo worker writing one marker line when it finishes, so "ran
twice" is visible as two lines and "never ran" as none.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time

import pytest

from shapeshift.runtime.remote import ControllerClient
from tests.runtime.conftest import kill_processes_under, took_a_step, wait_for


def _job(name: str, iterations: int, marker: str, gpus: int = 1, iter_time: float = 0.1, **extra: object) -> str:
    command = (
        f"{{python}} -m shapeshift.client.demo --iterations {{iterations}} --iter-time {iter_time} --marker {marker}"
    )
    return json.dumps(
        {"name": name, "command": command, "iterations": iterations, "resources": {"gpus": gpus}, **extra}
    )


def _restart(serve_process, state):
    serve_process("--cluster", "1x2", "--stop-grace", "3")
    return ControllerClient.from_state(state)


def _crashed(proc) -> None:
    proc.wait(timeout=30)
    assert proc.returncode == 137  # died at the injected point, not of something else


@pytest.mark.parametrize(
    ("point", "gpus"),
    [
        # item 1: the run finished, the controller died before anything was recorded
        ("before_completion", 1),
        # the run is recorded and spawned, the controller dies before the next tick
        ("after_run_start", 1),
    ],
)
def test_a_job_runs_exactly_once_across_a_crash_at(point, gpus, serve_process, tmp_path):
    state, marker = tmp_path / "state", tmp_path / "done.txt"
    first = serve_process("--cluster", "1x2", crash_at=point)
    job_id = ControllerClient.from_state(state).submit(_job("once", 6, str(marker), gpus))
    _crashed(first)
    client = _restart(serve_process, state)
    wait_for(lambda: client.job(job_id)["state"] == "completed", 30, "the job to complete", detail=client.jobs)
    time.sleep(0.3)  # a rerun, if any, would be starting now
    assert marker.read_text().splitlines() == [f"done {job_id} attempt=1"]
    job = client.job(job_id)
    assert job["attempts"] == 1 and job["failures"] == 0
    assert [e["kind"] for e in job["events"]].count("completed") == 1


def test_a_crash_between_ranks_counts_one_failure_then_the_job_completes(serve_process, tmp_path):
    # rank 0 started, rank 1 never did: the restart finds rank 1 vanished (a failure, item 4)
    state, marker = tmp_path / "state", tmp_path / "done.txt"
    first = serve_process("--cluster", "1x2", crash_at="between_ranks")
    job_id = ControllerClient.from_state(state).submit(_job("pair", 20, str(marker), gpus=2, iter_time=0.05))
    _crashed(first)
    client = _restart(serve_process, state)
    wait_for(lambda: client.job(job_id)["state"] == "completed", 30, "the job to complete", detail=client.jobs)
    job = client.job(job_id)
    assert job["failures"] == 1 and job["attempts"] == 2
    assert "vanished" in job["result"]
    # (the lone rank 0 of attempt 1 may itself have reached the end: the demo does not
    # need its peer; a real job would hang and be killed by the failover)
    assert f"done {job_id} attempt=2" in marker.read_text().splitlines()


def test_a_lost_submit_answer_is_retried_and_creates_one_job(serve_process, tmp_path):
    # item 3: the job is committed, the controller dies before answering; the client
    # retries with the same submission id against the restarted controller
    state, marker = tmp_path / "state", tmp_path / "done.txt"
    first = serve_process("--cluster", "1x2", crash_at="after_submit_commit")
    client = ControllerClient.from_state(state)
    answer: list[str] = []
    thread = threading.Thread(
        target=lambda: answer.append(client.submit(_job("x", 3, str(marker)), "sid-1", retry=True))
    )
    thread.start()
    _crashed(first)
    again = _restart(serve_process, state)
    thread.join(timeout=30)
    assert answer == ["1"]
    assert again.submit(_job("x", 3, str(marker)), "sid-1") == "1"  # a later repeat: the same job
    assert [j["id"] for j in again.jobs()] == ["1"]
    wait_for(lambda: again.job("1")["state"] == "completed", 30, "the job to complete")


def test_max_retries_holds_across_a_crash_during_failover(serve_process, tmp_path):
    # item 4: the failure is recorded, the controller dies before killing the ranks;
    # with max_retries 1 the second failure is final, whatever the crashes
    state = tmp_path / "state"
    first = serve_process("--cluster", "1x2", crash_at="during_failover")
    always_fails = {"name": "bad", "command": "sh -c 'sleep 0.2; exit 3'", "iterations": 1, "max_retries": 1}
    job_id = ControllerClient.from_state(state).submit(json.dumps(always_fails))
    _crashed(first)
    client = _restart(serve_process, state)
    wait_for(lambda: client.job(job_id)["state"] == "failed", 30, "the job to fail", detail=client.jobs)
    job = client.job(job_id)
    assert job["failures"] == 2 and job["attempts"] == 2
    assert job["reason"] == "rank 0 exited with 3; gave up after 2 failures"  # item 13: the truth


def test_a_rank_that_dies_while_the_controller_is_down_is_a_counted_failure(serve_process, tmp_path):
    # item 4: today the restart requeued such a job "after controller restart" uncounted
    state, marker = tmp_path / "state", tmp_path / "done.txt"
    first = serve_process("--cluster", "1x2")
    client = ControllerClient.from_state(state)
    # 120 steps of 0.05 s: about 5 s left after the first report (1.2 s in) to kill the
    # controller and then the rank before the job ends on its own (40 steps left 0.85 s).
    job_id = client.submit(_job("victim", 120, str(marker), iter_time=0.05))
    wait_for(
        lambda: client.job(job_id)["state"] == "running" and (client.job(job_id)["progress"] or 0) >= 1, 20, "a report"
    )
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    _kill_workers(tmp_path)  # the rank dies while nobody watches
    client = _restart(serve_process, state)
    wait_for(lambda: client.job(job_id)["state"] == "completed", 30, "the job to complete", detail=client.jobs)
    job = client.job(job_id)
    assert job["failures"] == 1 and job["attempts"] == 2 and "vanished" in job["result"]


def test_a_cancel_that_crosses_a_restart_does_not_cancel_a_finished_job(serve_process, tmp_path):
    # item 5: the job finished while the controller was down; the cancel came too late
    state, marker = tmp_path / "state", tmp_path / "done.txt"
    first = serve_process("--cluster", "1x2")
    client = ControllerClient.from_state(state)
    job_id = client.submit(_job("quick", 6, str(marker), iter_time=0.05))
    wait_for(lambda: client.job(job_id)["state"] == "running", 20, "the job to run")
    wait_for(lambda: took_a_step(tmp_path / "state-jobs", job_id), 20, "the job's process to take a step")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    with sqlite3.connect(state / "state.db") as db:  # the API accepted a cancel just before the crash
        db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (int(job_id),))
    wait_for(lambda: marker.exists(), 20, "the job to finish while the controller is down")
    client = _restart(serve_process, state)
    wait_for(lambda: client.job(job_id)["state"] in ("completed", "cancelled"), 20, "the job to settle")
    assert client.job(job_id)["state"] == "completed"


def test_a_readopted_job_keeps_reporting_progress_after_a_restart(serve_process, tmp_path):
    # item 13: the restarted controller listens where the workers report (same port)
    state, marker = tmp_path / "state", tmp_path / "done.txt"
    first = serve_process("--cluster", "1x2")
    client = ControllerClient.from_state(state)
    # 300 steps of 0.1 s: the job must outlast the kill, a restart (seconds when loaded)
    # and a report period after it; the test never waits for its end (teardown kills it).
    job_id = client.submit(_job("long", 300, str(marker), iter_time=0.1))
    wait_for(lambda: (client.job(job_id)["progress"] or 0) >= 2, 20, "progress before the crash")
    url = client.url
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    client = _restart(serve_process, state)
    assert client.url == url
    before = client.job(job_id)["progress"]
    wait_for(lambda: (client.job(job_id)["progress"] or 0) >= before + 5, 20, "progress after the restart")
    assert client.job(job_id)["state"] == "running"


def _kill_workers(tmp_path) -> None:
    kill_processes_under(tmp_path / "state-jobs")  # default_work_dir: beside the state dir
