"""Must-show tests 1 and 6: jobs move queued -> running -> completed on a 2-slot local
cluster with real processes, and a mutating request without the token changes nothing."""

from __future__ import annotations

import json
import os
import stat
import time
import urllib.request

from typer.testing import CliRunner

from shapeshift.cli.main import app
from tests.runtime.conftest import demo_job, wait_for


def test_three_jobs_on_two_slots_all_complete_and_queue_shows_the_states(live, tmp_path):
    _, client = live("1x2")
    ids = [client.submit(demo_job(f"job{i}", iterations=12, iter_time=0.1)) for i in range(3)]
    assert ids == ["1", "2", "3"]
    seen: dict[str, list[str]] = {i: [] for i in ids}
    reasons: dict[str, str] = {}
    runner = CliRunner()
    table = ""

    def poll() -> bool:
        nonlocal table
        for job in client.jobs():
            history = seen[job["id"]]
            if not history or history[-1] != job["state"]:
                history.append(job["state"])
            if job["state"] == "queued" and job["reason"]:
                reasons[job["id"]] = job["reason"]
                if not table:
                    table = runner.invoke(app, ["queue", "--state", str(tmp_path / "state")]).output
        return all(h[-1] == "completed" for h in seen.values())

    wait_for(poll, 30, "all three jobs to complete", interval=0.02)
    for job_id in ids:
        assert [s for s in seen[job_id] if s != "queued"] == ["running", "completed"], seen
    # Two slots, three one-slot jobs: the third waits, and says why (the policy's reason).
    assert seen["3"][0] == "queued"
    assert reasons["3"] == "needs 1 GPU, 0 free"
    assert "needs 1 GPU, 0 free" in table and "running" in table
    final = runner.invoke(app, ["queue", "--state", str(tmp_path / "state")]).output
    assert final.count("completed") == 3 and "12/12" in final
    nodes = runner.invoke(app, ["nodes", "--state", str(tmp_path / "state")]).output
    assert "node000" in nodes
    logs = runner.invoke(app, ["logs", "1", "--state", str(tmp_path / "state")])
    assert logs.exit_code == 0 and "attempt1 rank 0" in logs.output
    # The third job started only after one of the first two finished.
    rows = {j["id"]: j for j in client.jobs()}
    assert rows["3"]["first_start"] >= min(rows["1"]["end_time"], rows["2"]["end_time"]) - 0.01


def test_mutating_requests_without_the_token_are_refused_and_change_nothing(live, tmp_path):
    controller, client = live("1x2")
    token_file = tmp_path / "state" / "token"
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    job_id = client.submit(demo_job("keep", iterations=400, iter_time=0.05))
    before = client.jobs()

    def post(path: str, body: bytes, token: str | None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        request = urllib.request.Request(controller.url + path, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert post("/jobs", demo_job("intruder").encode(), None) == 401
    assert post("/jobs", demo_job("intruder").encode(), "wrong-token") == 401
    assert post(f"/jobs/{job_id}/cancel", b"", None) == 401
    time.sleep(0.3)  # a few control-loop ticks
    after = client.jobs()
    assert [j["id"] for j in after] == [j["id"] for j in before] == [job_id]
    assert after[0]["state"] in ("queued", "running")
    # With the token the same requests work.
    assert post(f"/jobs/{job_id}/cancel", b"", controller.token) == 200
    wait_for(lambda: client.job(job_id)["state"] == "cancelled", 10, "the cancel to apply")
    wait_for(lambda: all(n["used"] == 0 for n in client.nodes()), 10, "slots to be released")


def test_a_malformed_submission_is_refused_with_field_and_reason_and_nothing_is_stored(live, tmp_path):
    _, client = live("1x2")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncommand: run {oops}\niterations: 3\n")
    result = CliRunner().invoke(app, ["submit", str(bad), "--state", str(tmp_path / "state")])
    assert result.exit_code == 2
    assert "field 'command'" in result.output and "unknown placeholder {oops}" in result.output
    status, body = client.request("POST", "/jobs", b'{"name": "x", "command": "run"}', auth=True)
    assert status == 400 and "iterations" in json.loads(body)["error"]
    assert client.jobs() == []


def test_a_failing_worker_is_requeued_from_its_checkpoint_then_completes(live):
    _, client = live("1x2")
    job_id = client.submit(demo_job("flaky", iterations=10, iter_time=0.05, extra="--fail-at 5"))
    wait_for(lambda: client.job(job_id)["state"] == "completed", 30, "the flaky job to complete")
    job = client.job(job_id)
    assert job["failures"] == 1 and job["attempts"] == 2
    assert "rank 0 exited with 1" in job["result"]
    kinds = [e["kind"] for e in job["events"]]
    assert kinds.count("running") == 2 and kinds[-1] == "completed"
