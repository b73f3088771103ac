"""The live runtime's CLI as a user meets it: machine-readable output, filters,
logs without a controller, and every way ``serve`` can fail to start as one line, exit 2."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.runtime.store import Store
from tests.runtime.conftest import demo_job, wait_for

runner = CliRunner()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def broken_database(directory: Path, how: str) -> None:
    directory.mkdir()
    db = directory / "state.db"
    if how == "garbage":
        db.write_bytes(b"SQLite format 3\x00" + b"\xff" * 2000)
        return
    store = Store(db)
    for i in range(200):
        store.add_job(f"job{i}", json.dumps({"name": "x" * 100}))
    store.close()
    with open(db, "r+b") as f:  # a disk that filled up, a copy cut short
        f.truncate(db.stat().st_size // 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "99999"], "99999 is not a TCP port"),
        (["--round", "0"], "field '--round': must be a finite number > 0"),
        (["--round", "-5"], "field '--round'"),
        (["--poll-interval", "nan"], "field '--poll-interval'"),
        (["--state", "FILE"], "is a file; --state needs a directory"),
        (["--state", "/proc/nope/state"], "field '--state': cannot write here: /proc/nope: No such file"),
        (["--state", "GARBAGE"], "cannot be read as a state database"),
        (["--state", "TRUNCATED"], "cannot be read as a state database (database disk image is malformed)"),
        (["--backend", "ray", "--ray-address", "CLOSED"], "cannot reach a Ray cluster at 127.0.0.1:"),
        (["--backend", "ray", "--cluster", "SHARING"], "GPU sharing (gpu_share_limit above 1) needs the local backend"),
        (["--job-user", "no-such-user-here"], "no user 'no-such-user-here'"),
    ],
)
def test_serve_refuses_to_start_with_one_line(tmp_path, args, message):
    (tmp_path / "file").write_text("x")
    broken_database(tmp_path / "garbage", "garbage")
    broken_database(tmp_path / "truncated", "truncated")
    swap = {"FILE": str(tmp_path / "file"), "GARBAGE": str(tmp_path / "garbage")}
    swap |= {"TRUNCATED": str(tmp_path / "truncated"), "CLOSED": f"127.0.0.1:{closed_port()}"}
    (tmp_path / "sharing.yaml").write_text("nodes:\n  - {gpus: 2, gpu_mem_gb: 16}\ngpu_share_limit: 2\n")
    swap["SHARING"] = str(tmp_path / "sharing.yaml")
    args = [swap.get(a, a) for a in args]
    if "--state" not in args:
        args += ["--state", str(tmp_path / "state")]
    result = runner.invoke(app, ["serve", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) <= 2  # one sentence (wrapped at most once)


def test_serve_refuses_a_port_in_use(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = runner.invoke(app, ["serve", "--state", str(tmp_path / "s"), "--port", str(port)])
    assert result.exit_code == 2 and f"port {port} on 127.0.0.1 is already in use" in result.output


def test_queue_and_nodes_json_filters_and_logs_without_a_controller(live, tmp_path):
    controller, client = live("1x2")
    state = str(tmp_path / "state")
    done = client.submit(demo_job("quick", iterations=3, iter_time=0.02))
    wait_for(lambda: client.job(done)["state"] == "completed", 20, "the quick job")
    blocker = client.submit(demo_job("long", iterations=400, iter_time=0.05))
    wait_for(lambda: client.job(blocker)["state"] == "running", 10, "the long job to start")
    # Needs both slots while one is held: it waits.
    waiting = client.submit(json.dumps({"name": "big", "command": "true", "iterations": 1, "resources": {"gpus": 2}}))
    wait_for(lambda: client.job(waiting)["reason"], 10, "the waiting job's reason")  # written at the next tick
    rows = json.loads(runner.invoke(app, ["queue", "--state", state, "--json"]).output)
    assert [r["id"] for r in rows] == [done, blocker, waiting]
    first = rows[0]
    assert first["state"] == "completed" and first["user"] == "admin"
    assert first["elapsed"] == pytest.approx(first["end_time"] - first["first_start"])
    only = json.loads(runner.invoke(app, ["queue", "--state", state, "-t", "completed", "--json"]).output)
    assert [r["id"] for r in only] == [done]
    active = json.loads(runner.invoke(app, ["queue", "--state", state, "-t", "queued,running", "--json"]).output)
    assert [r["id"] for r in active] == [blocker, waiting]
    bad = runner.invoke(app, ["queue", "--state", state, "-t", "sleeping"])
    assert bad.exit_code == 2 and "unknown job state 'sleeping'" in bad.output
    table = runner.invoke(app, ["queue", "--state", state]).output
    assert "admin" in table and "needs 2 GPUs" in table.replace("\n", " ")
    nodes = json.loads(runner.invoke(app, ["nodes", "--state", state, "--json"]).output)
    assert nodes[0]["name"] == "node000" and nodes[0]["gpus"] == 2
    controller.shutdown()
    # No controller now: logs come from the files, and a rank that does not exist is named.
    logs = runner.invoke(app, ["logs", done, "--state", state])
    assert logs.exit_code == 0 and "==> attempt1 rank 0 <==" in logs.output
    missing = runner.invoke(app, ["logs", done, "--rank", "3", "--state", state])
    assert missing.exit_code == 2 and f"job {done} has no rank 3 (ranks 0-0)" in missing.output


def test_prometheus_metrics(live):
    _, client = live("1x2")
    job_id = client.submit(demo_job("m", iterations=3, iter_time=0.02))
    wait_for(lambda: client.job(job_id)["state"] == "completed", 20, "the job")
    status, body = client.request("GET", "/metrics", auth=False)
    assert status == 401
    status, body = client.request("GET", "/metrics")
    text = body.decode()
    values = {k: float(v) for k, v in re.findall(r"^(shapeshift_[a-z_]+(?:\{[^}]*\})?) (\S+)$", text, re.M)}
    # One job, finished: nothing waits or runs, both slots free, one completed job.
    assert values["shapeshift_queue_length"] == 0 and values["shapeshift_running_jobs"] == 0
    assert values['shapeshift_jobs{state="completed"}'] == 1
    assert values["shapeshift_gpus"] == 2 and values["shapeshift_gpus_allocated"] == 0
    # At least the decision that started the job was timed.
    assert values["shapeshift_decision_seconds_count"] >= 1
    assert "# TYPE shapeshift_decision_seconds histogram" in text
