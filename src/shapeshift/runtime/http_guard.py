"""What a request must get past before the API sees it: its sender's share, its
credentials, and a complete body in time.

One client must not be able to stop the controller for everyone. Uvicorn caps open
connections and in-flight requests for the whole server, so a single client holding
thousands of requests whose bodies never arrive (``Content-Length: 5000``, then silence)
takes every slot, and ``/health`` and every submit answer 503 while it holds them. Here,
in front of the application (an ASGI wrapper), every request:

* counts against its **client address's share** of requests in flight
  (``Limits.max_client_requests``); beyond it the answer is 429 at once;
* that carries a body is **authenticated from its headers first**: a bearer token (user
  or admin) or, for a worker's metric report, its run's lease key
  (``Authorization: Lease KEY``); a refused request is answered 401 without waiting for
  its body;
* has its **body read whole within** ``Limits.body_timeout`` seconds (408 otherwise) and
  within ``Limits.max_body`` bytes (413), then handed to the application as received.

Answers given before the body was read close the connection (the unread body must not
be taken for the next request). A client's errors are logged as one line per kind, at
most once a minute per kind with a count of the ones not shown (``ClientErrorLog``);
never a traceback: a client going away mid-request is its business, not the server's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.concurrency import run_in_threadpool

from shapeshift.runtime.auth import Authenticator
from shapeshift.runtime.store import Store

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("shapeshift.http")

#: The ``Authorization`` scheme a worker's metric report carries its lease key in.
LEASE_SCHEME = "Lease"


class ClientErrorLog:
    """One log line per kind of client error, at most once per ``interval`` seconds per
    kind; the next line says how many were not shown. Thousands of stalled or malformed
    requests make a few lines, not megabytes."""

    def __init__(
        self, logger: logging.Logger = log, interval: float = 60.0, clock: Callable[[], float] = time.monotonic
    ):
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._last: dict[str, float] = {}
        self._hidden: Counter[str] = Counter()

    def note(self, kind: str, detail: str) -> bool:
        """Count one error of ``kind``; True when it was logged."""
        now = self.clock()
        if now - self._last.get(kind, -math.inf) < self.interval:
            self._hidden[kind] += 1
            return False
        hidden = self._hidden.pop(kind, 0)
        more = f" ({hidden} more since the last such line)" if hidden else ""
        self.logger.warning("client error, %s: %s%s", kind, detail, more)
        self._last[kind] = now
        return True


class _Refused(Exception):
    def __init__(self, status: int, message: str, kind: str, headers: list[tuple[bytes, bytes]] | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.headers = status, message, kind, headers or []


class RequestGuard:
    """ASGI wrapper applying the per-client share, header authentication and body limits."""

    def __init__(
        self,
        app: ASGIApp,
        auth: Authenticator,
        store: Store,
        *,
        max_body: int,
        body_timeout: float,
        max_client_requests: int,
        errors: ClientErrorLog | None = None,
    ):
        self.app = app
        self.auth = auth
        self.store = store
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.max_client_requests = max_client_requests
        self.errors = errors or ClientErrorLog()
        self.in_flight: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = str((scope.get("client") or ("unknown",))[0])
        if self.in_flight[client] >= self.max_client_requests:
            self.errors.note("too many requests in flight", f"{client} (limit {self.max_client_requests})")
            message = f"too many requests in flight from {client} (limit {self.max_client_requests}); retry later"
            await _answer(send, 429, message, [(b"retry-after", b"1")])
            return
        self.in_flight[client] += 1
        try:
            await self._guarded(scope, receive, send, client)
        finally:
            self.in_flight[client] -= 1
            if self.in_flight[client] <= 0:
                del self.in_flight[client]

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, client: str) -> None:
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length in (None, b"0") and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)
            return
        try:
            await self._authenticate(scope, headers)
            if length is not None and length.isdigit() and int(length) > self.max_body:
                raise _Refused(413, f"request body too large (limit {self.max_body} bytes)", "body too large")
            body = await self._read_body(receive, client)
        except _Refused as refused:
            self.errors.note(refused.kind, f"{scope['method']} {scope['path']} from {client}")
            await _answer(send, refused.status, refused.message, refused.headers)
            return
        if body is None:  # the client went away mid-body: nobody to answer
            return
        await self.app(scope, _replay(body, receive), send)

    async def _authenticate(self, scope: Scope, headers: dict[bytes, bytes]) -> None:
        raw = headers.get(b"authorization")
        path: str = scope["path"]
        if path.startswith("/jobs/") and path.endswith("/metrics"):
            job_id = path.removeprefix("/jobs/").removesuffix("/metrics")
            key = lease_key(raw)
            if key is None or await run_in_threadpool(self.store.lease, job_id, key) is None:
                raise _Refused(401, "unknown lease key (send it as 'Authorization: Lease KEY')", "unknown lease key")
            return
        who = self.auth.identify_cached(raw)
        if who is None and self.auth.needs_reload():
            who = await run_in_threadpool(self.auth.identify, raw)
        if who is None:
            bearer = [(b"www-authenticate", b'Bearer realm="shapeshift"')]
            message = "missing or wrong bearer token (the admin token is in DIR/token)"
            raise _Refused(401, message, "missing or wrong token", bearer)

    async def _read_body(self, receive: Receive, client: str) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        self.errors.note("client went away mid-body", client)
                        return None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body:
                        raise _Refused(413, f"request body too large (limit {self.max_body} bytes)", "body too large")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            message = f"request body not received within {self.body_timeout:g} s"
            raise _Refused(408, message, "body too slow") from None


def lease_key(header: bytes | None) -> str | None:
    """The key of an ``Authorization: Lease KEY`` header, else None."""
    if not header:
        return None
    try:
        scheme, _, key = header.decode("ascii").partition(" ")
    except UnicodeDecodeError:
        return None
    key = key.strip()
    return key if scheme.lower() == LEASE_SCHEME.lower() and key else None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body as one message, then whatever the connection says next (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _answer(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A JSON error that closes the connection (a request body may be left unread)."""
    raw = json.dumps({"error": message}).encode()
    out = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(raw)).encode()),
        (b"connection", b"close"),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": raw})


class QuietClientErrors(logging.Filter):
    """On uvicorn's logger: its per-request warnings about clients (malformed requests,
    the concurrency limit) go through a ``ClientErrorLog``; a client that disconnected
    mid-request becomes one such line instead of a traceback."""

    def __init__(self, errors: ClientErrorLog):
        super().__init__()
        self.errors = errors

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and type(exc).__name__ == "ClientDisconnect":
            self.errors.note("client went away mid-request", "dropped by the client")
            return False
        if exc is None and record.levelno == logging.WARNING:
            self.errors.note("malformed or refused request", record.getMessage())
            return False
        return True
