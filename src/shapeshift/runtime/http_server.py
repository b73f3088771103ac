"""Serving the API with uvicorn, inside the controller's process, with explicit limits.

Why uvicorn and not ``http.server``: the standard library's threading server starts one
thread per connection with no cap, has no idle timeout, listens with a backlog of 5, and
drops a connection with a traceback on a malformed request line or length. uvicorn
(httptools, or h11) parses requests strictly — a negative or non-numeric ``Content-Length`` is a clean
400 — and serves every connection from one event loop; blocking work (SQLite) runs in a
bounded thread pool. On top of uvicorn's own settings this module adds:

* a **request-head timeout**: a connection that has not sent a complete request head
  within ``head_timeout`` seconds is closed, for its first request and for every later
  one on a keep-alive connection (uvicorn times out only idle keep-alive connections,
  and a byte of a new head stops that timer, so a client that connects and never
  speaks, or trickles its next head a byte at a time, would otherwise stay forever);
* a **connection cap** (``limit_concurrency``): beyond it requests get 503, never a new
  thread; and a **per-address connection cap** (``max_client_connections``), so one
  client cannot take the server's whole cap: its connections beyond it are closed at once;
* a **real backlog** (``listen(backlog)``, capped by the kernel's ``somaxconn``);
* the socket is bound here, before serving, so "port in use" is an ``OSError`` at start.

Per-request defences (each client's share of requests in flight, authentication before
the body, the body's size and deadline) are in ``http_guard``; uvicorn's own warnings
about clients go through its rate-limited log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import threading
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from shapeshift.runtime.http_guard import ClientErrorLog, QuietClientErrors


@dataclass(frozen=True)
class Limits:
    max_body: int = 1 << 20  # bytes of a request body (a job file is a few hundred)
    max_connections: int = 4096  # open connections + in-flight requests before 503
    backlog: int = 2048  # pending connections in the kernel's accept queue
    keep_alive: int = 5  # seconds an idle keep-alive connection is kept
    head_timeout: float = 10.0  # seconds to send a complete request head
    body_timeout: float = 10.0  # seconds to send a whole request body (a job file is a few hundred bytes)
    max_client_requests: int = 128  # requests in flight from one client address before 429
    max_client_connections: int = 512  # open connections from one client address


def _base_protocol() -> type[Any]:
    """httptools (llhttp, C) when installed, else h11 (pure Python); both refuse a
    malformed ``Content-Length`` with 400."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return H11Protocol
    return HttpToolsProtocol


def _guarded_protocol(limits: Limits, errors: ClientErrorLog) -> type[Any]:
    per_client: dict[str, int] = {}

    class GuardedProtocol(_base_protocol()):  # type: ignore[misc]
        """uvicorn's protocol with a deadline for each request head and a per-address
        connection cap (see the module docstring)."""

        _head_timer: asyncio.TimerHandle | None = None
        _waiting_after: Any = None  # the cycle the next request head must replace
        _address = ""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._address = str((self.client or ("unknown",))[0])
            per_client[self._address] = per_client.get(self._address, 0) + 1
            if per_client[self._address] > limits.max_client_connections:
                errors.note("too many connections", f"{self._address} (limit {limits.max_client_connections})")
                self.transport.close()
                return
            self._arm_head_timer()

        def _arm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._waiting_after = self.cycle
            self._head_timer = self.loop.call_later(limits.head_timeout, self._head_deadline)

        def _head_deadline(self) -> None:
            idle = self.cycle is None or self.cycle.response_complete
            if self.cycle is self._waiting_after and idle and not self.transport.is_closing():
                errors.note("request head too slow", f"{self._address} (limit {limits.head_timeout:g} s)")
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.cycle is not None and self.cycle.response_complete:
                self._arm_head_timer()  # the next head on this keep-alive connection has a deadline too

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            left = per_client.get(self._address, 1) - 1
            if left > 0:
                per_client[self._address] = left
            else:
                per_client.pop(self._address, None)
            super().connection_lost(exc)

    return GuardedProtocol


def _quiet_uvicorn(errors: ClientErrorLog) -> None:
    """Route uvicorn's per-request client warnings through ``errors`` (one filter: the
    latest server's, for a process that starts several)."""
    logger = logging.getLogger("uvicorn.error")
    for old in [f for f in logger.filters if isinstance(f, QuietClientErrors)]:
        logger.removeFilter(old)
    logger.addFilter(QuietClientErrors(errors))


def _raise_file_limit(wanted: int) -> None:
    """Each connection is a file descriptor: lift the soft limit toward the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class UvicornServer:
    """A uvicorn server on a socket bound at construction; ``ServerHandle`` for the controller."""

    def __init__(
        self, app: Any, host: str, port: int, limits: Limits | None = None, errors: ClientErrorLog | None = None
    ):
        self.limits = limits or Limits()
        errors = errors or ClientErrorLog()
        _raise_file_limit(self.limits.max_connections + 256)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind((host, port))
            self.socket.listen(self.limits.backlog)
        except BaseException:
            self.socket.close()
            raise
        self.server_address: tuple[Any, ...] = self.socket.getsockname()
        config = uvicorn.Config(
            app,
            http=_guarded_protocol(self.limits, errors),
            lifespan="off",
            log_level="warning",
            access_log=False,
            limit_concurrency=self.limits.max_connections,
            backlog=self.limits.backlog,
            timeout_keep_alive=self.limits.keep_alive,
            timeout_graceful_shutdown=5,
            server_header=False,
        )
        _quiet_uvicorn(errors)  # after the Config: it (re)configures uvicorn's loggers
        self.server = uvicorn.Server(config)
        self._done = threading.Event()

    def serve_forever(self) -> None:
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self._done.set()

    def shutdown(self) -> None:
        self.server.should_exit = True
        self._done.wait(timeout=10)

    def server_close(self) -> None:
        self.socket.close()
