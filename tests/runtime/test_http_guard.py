"""One client cannot stop the controller for the others, and client errors make a few log
lines, not tracebacks.

The attack these reproduce: about 4,000 ``POST /jobs/1/metrics`` requests with
``Content-Length: 5000`` and no body, unauthenticated, from one address, held open. The
API waited for each body, the server's cap filled, ``/health`` and submits answered 503;
on release every waiting request logged a ``ClientDisconnect`` traceback. Sizes here are
small (tens of requests, limits lowered where a field allows it); every wait is bounded
and generous, only to tell an answer from a hang.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
import urllib.request
from functools import partial

import pytest

from shapeshift.cluster import load_cluster
from shapeshift.policies.framework.registry import make_policy
from shapeshift.runtime.api import make_server
from shapeshift.runtime.backends.local import LocalBackend
from shapeshift.runtime.controller import Controller
from shapeshift.runtime.http_server import Limits
from tests.runtime.conftest import demo_job, kill_processes_under, wait_for

#: A second loopback address: "another client" to the server (Linux routes all of 127/8).
OTHER = "127.0.0.2"


def connect(port: int, source: str = "127.0.0.1", timeout: float = 5.0) -> socket.socket:
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def read_answer(s: socket.socket) -> bytes:
    """Everything until the server closes, or b'<timeout>' appended when it does not."""
    chunks = []
    try:
        while chunk := s.recv(65536):
            chunks.append(chunk)
    except TimeoutError:
        chunks.append(b"<timeout>")
    except ConnectionResetError:
        pass
    return b"".join(chunks)


def health(port: int) -> bytes:
    with connect(port) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return read_answer(s)


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(limits: Limits | None = None) -> Controller:
        controller = Controller(tmp_path / "state", load_cluster("1x2"), make_policy("fifo", {}), LocalBackend())
        controller.start(partial(make_server, limits=limits) if limits else make_server)
        started.append(controller)
        return controller

    try:
        yield start
    finally:
        for controller in started:
            controller.shutdown()
        kill_processes_under(tmp_path)


def stalled_post(path: str, token: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 5000\r\n\r\n".encode()


def test_a_request_without_credentials_is_refused_before_its_body(serve):
    controller = serve()
    for path in ("/jobs/1/metrics", "/jobs"):
        with connect(controller.port) as s:
            s.sendall(stalled_post(path))  # and never the 5000 bytes
            answer = read_answer(s)
        assert answer.startswith(b"HTTP/1.1 401"), (path, answer[:120])
        assert b"<timeout>" not in answer  # answered, and the connection closed
    # A lease key that is not a live run's is refused the same way.
    with connect(controller.port) as s:
        s.sendall(b"POST /jobs/1/metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Lease nope\r\nContent-Length: 9\r\n\r\n")
        assert read_answer(s).startswith(b"HTTP/1.1 401")


def test_one_address_holds_only_its_share_of_stalled_requests(serve):
    # Default limits: 128 requests in flight per address. 140 authenticated submits whose
    # bodies never come, from 127.0.0.2: 12 are refused at once (429); 127.0.0.1 is served.
    controller = serve()
    held = []
    try:
        for _ in range(140):
            s = connect(controller.port, OTHER, timeout=0.05)
            s.sendall(stalled_post("/jobs", controller.token))
            held.append(s)
        refused = 0
        deadline = time.monotonic() + 10
        pending = list(held)
        while refused < 12 and time.monotonic() < deadline:
            for s in list(pending):
                with contextlib.suppress(TimeoutError, BlockingIOError):
                    if s.recv(64).startswith(b"HTTP/1.1 429"):
                        refused += 1
                        pending.remove(s)
        assert refused == 12
        assert health(controller.port).startswith(b"HTTP/1.1 200")
    finally:
        for s in held:
            s.close()


def test_a_stalled_body_is_answered_408_after_the_body_timeout(serve):
    controller = serve(Limits(body_timeout=0.5))
    with connect(controller.port) as s:
        s.sendall(stalled_post("/jobs", controller.token) + b'{"name":')
        started = time.monotonic()
        answer = read_answer(s)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:120]
    assert time.monotonic() - started < 4.5  # 0.5 s, with room for a loaded machine
    assert controller.store.jobs() == []


def test_a_keep_alive_connection_trickling_its_next_head_is_closed(serve):
    controller = serve(Limits(head_timeout=1.0, keep_alive=5))
    with connect(controller.port, timeout=0.2) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = b""
        while b'"ok"' not in first:
            first += s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        # The next head, one byte every 0.3 s: a byte resets uvicorn's keep-alive timer,
        # so only a deadline on the head itself ends this (1 s; we give up after 8 s).
        closed = False
        started = time.monotonic()
        for byte in b"GET /health HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 100:
            try:
                s.sendall(bytes([byte]))
                if s.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if time.monotonic() - started > 8:
                break
    assert closed, "the trickling connection was still open after 8 s"


def test_client_errors_make_one_line_per_kind_and_no_traceback(serve):
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    controller = serve()  # first: uvicorn's logging set-up replaces its loggers' handlers
    handler = Keep(level=logging.DEBUG)
    loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "shapeshift")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        for _ in range(20):  # unauthenticated bodies, left mid-way (each was a traceback)
            with connect(controller.port) as s:
                s.sendall(stalled_post("/jobs/1/metrics") + b'{"key"')
                time.sleep(0.02)
        for _ in range(20):  # authenticated, chunked, and the client leaves mid-body
            with connect(controller.port) as s:
                s.sendall(
                    f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {controller.token}\r\n"
                    'Transfer-Encoding: chunked\r\n\r\n5\r\n{"nam\r\n'.encode()
                )
                time.sleep(0.02)
        time.sleep(0.5)
        assert health(controller.port).startswith(b"HTTP/1.1 200")
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    seen = {(r.name, r.getMessage()) for r in records}
    assert not [r for r in records if r.exc_info], [r.getMessage() for r in records if r.exc_info][:3]
    assert len(records) <= 4, seen  # one per kind: wrong credentials, client gone mid-body
    assert any("client error" in message for _, message in seen), seen
    assert all("\n" not in message for _, message in seen)


def test_a_worker_report_with_its_lease_key_in_the_header_is_taken(live):
    controller, client = live("1x1")
    job_id = client.submit(demo_job("r", iterations=400, iter_time=0.05))
    wait_for(lambda: controller.store.job(job_id)["progress"] > 0, 30, "a progress report")
    run = controller.runs[job_id]
    body = json.dumps({"attempt": run.attempt, "reports": [{"step": 1}]}).encode()
    request = urllib.request.Request(
        f"{controller.url}/jobs/{job_id}/metrics",
        data=body,
        headers={"Authorization": f"Lease {run.lease_key}"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 204
