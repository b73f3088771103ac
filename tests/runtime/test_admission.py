"""What a submit goes through, launch failures,
unwritable or locked state, and one controller per state directory."""

from __future__ import annotations

import json
import sqlite3
import subprocess

from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.runtime.remote import ControllerClient
from tests.runtime.conftest import PYTHON, demo_job, wait_for


def _post(client: ControllerClient, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    status, data = client.request("POST", "/jobs", json.dumps(body).encode(), auth=True)
    return status, json.loads(data)


REFUSED = [
    ({"resources": {"gpus": 16}}, "needs 16 GPUs but the cluster has 4"),
    ({"resources": {"gpus": 0}}, "greater than or equal to 1"),
    ({"resources": {"gpus": 1, "cpus": 1000}}, "more CPUs or memory than the cluster has"),
    ({"resources": {"gpus": True}}, "true/false is not a number"),
    ({"iterations": 10**13}, "less than or equal to 1000000000000"),
    ({"max_retries": 1000}, "less than or equal to 100"),
    ({"max_retries": False}, "true/false is not a number"),
    ({"command": "run {name:d}"}, "Unknown format code 'd'"),
    ({"command": "run 'unbalanced"}, "No closing quotation"),
    ({"env": {"KEY": "a\x00b"}}, "NUL byte"),
    ({"submission_id": "x" * 200}, "submission_id"),
]


def test_an_impossible_or_malformed_job_is_refused_at_submit_and_nothing_is_stored(live):
    # item 6 and 7: the cluster is 1 node of 4 GPUs (and the shorthand's CPUs); every one of
    # these was accepted and stored by the old controller
    _, client = live("1x4")
    for change, needle in REFUSED:
        status, body = _post(client, {**json.loads(demo_job("x")), **change})
        assert status == 400 and needle in str(body["error"]), (change, body)
    assert client.jobs() == []


def test_a_name_with_a_quote_is_one_word_and_the_job_runs(live, tmp_path):
    # item 6: the old launcher split the command AFTER filling in {name}: every tick failed
    _, client = live("1x2")
    marker = tmp_path / "args.txt"
    job = {"name": "it's", "command": f"sh -c 'echo \"$1\" > {marker}' sh {{name}}", "iterations": 1}
    job_id = client.submit(json.dumps(job))
    wait_for(lambda: client.job(job_id)["state"] == "completed", 20, "the job to complete", detail=client.jobs)
    assert marker.read_text() == "it's\n"


def test_a_launch_failure_fails_that_job_alone_counted_against_max_retries(live, tmp_path):
    # item 2: a rank that cannot even be started (here its working directory is missing)
    # leaves no ranks; the old code saw "every exit code is 0" and marked the job completed.
    # The other job is unaffected.
    _, client = live("1x2")
    env = {"SHAPESHIFT_WORKDIR": str(tmp_path / "missing")}
    bad = client.submit(json.dumps({"name": "bad", "command": "true", "iterations": 1, "max_retries": 1, "env": env}))
    good = client.submit(demo_job("good", iterations=5, iter_time=0.05))
    wait_for(lambda: client.job(bad)["state"] == "failed", 20, "the bad job to fail", detail=client.jobs)
    wait_for(lambda: client.job(good)["state"] == "completed", 20, "the good job to complete", detail=client.jobs)
    job = client.job(bad)
    assert job["failures"] == 2 and job["attempts"] == 2  # one retry, then given up
    assert "launch failed" in job["reason"] and "No such file" in job["reason"]


def test_a_repeated_submission_id_returns_the_first_job(live, tmp_path):
    # item 3: a client that lost the answer resubmits with the same id
    _, client = live("1x2")
    first = _post(client, {**json.loads(demo_job("a", iterations=2)), "submission_id": "run-7"})
    again = _post(client, {**json.loads(demo_job("a", iterations=2)), "submission_id": "run-7"})
    other = _post(client, {**json.loads(demo_job("a", iterations=2)), "submission_id": "run-8"})
    assert first == (201, {"id": "1", "created": True})
    assert again == (200, {"id": "1", "created": False})  # the first job, nothing new stored
    assert other[1]["id"] == "2"
    job_file = tmp_path / "job.json"
    job_file.write_text(demo_job("cli", iterations=2))
    state = str(tmp_path / "state")
    runs = [CliRunner().invoke(app, ["submit", str(job_file), "--state", state, "--submission-id", "k1"]) for _ in "ab"]
    assert [r.output.strip() for r in runs] == ["3", "3"]
    fresh = CliRunner().invoke(app, ["submit", str(job_file), "--state", state])  # random id: a new job
    assert fresh.output.strip() == "4"


def test_a_locked_state_database_gives_health_503_submit_503_and_reads_still_answer(live, tmp_path):
    # items 10 and 11: an outside process holds the write lock. Reads answer (they used to
    # queue behind the writer's lock for 30 s), writes fail after store_timeout with a clear
    # 503, /health says the state is unwritable, and all recovers when the lock goes.
    _, client = live("1x2", store_timeout=0.3)
    job_id = client.submit(demo_job("before", iterations=2, iter_time=0.05))
    wait_for(lambda: client.job(job_id)["state"] == "completed", 20, "the first job to complete")
    outsider = sqlite3.connect(tmp_path / "state" / "state.db", isolation_level=None)
    outsider.execute("BEGIN IMMEDIATE")
    try:
        client.timeout = 3.0
        wait_for(lambda: client.request("GET", "/health")[0] == 503, 10, "health to report the lock")
        assert "unwritable" in json.loads(client.request("GET", "/health")[1])["state"]
        assert [j["id"] for j in client.jobs()] == [job_id]  # reads are not blocked
        status, body = _post(client, json.loads(demo_job("during")))
        assert status == 503 and "cannot write its state" in str(body["error"])
    finally:
        outsider.execute("ROLLBACK")
        outsider.close()
    wait_for(lambda: client.request("GET", "/health")[0] == 200, 10, "health to recover")
    assert client.submit(demo_job("after", iterations=1)) == "2"


def test_a_second_controller_on_the_same_state_directory_exits_2_naming_the_holder(serve_process, tmp_path):
    # item 12: both used to be accepted, and the second took over controller.json
    first = serve_process("--cluster", "1x2")
    address = (tmp_path / "state" / "controller.json").read_text()
    second = subprocess.run(
        [PYTHON, "-m", "shapeshift.cli.main", "serve", "--state", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 2
    assert f"PID {first.pid}" in second.stdout + second.stderr
    assert (tmp_path / "state" / "controller.json").read_text() == address


def test_a_failed_completion_write_is_retried_and_the_job_does_not_run_again(live, tmp_path):
    # item 1: one "database is locked" between "run done" and "job completed" used to leave
    # the run done and the job running, so it was requeued and ran a second time
    from shapeshift.runtime.store import StateUnavailable

    controller, client = live("1x2")
    real = controller.store.transition
    failed: list[str] = []

    def flaky(job_id, state, *args, **kwargs):
        if state == "completed" and not failed:
            failed.append(job_id)
            raise StateUnavailable("cannot write the state database: database is locked")
        return real(job_id, state, *args, **kwargs)

    controller.store.transition = flaky  # type: ignore[method-assign]
    marker = tmp_path / "done.txt"
    command = f"{{python}} -m shapeshift.client.demo --iterations {{iterations}} --iter-time 0.05 --marker {marker}"
    job_id = client.submit(json.dumps({"name": "once", "command": command, "iterations": 4}))
    wait_for(lambda: client.job(job_id)["state"] == "completed", 20, "the job to complete", detail=client.jobs)
    assert failed == [job_id]
    job = client.job(job_id)
    assert job["attempts"] == 1 and marker.read_text().splitlines() == [f"done {job_id} attempt=1"]
