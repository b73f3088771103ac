"""``report``: send progress and measured iteration times to the controller.

Reports are buffered in memory and posted by a background thread about once a second, so
a training step never waits on the network; ``flush`` (also run at exit) sends the rest.
Outside a controller-managed run ``report`` is a no-op, so scripts run standalone too.
"""

from __future__ import annotations

import atexit
import json
import threading
import urllib.request
from typing import Any

from shapeshift.client.lease import WorkerEnv


class _Reporter:
    def __init__(self, env: WorkerEnv, interval: float = 1.0):
        self.env = env
        self.interval = interval
        self._buffer: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._sending = threading.Lock()  # one post at a time: flush waits for one in flight
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="shapeshift-report", daemon=True)
        self._thread.start()
        atexit.register(self.flush)

    def add(self, item: dict[str, Any]) -> None:
        with self._lock:
            self._buffer.append(item)

    def flush(self) -> None:
        """Post every buffered report; returns once they are posted or kept for a retry.

        A post the background thread has in flight is waited for, so reports added before
        ``flush`` have reached the controller when it returns (the trainer exits at once
        after it: an in-flight post would otherwise die with the process)."""
        with self._sending:
            self._post()

    def _post(self) -> None:
        with self._lock:
            items, self._buffer = self._buffer, []
        if not items:
            return
        body = json.dumps({"key": self.env.lease_key, "attempt": self.env.attempt, "reports": items}).encode()
        request = urllib.request.Request(
            f"{self.env.controller}/jobs/{self.env.job_id}/metrics",
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Lease {self.env.lease_key}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=2):
                pass
        except Exception:
            with self._lock:  # keep the latest reports for the next try (the controller may be restarting)
                self._buffer = (items + self._buffer)[-100:]

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self.flush()


_reporter: _Reporter | None = None
_reporter_lock = threading.Lock()


def _get() -> _Reporter | None:
    global _reporter
    with _reporter_lock:
        if _reporter is None:
            env = WorkerEnv.from_env()
            if not env.managed or env.rank != 0:
                return None
            _reporter = _Reporter(env)
        return _reporter


def report(
    step: int,
    *,
    loss: float | None = None,
    samples: int | None = None,
    iter_time: float | None = None,
    **extra: float,
) -> None:
    """Record that iteration ``step`` is done (1-based count of finished iterations).

    Only rank 0 reports; other ranks' calls are no-ops, so every rank may call it."""
    reporter = _get()
    if reporter is None:
        return
    item: dict[str, Any] = {"step": int(step)}
    for key, value in (("loss", loss), ("samples", samples), ("iter_time", iter_time), *extra.items()):
        if value is not None:
            item[key] = float(value)
    reporter.add(item)


def flush() -> None:
    """Send buffered reports now (e.g. before exiting)."""
    if _reporter is not None:
        _reporter.flush()
