"""Helpers for live-runtime tests: controllers on loopback, bounded waits, and cleanup that
kills every process a test started, even when the test fails."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from shapeshift.cluster import load_cluster
from shapeshift.policies.framework.registry import make_policy
from shapeshift.runtime.api import make_server
from shapeshift.runtime.backends.local import LocalBackend
from shapeshift.runtime.controller import Controller
from shapeshift.runtime.remote import ControllerClient

PYTHON = sys.executable


def demo_job(name: str, iterations: int = 10, iter_time: float = 0.1, gpus: int = 1, extra: str = "") -> str:
    command = f"{{python}} -m shapeshift.client.demo --iterations {{iterations}} --iter-time {iter_time} {extra}"
    return json.dumps({"name": name, "command": command, "iterations": iterations, "resources": {"gpus": gpus}})


class FailingWrites:
    """The store's writer connection, failing data changes from the ``after``-th on with
    ``error`` (what SQLite raises when the disk is full or the database read-only)."""

    def __init__(self, db: sqlite3.Connection, error: str, after: int = 0):
        self._db, self._error, self._left = db, error, after

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            if self._left <= 0:
                raise sqlite3.OperationalError(self._error)
            self._left -= 1
        return self._db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def wait_for(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    interval: float = 0.05,
    detail: Callable[[], object] | None = None,
) -> None:
    """Poll ``predicate``; on time-out fail with ``detail()`` (the state worth seeing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    extra = f"; state: {detail()}" if detail is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")


def took_a_step(work_dir: Path, job_id: str) -> bool:
    """Whether the demo job's process has taken a step: it writes ``demo-step`` in its
    checkpoint directory (``work_dir/<job id>/checkpoint``) after each one. A job is
    stored "running" just before the controller starts its process, so a test that kills
    the controller must wait for this, or a kill in between leaves no process to re-adopt
    (a race a loaded CI machine hit)."""
    return (work_dir / job_id / "checkpoint" / "demo-step").exists()


def kill_processes_under(path: Path) -> None:
    """SIGKILL every process whose command line mentions ``path`` (wrappers and their groups)."""
    marker = str(path).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(entry.name), signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Callable[..., tuple[Controller, ControllerClient]]]:
    """Start in-process controllers on loopback; all are shut down and their jobs killed at the end."""
    started: list[Controller] = []

    def start(cluster: str = "1x2", policy: str = "fifo", **kw: object) -> tuple[Controller, ControllerClient]:
        controller = Controller(
            tmp_path / ("state" if not started else f"state-{len(started) + 1}"),
            load_cluster(cluster),
            kw.pop("policy_obj", None) or make_policy(policy, {}),  # type: ignore[arg-type]
            kw.pop("backend", None) or LocalBackend(),  # type: ignore[arg-type]
            poll_interval=0.05,
            **kw,  # type: ignore[arg-type]
        )
        controller.start(make_server)
        started.append(controller)
        return controller, ControllerClient(controller.url, controller.token)

    try:
        yield start
    finally:
        for controller in started:
            with contextlib.suppress(Exception):
                controller.shutdown()
        kill_processes_under(tmp_path)


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start ``shapeshift serve`` as a real process (so a test can SIGKILL it)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str, crash_at: str = "", expect_running: bool = True) -> subprocess.Popen[bytes]:
        """``crash_at`` names a crash-injection point (``store.crash_point``): the process
        dies there as if SIGKILLed, the first time it gets there."""
        state = tmp_path / "state"
        address = state / "controller.json"
        with contextlib.suppress(FileNotFoundError):
            address.unlink()
        log = open(tmp_path / f"serve{len(procs)}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [PYTHON, "-m", "shapeshift.cli.main", "serve", "--state", str(state), "--poll-interval", "0.05", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "SHAPESHIFT_CRASH_AT": crash_at},
        )
        procs.append(proc)
        if expect_running:
            wait_for(lambda: address.exists() or proc.poll() is not None, 30, "the controller to start")
            assert proc.poll() is None, (tmp_path / f"serve{len(procs) - 1}.log").read_text()
        return proc

    try:
        yield start
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        kill_processes_under(tmp_path)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: real training processes (torch); still run by plain pytest")
