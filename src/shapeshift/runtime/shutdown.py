"""A bounded stop for ``shapeshift serve``: the first SIGTERM or SIGINT asks the
controller to stop; a second one, or the deadline, ends the process at once.

A graceful stop waits on things outside the controller (jobs checkpointing under
``--on-shutdown drain``, clients holding connections, a state database that is slow to
write), so on its own it can take as long as they do; a supervisor (systemd,
``timeout``, an operator's Ctrl-C) must still be able to end it. Ending it early is
safe in the way a crash is: every transition is committed before it acts, running jobs
keep running, and a controller restarted on the same state directory re-adopts them.

Three layers, each covering the one before: the second signal (handled in Python, in
the main thread), a watchdog thread at the deadline, and the kernel's alarm a few
seconds later (``SIGALRM`` with its default action), which ends the process even when
no Python code can run.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

#: Exit status of a forced exit (a stop that did not finish).
FORCED_EXIT = 1
#: Seconds after the deadline at which the kernel's alarm ends the process regardless.
BACKSTOP = 5


class BoundedShutdown:
    """Signal handlers for a foreground server: ``install`` once the stop can be requested."""

    def __init__(self, request_stop: Callable[[], None], deadline: float, out: TextIO | None = None):
        self.request_stop = request_stop
        self.deadline = deadline
        self.out = out
        self.requested = threading.Event()
        self._done = threading.Event()
        self._previous: dict[signal.Signals, Any] = {}

    def install(self) -> None:
        self._previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}

    def _on_signal(self, signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        if self.requested.is_set():
            self._force(f"second {name} during shutdown")
        self.requested.set()
        self.request_stop()
        threading.Thread(target=self._watch, name="shapeshift-shutdown-deadline", daemon=True).start()
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(math.ceil(self.deadline) + BACKSTOP)

    def _watch(self) -> None:
        if not self._done.wait(self.deadline):
            self._force(f"shutdown not finished after {self.deadline:g} s")

    def finished(self) -> None:
        """The graceful stop completed: cancel the deadline, restore the previous handlers."""
        self._done.set()
        signal.alarm(0)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _force(self, why: str) -> None:
        out = self.out or sys.stderr
        try:
            out.write(
                f"shapeshift serve: {why}; exiting now (running jobs keep running; "
                "a controller restarted on this state directory re-adopts them)\n"
            )
            out.flush()
        finally:
            os._exit(FORCED_EXIT)


def default_deadline(stop_grace: float, drain: bool) -> float:
    """60 s for the server and the state to close, plus the jobs' checkpoint time when draining."""
    return 60.0 + (stop_grace if drain else 0.0)
