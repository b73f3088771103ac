"""What the HTTP layer may ask of the controller.

The API server is handed an object satisfying ``ControllerService`` (the controller
itself) rather than importing the controller, so the two modules do not depend on each
other. The API only reads the store, queues metric reports and reads a node table: it
never touches scheduling state, which belongs to the control loop.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from shapeshift.runtime.backends.base import Backend
from shapeshift.runtime.store import Store


class ServerHandle(Protocol):
    """A started HTTP server: its bound address, a blocking loop and a stop."""

    server_address: tuple[Any, ...]

    def serve_forever(self) -> None: ...

    def shutdown(self) -> None: ...

    def server_close(self) -> None: ...


class ControllerService(Protocol):
    token: str
    store: Store
    backend: Backend
    reports: queue.SimpleQueue[tuple[str, int, list[dict[str, Any]]]]

    def node_table(self) -> list[dict[str, Any]]:
        """Per node: capacity, used slots and which jobs hold them."""
        ...

    def job_dir(self, job_id: str) -> Path:
        """Where a job's attempts (logs, exit files) and checkpoint live."""
        ...


#: Builds the HTTP server for a controller on ``(host, port)``.
ServerFactory = Callable[[ControllerService, str, int], ServerHandle]
