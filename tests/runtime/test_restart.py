"""Must-show test 3: SIGKILL the controller while jobs run, restart it on the same state
directory, and every job completes exactly once (running jobs are re-adopted, not rerun)."""

from __future__ import annotations

import json
import os
import signal
import time

from shapeshift.runtime.remote import ControllerClient
from tests.runtime.conftest import took_a_step, wait_for


def _stepping(tmp_path, client: ControllerClient) -> bool:
    """Every running job's process has taken a step (see ``took_a_step``); a kill before
    that leaves a job to run again (attempts 2)."""
    running = [j["id"] for j in client.jobs() if j["state"] == "running"]
    return all(took_a_step(tmp_path / "state-jobs", job_id) for job_id in running)


def _job(name: str, iterations: int, marker: str) -> str:
    command = f"{{python}} -m shapeshift.client.demo --iterations {{iterations}} --iter-time 0.1 --marker {marker}"
    return json.dumps({"name": name, "command": command, "iterations": iterations, "resources": {"gpus": 1}})


def test_killed_controller_restarts_and_every_job_completes_exactly_once(serve_process, tmp_path):
    state = tmp_path / "state"
    marker = tmp_path / "done.txt"
    first = serve_process("--cluster", "1x2", "--stop-grace", "5")
    client = ControllerClient.from_state(state)
    ids = [
        client.submit(_job("short", 8, str(marker))),  # finishes while the controller is down
        client.submit(_job("long", 30, str(marker))),  # still running at the restart: re-adopted
        client.submit(_job("queued", 8, str(marker))),  # waits for a slot across the restart
    ]
    wait_for(lambda: sum(j["state"] == "running" for j in client.jobs()) == 2, 20, "two jobs to run")
    wait_for(lambda: _stepping(tmp_path, client), 20, "both running jobs to take a step")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    time.sleep(1.2)  # the short job ends while nobody watches

    serve_process("--cluster", "1x2", "--stop-grace", "5")
    client = ControllerClient.from_state(state)
    wait_for(lambda: all(j["state"] == "completed" for j in client.jobs()), 40, "all jobs to complete")

    lines = marker.read_text().splitlines()
    assert sorted(lines) == sorted(f"done {i} attempt=1" for i in ids), lines
    jobs = {j["id"]: client.job(j["id"]) for j in client.jobs()}
    assert all(j["attempts"] == 1 for j in jobs.values())
    assert any(e["kind"] == "adopted" for e in jobs[ids[1]]["events"])
    assert [e["kind"] for e in jobs[ids[0]]["events"]].count("completed") == 1


def test_a_restarted_themis_controller_ranks_a_re_adopted_run(serve_process, tmp_path):
    """Bug: a run re-adopted after a restart was never seen waiting by Themis, whose
    running-jobs table then found no contention mark for it: the first ticks after the
    restart failed with a KeyError (logged; the controller kept serving, and those ticks
    decided nothing). One 1-GPU job
    runs under fifo on 1x2 while a 2-GPU job waits; the controller is killed and
    restarted with themis: the first tick is a lease round that ranks the re-adopted run."""
    state = tmp_path / "state"
    marker = tmp_path / "done.txt"
    first = serve_process("--cluster", "1x2", "--stop-grace", "5")
    client = ControllerClient.from_state(state)
    long = client.submit(_job("long", 30, str(marker)))
    wide = json.loads(_job("wide", 5, str(marker)))
    wide["resources"]["gpus"] = 2
    client.submit(json.dumps(wide))
    wait_for(lambda: sum(j["state"] == "running" for j in client.jobs()) == 1, 20, "one job to run")
    wait_for(lambda: _stepping(tmp_path, client), 20, "the running job to take a step")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)

    serve_process("--cluster", "1x2", "--stop-grace", "5", "--policy", "themis")
    client = ControllerClient.from_state(state)
    wait_for(lambda: all(j["state"] == "completed" for j in client.jobs()), 40, "all jobs to complete")
    assert "tick failed" not in (tmp_path / "serve1.log").read_text()
    assert any(e["kind"] == "adopted" for e in client.job(long)["events"])
