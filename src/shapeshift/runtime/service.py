"""What the HTTP layer may ask of the controller.

The API server is handed an object satisfying ``ControllerService`` (the controller
itself) rather than importing the controller, so the two modules do not depend on each
other. The API reads the store, hands submit bodies to ``submit_later``, queues metric reports
and reads a node table: it never touches scheduling state, which belongs to the
control loop.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol

from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec
from shapeshift.runtime.backends.base import Backend
from shapeshift.runtime.ids import ADMIN_OWNER, SubmissionConflict
from shapeshift.runtime.metrics_export import DecisionStats
from shapeshift.runtime.store import StateUnavailable, Store


class ServerHandle(Protocol):
    """A started HTTP server: its bound address, a blocking loop and a stop."""

    server_address: tuple[Any, ...]

    def serve_forever(self) -> None: ...

    def shutdown(self) -> None: ...

    def server_close(self) -> None: ...


class ControllerService(Protocol):
    token: str  # the admin token
    store: Store
    backend: Backend
    cluster: ClusterSpec  # for tenant quotas
    decision_stats: DecisionStats
    reports: queue.SimpleQueue[tuple[str, int, list[dict[str, Any]]]]

    def node_table(self) -> list[dict[str, Any]]:
        """Per node: capacity, used slots and which jobs hold them."""
        ...

    def job_dir(self, job_id: str) -> Path:
        """Where a job's attempts (logs, exit files) and checkpoint live."""
        ...

    def submit_document(
        self,
        text: str,
        *,
        overrides: dict[str, Any] | None = None,
        owner: str = ADMIN_OWNER,
        idempotency_key: str | None = None,
    ) -> tuple[str, bool]:
        """Validate and store a submit body (job document + optional ``submission_id``):
        ``(job id, created)``; a submission id ``owner`` used before for the same job
        returns the first job with ``created=False``. Raises ``InputError``,
        ``SubmissionConflict`` or ``StateUnavailable`` (see ``http_status``)."""
        ...

    def submit_later(
        self,
        text: str,
        *,
        overrides: dict[str, Any] | None = None,
        owner: str = ADMIN_OWNER,
        idempotency_key: str | None = None,
    ) -> Future[tuple[str, bool]]:
        """``submit_document`` without waiting: the future resolves once the job is
        committed (or with the exception), so the event loop never blocks on it."""
        ...

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(ok, body)``: not ok while the state database cannot be written."""
        ...


def http_status(exc: BaseException) -> int:
    """The one place controller exceptions become HTTP statuses: a refused submission is
    400 (nothing stored), a submission id reused for another job 409, unwritable state is
    503 (retry later, nothing stored)."""
    if isinstance(exc, StateUnavailable):
        return 503
    if isinstance(exc, SubmissionConflict):
        return 409
    if isinstance(exc, InputError):
        return 400
    return 500


#: Builds the HTTP server for a controller on ``(host, port)``.
ServerFactory = Callable[[ControllerService, str, int], ServerHandle]
