"""Must-show test 3: SIGKILL the controller while jobs run, restart it on the same state
directory, and every job completes exactly once (running jobs are re-adopted, not rerun)."""

from __future__ import annotations

import json
import os
import signal
import time

from shapeshift.runtime.remote import ControllerClient
from tests.runtime.conftest import wait_for


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
    time.sleep(0.3)
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
