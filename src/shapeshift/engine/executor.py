"""The executor protocol: what the engine asks of whoever actually runs jobs.

The engine never asks what time it is and never computes a finish time itself; it
tells an executor to launch, stop or reconfigure a job and hears back when a job has
finished. A simulated executor answers from a throughput model, a live one from real
processes; the engine cannot tell them apart.
"""

from __future__ import annotations

from typing import Protocol

from shapeshift.engine.state import JobStatus
from shapeshift.model import Allocation


class Executor(Protocol):
    def on_submit(self, job: JobStatus) -> None:
        """Set ``job.work_total`` (in the executor's work units)."""

    def launch(self, job: JobStatus, allocation: Allocation, now: float, pause: float) -> None:
        """Start ``job`` on ``allocation``; it makes no progress for ``pause`` seconds."""

    def stop(self, job: JobStatus, now: float) -> None:
        """Stop ``job`` (preemption); it keeps its progress as of ``now``."""

    def reconfigure(self, job: JobStatus, allocation: Allocation, now: float, pause: float) -> None:
        """Move a running ``job`` to a new allocation or plan after a ``pause``."""
