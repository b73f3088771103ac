"""The controller as a local attacker would try it."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import time
import urllib.request
from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.cluster import load_cluster
from shapeshift.policies.framework.registry import make_policy
from shapeshift.runtime.api import make_server
from shapeshift.runtime.backends.local import LocalBackend
from shapeshift.runtime.controller import Controller
from shapeshift.runtime.http_server import Limits
from shapeshift.runtime.isolation import resolve_job_user
from shapeshift.runtime.remote import ControllerClient
from tests.runtime.conftest import demo_job, kill_processes_under, wait_for

runner = CliRunner()


def call(url: str, method: str, path: str, token: str | None, body: bytes | None = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url + path, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def raw(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send raw bytes, return everything the server answers before closing (or timing out)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            chunks.append(b"<timeout>")
        return b"".join(chunks)


def sh_job(name: str, script: str) -> str:
    return json.dumps({"name": name, "command": f"sh -c {json.dumps(script)}", "iterations": 1})


def test_state_directory_is_private_and_jobs_run_outside_it(live, tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPESHIFT_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("SHAPESHIFT_TOKEN", "leaked")
    _, client = live("1x2")
    # The job records where it runs and what it inherited; the token must be none of it.
    job_id = client.submit(sh_job("probe", 'echo "$SHAPESHIFT_CHECKPOINT_DIR|$SHAPESHIFT_STATE|$SHAPESHIFT_TOKEN"'))
    wait_for(lambda: client.job(job_id)["state"] == "completed", 20, "the probe job")
    ckpt, state_env, token_env = client.logs(job_id).splitlines()[1].split("|")
    state = (tmp_path / "state").resolve()
    assert state not in Path(ckpt).resolve().parents, ckpt
    assert not (Path(ckpt) / ".." / ".." / ".." / "token").exists()  # the old layout's path
    assert (state_env, token_env) == ("", "")
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for path in state.iterdir():  # token, state.db and its WAL/SHM files, controller.json
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name


@pytest.mark.skipif(os.geteuid() != 0, reason="running jobs as another user needs root")
def test_a_job_run_as_another_user_cannot_read_the_token(live, tmp_path):
    for directory in (tmp_path, tmp_path.parent, tmp_path.parent.parent):  # pytest's are 0700:
        directory.chmod(directory.stat().st_mode | 0o111)  # let the job user reach its checkpoint
    controller, client = live("1x2", job_user=resolve_job_user("nobody"))
    token = tmp_path / "state" / "token"
    script = f"cat {token} && exit 9; touch {{checkpoint_dir}}/written && exit 0"
    job_id = client.submit(sh_job("thief", script.replace("{checkpoint_dir}", "$SHAPESHIFT_CHECKPOINT_DIR")))
    wait_for(lambda: client.job(job_id)["state"] in ("completed", "failed"), 20, "the thief job")
    assert client.job(job_id)["state"] == "completed", client.logs(job_id)
    assert "Permission denied" in client.logs(job_id)
    assert (controller.job_dir(job_id) / "checkpoint" / "written").exists()


def test_per_user_tokens_owners_and_private_data(live, tmp_path):
    controller, admin = live("1x2")
    state = str(tmp_path / "state")
    tokens = {}
    for user, tenant in (("alice", "vision"), ("bob", "nlp")):
        result = runner.invoke(app, ["token", "create", "--user", user, "--tenant", tenant, "--state", state])
        assert result.exit_code == 0, result.output
        tokens[user] = result.output.strip()
    url = controller.url
    # Reads need a token too.
    assert call(url, "GET", "/jobs", None)[0] == 401
    assert call(url, "GET", "/nodes", "nope")[0] == 401
    # Alice submits claiming to be mallory of tenant nlp: the token decides.
    job = {**json.loads(demo_job("a1", iterations=400, iter_time=0.05)), "user": "mallory", "tenant": "nlp"}
    job["env"] = {"API_KEY": "secret-of-alice"}
    status, body = call(url, "POST", "/jobs", tokens["alice"], json.dumps(job).encode())
    assert status == 201, body
    job_id = json.loads(body)["id"]
    mine = json.loads(call(url, "GET", f"/jobs/{job_id}", tokens["alice"])[1])
    assert (mine["user"], mine["tenant"]) == ("alice", "vision") and mine["env"] == {"API_KEY": "secret-of-alice"}
    # Bob sees the job in the queue, not its command, env or logs, and cannot cancel it.
    seen = json.loads(call(url, "GET", f"/jobs/{job_id}", tokens["bob"])[1])
    assert seen["user"] == "alice" and "env" not in seen and "command" not in seen
    listed = json.loads(call(url, "GET", "/jobs", tokens["bob"])[1])
    assert "secret-of-alice" not in json.dumps(listed)
    assert call(url, "GET", f"/jobs/{job_id}/logs", tokens["bob"])[0] == 403
    assert call(url, "POST", f"/jobs/{job_id}/cancel", tokens["bob"], b"")[0] == 403
    time.sleep(0.2)
    assert admin.job(job_id)["state"] in ("queued", "running")
    # The queue shows the owner; the user filter works.
    table = runner.invoke(app, ["queue", "--state", state, "--user", "alice", "--json"])
    assert [j["user"] for j in json.loads(table.output)] == ["alice"]
    assert "alice" in runner.invoke(app, ["queue", "--state", state]).output
    # Alice may cancel her own job; a revoked token stops working.
    assert call(url, "POST", f"/jobs/{job_id}/cancel", tokens["alice"], b"")[0] == 200
    assert runner.invoke(app, ["token", "revoke", "--user", "bob", "--state", state]).exit_code == 0
    wait_for(lambda: call(url, "GET", "/jobs", tokens["bob"])[0] == 401, 5, "the revocation to apply")


def test_log_ranks_are_integers_and_a_missing_rank_is_named(live, tmp_path):
    controller, client = live("1x2")
    job_id = client.submit(sh_job("hello", "echo hello"))
    wait_for(lambda: client.job(job_id)["state"] == "completed", 20, "the job")
    # A .log file the traversal of the old server reached: attempt1/rank + /../../../../evil.log
    evil = controller.job_dir(job_id).parent.parent / "evil.log"
    evil.write_text("outside the state directory")
    for rank in ("/../../../evil", "x/../../..", "-1", "1e3"):
        status, body = call(controller.url, "GET", f"/jobs/{job_id}/logs?rank={rank}", controller.token)
        assert status == 400 and b"outside" not in body, (rank, status, body)
    status, body = call(controller.url, "GET", f"/jobs/{job_id}/logs?rank=5", controller.token)
    assert status == 404 and "has no rank 5 (ranks 0-0)" in json.loads(body)["error"]


@pytest.fixture
def strict(tmp_path):
    """A controller whose limits are small enough to hit quickly."""
    controller = Controller(tmp_path / "state", load_cluster("1x2"), make_policy("fifo", {}), LocalBackend())
    controller.start(partial(make_server, limits=Limits(max_body=4096, head_timeout=0.5)))
    try:
        yield controller
    finally:
        controller.shutdown()
        kill_processes_under(tmp_path)


def test_malformed_requests_get_clean_answers_and_the_server_keeps_serving(strict):
    port, token = strict.port, strict.token
    auth = f"Authorization: Bearer {token}\r\nConnection: close\r\n".encode()
    for length in (b"-1", b"abc", b"1e9"):
        answer = raw(port, b"POST /jobs HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Length: " + length + b"\r\n\r\n{}")
        assert answer.startswith(b"HTTP/1.1 400"), (length, answer[:80])
    # Oversize: refused before the body is read, nothing stored.
    big = b"x" * 10_000
    answer = raw(port, b"POST /jobs HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Length: 10000\r\n\r\n" + big)
    assert answer.startswith(b"HTTP/1.1 413")
    # A non-ASCII Authorization header is a wrong token, not a dropped connection.
    bad_auth = "GET /jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer \u00e9t\u00e9\r\n\r\n"
    answer = raw(port, bad_auth.encode("latin-1"))
    assert answer.startswith(b"HTTP/1.1 401")
    # A client that connects and says nothing is disconnected after the head timeout (0.5 s).
    started = time.monotonic()
    assert raw(port, b"", timeout=5) == b"" and time.monotonic() - started < 4
    assert strict.store.jobs() == []
    assert call(strict.url, "GET", "/health", None)[0] == 200


def test_submission_id_passes_through_and_an_unwritable_store_answers_503(strict, monkeypatch):
    body = json.dumps({**json.loads(demo_job("once", iterations=2)), "submission_id": "req-42"}).encode()
    first = call(strict.url, "POST", "/jobs", strict.token, body)
    again = call(strict.url, "POST", "/jobs", strict.token, body)
    assert first[0] == 201 and again[0] == 200 and json.loads(first[1])["id"] == json.loads(again[1])["id"]

    def readonly(*args, **kwargs):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(strict.store, "add_jobs_once", readonly)  # where submits are written
    other = json.dumps({**json.loads(demo_job("twice", iterations=2)), "submission_id": "req-43"}).encode()
    status, answer = call(strict.url, "POST", "/jobs", strict.token, other)
    assert status == 503 and "readonly" in json.loads(answer)["error"]


def test_openapi_description_lists_the_endpoints(strict):
    status, body = call(strict.url, "GET", "/openapi.json", None)
    paths = json.loads(body)["paths"]
    assert status == 200 and {"/jobs", "/jobs/{job_id}/cancel", "/metrics", "/nodes"} <= set(paths)


def test_client_uses_a_user_token_from_the_environment(live, tmp_path, monkeypatch):
    controller, _ = live("1x2")
    result = runner.invoke(app, ["token", "create", "--user", "carol", "--state", str(tmp_path / "state")])
    monkeypatch.setenv("SHAPESHIFT_URL", controller.url)
    monkeypatch.setenv("SHAPESHIFT_TOKEN", result.output.strip())
    client = ControllerClient.from_state(None)
    job_id = client.submit(demo_job("c", iterations=2))
    assert client.job(job_id)["user"] == "carol"


def test_dashboard_is_served_without_a_token_in_the_shared_page_style(live):
    """The page itself holds no data (it asks for a token), and it is drawn in the palette
    every Shapeshift page shares (shapeshift.page_style), as the reports are."""
    from shapeshift.page_style import PAGE_CSS

    controller, _ = live("1x2")
    status, body = call(controller.url, "GET", "/dashboard", None)
    page = body.decode()
    assert status == 200 and PAGE_CSS in page and "/* PAGE_CSS */" not in page
