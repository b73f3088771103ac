"""``shapeshift serve`` stops within bounds: a second SIGTERM, or the deadline, ends it
even while the graceful stop waits, and while clients keep the API busy.

The graceful stop is made to wait on purpose: ``--on-shutdown drain`` with
``--stop-grace 600`` and a job that ignores SIGTERM and its revoked lease, so draining
would take ten minutes. Meanwhile clients submit, read ``/health`` and hold half-sent
requests open. Every wait below is a generous bound that only tells "exited" from "hung".
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import threading
import time
from pathlib import Path

from shapeshift.runtime.remote import ControllerClient
from tests.runtime.conftest import wait_for

#: Ignores SIGTERM (inherited by ``sleep``); the path marks the process as this test's.
STUBBORN = json.dumps(
    {"name": "stubborn", "iterations": 1, "command": "sh -c 'trap \"\" TERM; sleep 600' {checkpoint_dir}"}
)


def _load(state: Path, stop: threading.Event) -> None:
    """Submits, health checks and stalled requests until ``stop``; errors are expected."""
    client = ControllerClient.from_state(state)
    client.timeout = 2
    held: list[socket.socket] = []
    try:
        for i in range(10_000):
            if stop.is_set():
                return
            with contextlib.suppress(Exception):
                client.submit(json.dumps({"name": f"load{i}", "iterations": 1, "command": "true"}))
                client.request("GET", "/health", auth=False)
                if len(held) < 20:
                    s = socket.create_connection(("127.0.0.1", int(client.url.rsplit(":", 1)[1])), timeout=1)
                    s.sendall(
                        f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {client.token}\r\n"
                        "Content-Length: 5000\r\n\r\n".encode()
                    )
                    held.append(s)
            time.sleep(0.01)
    finally:
        for s in held:
            s.close()


def _start_under_load(serve_process, tmp_path: Path, *extra: str):
    proc = serve_process("--cluster", "1x1", "--on-shutdown", "drain", "--stop-grace", "600", *extra)
    state = tmp_path / "state"
    client = ControllerClient.from_state(state)
    job_id = client.submit(STUBBORN)
    wait_for(lambda: client.job(job_id)["state"] == "running", 20, "the stubborn job to start")
    stop = threading.Event()
    load = threading.Thread(target=_load, args=(state, stop), daemon=True)
    load.start()
    time.sleep(1.0)  # the load is under way
    return proc, stop, load


def _exit_code_within(proc, seconds: float) -> int | None:
    try:
        return proc.wait(timeout=seconds)
    except Exception:
        return None


def test_a_second_sigterm_ends_a_stop_that_waits(serve_process, tmp_path):
    proc, stop, load = _start_under_load(serve_process, tmp_path)
    try:
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert proc.poll() is None  # draining: the job has 600 s to checkpoint
        proc.send_signal(signal.SIGTERM)
        code = _exit_code_within(proc, 15)
    finally:
        stop.set()
        load.join(timeout=10)
    assert code is not None, "still running 15 s after the second SIGTERM"
    assert code != 0
    log = (tmp_path / "serve0.log").read_text()
    assert "second SIGTERM during shutdown; exiting now" in log
    assert "Traceback" not in log


def test_the_shutdown_deadline_ends_a_stop_that_waits(serve_process, tmp_path):
    proc, stop, load = _start_under_load(serve_process, tmp_path, "--shutdown-timeout", "2")
    try:
        proc.send_signal(signal.SIGTERM)
        code = _exit_code_within(proc, 20)  # 2 s, with room for a loaded machine
    finally:
        stop.set()
        load.join(timeout=10)
    assert code is not None, "still running 20 s after SIGTERM with --shutdown-timeout 2"
    log = (tmp_path / "serve0.log").read_text()
    assert "shutdown not finished after 2 s; exiting now" in log
    assert "Traceback" not in log


def test_a_stop_with_nothing_to_wait_for_is_clean(serve_process, tmp_path):
    proc = serve_process("--cluster", "1x1")
    proc.send_signal(signal.SIGINT)
    assert _exit_code_within(proc, 30) == 0
    assert "exiting now" not in (tmp_path / "serve0.log").read_text()
