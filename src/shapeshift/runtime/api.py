"""The controller's HTTP API (FastAPI on uvicorn, JSON bodies, OpenAPI at /openapi.json).

Every request but ``/health`` and the dashboard's static page needs a bearer token (see
``auth``): the admin token in ``DIR/token`` or a user token from ``shapeshift token
create``. A refused request changes nothing: identity is checked before the body is read.
Workers authenticate their lease polls and metric reports with the per-run lease key
they were launched with, so a job never holds a user's token.

    GET  /health                     -> {"ok": true, "backend": ...}            (open)
    GET  /jobs[?state=S&user=U]      -> [job, ...]
    GET  /jobs/ID                    -> job with its events (command/env for its owner)
    GET  /jobs/ID/logs?rank=R        -> text/plain, every attempt of that rank (owner)
    GET  /jobs/ID/lease?key=K        -> {"revoked": bool}                       (lease key)
    POST /jobs/ID/metrics            -> 204              (Authorization: Lease KEY)
    GET  /nodes                      -> [node, ...]
    GET  /events?limit=N             -> the N most recent events
    GET  /stats                      -> per-tenant use and decision latency (dashboard)
    GET  /metrics                    -> Prometheus text format
    POST /jobs                       job file (YAML or JSON; optional "submission_id", or the
                                     Idempotency-Key header) -> 201 {"id", "created": true};
                                     200 with the first job when the caller repeats an id with
                                     the same job; 409 the same id with another job; 400
                                     refused, 503 state unwritable
    POST /jobs/ID/cancel             -> {"id": ..., "previous": state}          (owner)
    GET  /dashboard                  -> the live page (static; it fetches the above with a token)

The HTTP layer never imports the controller: it is handed a ``ControllerService``.
"""

from __future__ import annotations

import json
import sqlite3
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from shapeshift.errors import InputError
from shapeshift.page_style import PAGE_CSS
from shapeshift.runtime.auth import Authenticator, Identity
from shapeshift.runtime.fast_submit import FastSubmit, submit_outcome
from shapeshift.runtime.http_guard import ClientErrorLog, RequestGuard, lease_key
from shapeshift.runtime.http_server import Limits, UvicornServer
from shapeshift.runtime.logs import read_rank_logs
from shapeshift.runtime.metrics_export import render, tenant_usage
from shapeshift.runtime.service import http_status
from shapeshift.runtime.store import StateUnavailable
from shapeshift.runtime.views import public_job, recent_events

if TYPE_CHECKING:
    from shapeshift.runtime.service import ControllerService


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _error(status: int, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="shapeshift"'} if status == 401 else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 past ``limit`` bytes whether or not a length was
    announced (h11 has already refused negative or non-numeric lengths with 400)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise ApiError(413, f"request body too large (limit {limit} bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body too large (limit {limit} bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


async def viewer(request: Request) -> Identity:
    """The caller's identity from ``Authorization: Bearer ...`` (raw bytes: a non-ASCII
    header is simply a wrong token), or 401. Async, so it costs no thread hop; the
    authenticator's occasional re-read of the token table runs in the thread pool."""
    raw = dict(request.scope["headers"]).get(b"authorization")
    auth: Authenticator = request.app.state.auth
    who = auth.identify_cached(raw)
    if who is None and auth.needs_reload():
        who = await run_in_threadpool(auth.identify, raw)
    if who is None:
        raise ApiError(401, "missing or wrong bearer token (the admin token is in DIR/token)")
    return who


Viewer = Annotated[Identity, Depends(viewer)]


def make_app(controller: ControllerService, limits: Limits | None = None) -> FastAPI:
    limits = limits or Limits()
    auth = Authenticator(controller.store, controller.token)
    app = FastAPI(
        title="shapeshift controller",
        description="Submit, watch and cancel training jobs scheduled by a shapeshift policy.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.auth = auth
    store = controller.store

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.message)

    @app.exception_handler(InputError)
    async def _input_error(request: Request, exc: InputError) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"][1:]) or "request"
        return _error(400, f"{where}: {err['msg']}")

    @app.exception_handler(StateUnavailable)
    @app.exception_handler(sqlite3.Error)
    async def _state_error(request: Request, exc: Exception) -> JSONResponse:
        # A read-only, full or locked state store: the request changed nothing; retry later.
        return _error(http_status(StateUnavailable()), f"{exc}; nothing was changed, retry later")

    def job_or_404(job_id: str) -> dict[str, Any]:
        row = store.job(job_id)  # None for anything but an id the store hands out
        if row is None:
            raise ApiError(404, f"no job {job_id}")
        return row

    # ------------------------------------------------------------------ reads
    @app.get("/health", response_model=None)
    async def health() -> JSONResponse:  # async: no thread hop (health reads memory only)
        ok, body = controller.health()
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/jobs")
    def jobs(who: Viewer, state: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
        states = frozenset(state.split(",")) if state else None
        rows = [public_job(r, who) for r in store.jobs(states)]
        return [j for j in rows if user is None or j["user"] == user]

    @app.get("/jobs/{job_id}")
    def job(job_id: str, who: Viewer) -> dict[str, Any]:
        row = job_or_404(job_id)
        return {**public_job(row, who), "events": store.events(job_id)}

    @app.get("/jobs/{job_id}/logs", response_class=PlainTextResponse)
    def logs(job_id: str, who: Viewer, rank: Annotated[int, Query(ge=0, le=1_000_000)] = 0) -> PlainTextResponse:
        row = job_or_404(job_id)
        if not who.owns(public_job(row)):
            raise ApiError(403, f"job {job_id} belongs to another user; only its owner and the admin read its logs")
        text, ranks = read_rank_logs(controller.job_dir(job_id), rank)
        if text is None:
            have = f"ranks 0-{max(ranks)}" if ranks else "no log yet"
            raise ApiError(404, f"job {job_id} has no rank {rank} ({have})")
        return PlainTextResponse(text)

    @app.get("/jobs/{job_id}/lease")
    def lease(job_id: str, key: str = "") -> dict[str, bool]:
        found = store.lease(job_id, key)
        if found is None:
            raise ApiError(404, "unknown lease")
        return {"revoked": bool(found["revoked"]) or found["state"] != "active"}

    @app.get("/nodes")
    def nodes(who: Viewer) -> list[dict[str, Any]]:
        return controller.node_table()

    @app.get("/events")
    def events(who: Viewer, limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> list[dict[str, Any]]:
        return recent_events(store, limit)

    def _all_jobs() -> list[dict[str, Any]]:
        return [public_job(r) for r in store.jobs()]

    @app.get("/stats")
    def stats(who: Viewer) -> dict[str, Any]:
        quotas = dict(controller.cluster.tenants)
        usage = [u.__dict__ for u in tenant_usage(_all_jobs(), quotas)]
        counts, total, last = controller.decision_stats.snapshot()
        decisions = sum(counts)
        return {
            "tenants": usage,
            "decisions": decisions,
            "decision_seconds_mean": total / decisions if decisions else None,
            "decision_seconds_last": last if decisions else None,
        }

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics(who: Viewer) -> Response:
        text = render(_all_jobs(), controller.node_table(), dict(controller.cluster.tenants), controller.decision_stats)
        return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/dashboard")

    page = resources.files("shapeshift.runtime").joinpath("dashboard.html").read_text()
    page = page.replace("/* PAGE_CSS */", PAGE_CSS)  # the palette and type every Shapeshift page shares

    @app.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
    def dashboard() -> HTMLResponse:
        # The page holds no data: it asks for a token and fetches the API with it.
        return HTMLResponse(page, headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})

    # ----------------------------------------------------------------- writes
    @app.post("/jobs", status_code=201, response_model=None)
    async def submit(request: Request, who: Viewer) -> JSONResponse:
        # Ordinary submits are answered by ``FastSubmit`` before the framework; this route
        # answers the rest, the same way (``submit_outcome``), and describes it in OpenAPI.
        body = await read_body(request, limits.max_body)
        status, payload = await submit_outcome(controller, body, who, dict(request.scope["headers"]))
        return JSONResponse(payload, status_code=status)

    @app.post("/jobs/{job_id}/cancel")
    def cancel(job_id: str, who: Viewer) -> dict[str, Any]:
        row = job_or_404(job_id)
        if not who.may_cancel(public_job(row)):
            raise ApiError(403, f"job {job_id} belongs to another user; you may cancel only your own jobs")
        previous = store.request_cancel(job_id)
        if previous is None:
            raise ApiError(404, f"no job {job_id}")
        return {"id": job_id, "previous": previous}

    @app.post("/jobs/{job_id}/metrics", status_code=204)
    async def report(job_id: str, request: Request) -> Response:
        # The lease key comes in the headers (checked before the body was read); a key
        # in the body, if any, must be the same one.
        key = lease_key(dict(request.scope["headers"]).get(b"authorization")) or ""
        body = await read_body(request, limits.max_body)
        try:
            payload = json.loads(body or b"{}")
            attempt, reports = int(payload["attempt"]), list(payload["reports"])
            if str(payload.get("key", key)) != key:
                raise ValueError("two keys")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise ApiError(400, "expected {attempt, reports} (the lease key as 'Authorization: Lease KEY')") from None
        found = await run_in_threadpool(store.lease, job_id, key)
        if found is None or found["attempt"] != attempt:
            raise ApiError(401, "unknown lease key")
        clean = [r for r in reports if isinstance(r, dict) and isinstance(r.get("step"), int | float)]
        controller.reports.put((job_id, attempt, clean))
        return Response(status_code=204)

    @app.api_route("/jobs", methods=["PUT", "PATCH", "DELETE"], include_in_schema=False)
    @app.api_route("/jobs/{job_id}", methods=["PUT", "PATCH", "DELETE"], include_in_schema=False)
    def not_allowed(who: Viewer) -> None:
        raise ApiError(405, "use POST /jobs to submit and POST /jobs/ID/cancel to cancel")

    return app


def make_server(controller: ControllerService, host: str, port: int, limits: Limits | None = None) -> UvicornServer:
    """The controller's ``ServerFactory``: the API on uvicorn, bound to ``(host, port)``,
    behind the request guard (``http_guard``)."""
    limits = limits or Limits()
    app = make_app(controller, limits)
    errors = ClientErrorLog()
    guarded = RequestGuard(
        FastSubmit(app, controller, app.state.auth, limits.max_body),
        app.state.auth,
        controller.store,
        max_body=limits.max_body,
        body_timeout=limits.body_timeout,
        max_client_requests=limits.max_client_requests,
        errors=errors,
    )
    return UvicornServer(guarded, host, port, limits, errors)
