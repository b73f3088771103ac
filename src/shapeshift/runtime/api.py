"""The controller's HTTP API (standard library only, JSON bodies).

Read-only endpoints are open (the server binds to loopback by default); mutating ones
need ``Authorization: Bearer <DIR/token>``. A refused request changes nothing: the token
is checked before the body is even parsed. Workers authenticate their lease polls and
metric reports with the per-run lease key they were launched with, so a job never holds
the controller's token.

    GET  /health                  -> {"ok": true, "backend": ...}
    GET  /jobs                    -> [job, ...]
    GET  /jobs/ID                 -> job with its events
    GET  /jobs/ID/logs?rank=R     -> text/plain, every attempt of that rank
    GET  /jobs/ID/lease?key=K     -> {"revoked": bool}          (lease key)
    POST /jobs/ID/metrics         -> 204                        (lease key in the body)
    GET  /nodes                   -> [node, ...]
    POST /jobs        (token)     job file as YAML or JSON, optional "submission_id"
                                  -> 201 {"id": ...} (200 with the first job on a repeat;
                                  400 refused, 503 state unwritable: nothing stored)
    POST /jobs/ID/cancel (token)  -> {"id": ..., "previous": state}
"""

from __future__ import annotations

import hmac
import json
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from shapeshift.errors import InputError
from shapeshift.runtime.service import http_status
from shapeshift.runtime.store import StateUnavailable

if TYPE_CHECKING:
    from shapeshift.runtime.service import ControllerService

MAX_BODY = 1 << 20

#: Fields of a job row that clients see (the stored spec is returned parsed).
PUBLIC_FIELDS = (
    "id",
    "name",
    "state",
    "submit_time",
    "first_start",
    "end_time",
    "plan",
    "placement",
    "progress",
    "reason",
    "attempts",
    "failures",
    "loss",
    "iter_time",
    "predicted_iter_time",
    "result",
)


def public_job(row: dict[str, Any]) -> dict[str, Any]:
    job = {k: row[k] for k in PUBLIC_FIELDS}
    spec = json.loads(row["spec"])
    job["iterations"] = spec.get("iterations")
    job["tenant"] = spec.get("tenant", "")
    job["gpus"] = (spec.get("resources") or {}).get("gpus")
    return job


class _Handler(BaseHTTPRequestHandler):
    controller: ControllerService
    server_version = "shapeshift"

    def log_message(self, format: str, *args: Any) -> None:  # keep the terminal quiet
        return

    # ---------------------------------------------------------------- helpers
    def _send(self, status: int, body: Any = None, content_type: str = "application/json") -> None:
        data = b""
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        if status == HTTPStatus.UNAUTHORIZED:
            self.send_header("WWW-Authenticate", 'Bearer realm="shapeshift"')
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": message})

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), self.controller.token)

    def _body(self) -> bytes | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body too large")
            return None
        return self.rfile.read(length) if length else b""

    def _parts(self) -> tuple[list[str], dict[str, list[str]]]:
        url = urlparse(self.path)
        return [p for p in url.path.split("/") if p], parse_qs(url.query)

    # ------------------------------------------------------------------- GET
    def do_GET(self) -> None:
        try:
            self._get()
        except StateUnavailable as exc:  # the database cannot be read: say so, do not drop
            self._error(http_status(exc), str(exc))

    def _get(self) -> None:
        parts, query = self._parts()
        store = self.controller.store
        if parts == ["health"]:
            ok, health = self.controller.health()
            self._send(HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE, health)
        elif parts == ["jobs"]:
            self._send(HTTPStatus.OK, [public_job(r) for r in store.jobs()])
        elif parts == ["nodes"]:
            self._send(HTTPStatus.OK, self.controller.node_table())
        elif len(parts) >= 2 and parts[0] == "jobs":
            row = store.job(parts[1])
            if row is None:
                self._error(HTTPStatus.NOT_FOUND, f"no job {parts[1]}")
            elif len(parts) == 2:
                self._send(HTTPStatus.OK, {**public_job(row), "events": store.events(parts[1])})
            elif parts[2:] == ["logs"]:
                self._send(HTTPStatus.OK, self._logs(parts[1], query), "text/plain; charset=utf-8")
            elif parts[2:] == ["lease"]:
                lease = store.lease(parts[1], (query.get("key") or [""])[0])
                if lease is None:
                    self._error(HTTPStatus.NOT_FOUND, "unknown lease")
                else:
                    self._send(HTTPStatus.OK, {"revoked": bool(lease["revoked"]) or lease["state"] != "active"})
            else:
                self._error(HTTPStatus.NOT_FOUND, "no such endpoint")
        else:
            self._error(HTTPStatus.NOT_FOUND, "no such endpoint")

    def _logs(self, job_id: str, query: dict[str, list[str]]) -> str:
        rank = (query.get("rank") or ["0"])[0]
        job_dir = self.controller.job_dir(job_id)
        attempts = sorted(job_dir.glob("attempt*"), key=lambda p: int(p.name.removeprefix("attempt") or 0))
        chunks = []
        for attempt in attempts:
            path = Path(attempt) / f"rank{rank}.log"
            if path.exists():
                text = path.read_text(errors="replace")
                chunks.append(f"==> {attempt.name} rank {rank} <==\n{text}")
        return "\n".join(chunks)

    # ------------------------------------------------------------------ POST
    def do_POST(self) -> None:
        parts, _ = self._parts()
        if len(parts) == 3 and parts[0] == "jobs" and parts[2] == "metrics":
            self._metrics(parts[1])
            return
        if not self._authorized():
            self._error(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token (see DIR/token)")
            return
        if parts == ["jobs"]:
            self._submit()
        elif len(parts) == 3 and parts[0] == "jobs" and parts[2] == "cancel":
            previous = self.controller.store.request_cancel(parts[1]) if parts[1].isdigit() else None
            if previous is None:
                self._error(HTTPStatus.NOT_FOUND, f"no job {parts[1]}")
            else:
                self._send(HTTPStatus.OK, {"id": parts[1], "previous": previous})
        else:
            self._error(HTTPStatus.NOT_FOUND, "no such endpoint")

    def do_DELETE(self) -> None:
        if not self._authorized():
            self._error(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token (see DIR/token)")
            return
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, "use POST /jobs/ID/cancel")

    do_PUT = do_DELETE
    do_PATCH = do_DELETE

    def _submit(self) -> None:
        body = self._body()
        if body is None:
            return
        try:
            job_id, created = self.controller.submit_document(body.decode("utf-8", errors="replace"))
        except (InputError, StateUnavailable) as exc:
            self._error(http_status(exc), str(exc))
            return
        self._send(HTTPStatus.CREATED if created else HTTPStatus.OK, {"id": job_id, "created": created})

    def _metrics(self, job_id: str) -> None:
        body = self._body()
        if body is None:
            return
        try:
            payload = json.loads(body or b"{}")
            key, attempt, reports = str(payload["key"]), int(payload["attempt"]), list(payload["reports"])
        except (ValueError, KeyError, TypeError):
            self._error(HTTPStatus.BAD_REQUEST, "expected {key, attempt, reports}")
            return
        lease = self.controller.store.lease(job_id, key)
        if lease is None or lease["attempt"] != attempt:
            self._error(HTTPStatus.UNAUTHORIZED, "unknown lease key")
            return
        clean = [r for r in reports if isinstance(r, dict) and isinstance(r.get("step"), int | float)]
        self.controller.reports.put((job_id, attempt, clean))
        self._send(HTTPStatus.NO_CONTENT)


def make_server(controller: ControllerService, host: str, port: int) -> ThreadingHTTPServer:
    handler = type("Handler", (_Handler,), {"controller": controller})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
