"""Talking to a running controller from the CLI (standard library HTTP).

The operator's CLI finds the controller through its state directory:
``DIR/controller.json`` holds the URL and ``DIR/token`` the admin token, so ``--state
DIR`` is all it passes (or ``SHAPESHIFT_STATE``). Other users cannot read that directory
(0700): they set ``SHAPESHIFT_URL`` and ``SHAPESHIFT_TOKEN`` (a token from ``shapeshift
token create``), which take precedence. Every failure becomes an ``InputError`` with a
hint, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from shapeshift.errors import InputError

DEFAULT_STATE = ".shapeshift"


def state_dir(value: str | None) -> Path:
    return Path(value or os.environ.get("SHAPESHIFT_STATE") or DEFAULT_STATE)


class ControllerUnreachable(InputError):
    """No answer from the controller (no address file, connection refused, reset, timed out)."""


#: Seconds between submit retries (a controller restart takes about a second).
RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)


class ControllerClient:
    def __init__(self, url: str, token: str | None = None, timeout: float = 10.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.state: Path | None = None

    @classmethod
    def from_state(cls, directory: str | Path | None) -> ControllerClient:
        env_url, env_token = os.environ.get("SHAPESHIFT_URL"), os.environ.get("SHAPESHIFT_TOKEN")
        if env_url and not directory:
            return cls(env_url, env_token)
        path = state_dir(str(directory) if directory else None)
        address = path / "controller.json"
        try:
            url = json.loads(address.read_text())["url"]
        except FileNotFoundError:
            raise ControllerUnreachable(
                f"no controller state in {path}; start one with 'shapeshift serve --state {path}', pass --state, "
                "or set SHAPESHIFT_URL and SHAPESHIFT_TOKEN"
            ) from None
        except PermissionError:
            raise InputError(
                f"{path} belongs to another user; set SHAPESHIFT_URL and SHAPESHIFT_TOKEN (ask the operator)"
            ) from None
        except (ValueError, KeyError, TypeError):
            raise InputError(f"{address} is not a controller address file; restart 'shapeshift serve'") from None
        token = env_token
        if token is None:
            try:
                token = (path / "token").read_text().strip()
            except OSError:
                token = None
        client = cls(url, token)
        client.state = path
        return client

    def request(self, method: str, path: str, body: bytes | None = None, auth: bool = True) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"}
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url + path, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ControllerUnreachable(
                f"cannot reach the controller at {self.url}: {reason}; is 'shapeshift serve' running?"
            ) from None

    def _json(self, method: str, path: str, body: bytes | None = None) -> Any:
        return self._decode(*self.request(method, path, body))

    @staticmethod
    def _decode(status: int, data: bytes) -> Any:
        if status >= 400:
            try:
                message = json.loads(data)["error"]
            except (ValueError, KeyError, TypeError):
                message = data.decode(errors="replace") or f"HTTP {status}"
            raise InputError(message)
        return json.loads(data) if data else None

    def submit(self, job_json: str, submission_id: str | None = None, retry: bool = False) -> str:
        """Submit a job (JSON); returns its id. With a ``submission_id`` the submit is
        idempotent, so ``retry=True`` resends it after a lost answer, a connection error or
        a 503 (controller restarting, state unwritable) without ever creating a second job."""
        body = job_json
        if submission_id is not None:
            body = json.dumps({**json.loads(job_json), "submission_id": submission_id})
        delays = list(RETRY_DELAYS) if retry and submission_id is not None else []
        while True:
            try:
                status, data = self.request("POST", "/jobs", body.encode(), auth=True)
            except ControllerUnreachable:
                if not delays:
                    raise
                time.sleep(delays.pop(0))
                self._refresh()
                continue
            if status == 503 and delays:
                time.sleep(delays.pop(0))
                continue
            return str(self._decode(status, data)["id"])

    def _refresh(self) -> None:
        """Re-read the address file: a restarted controller may listen on another port."""
        if self.state is not None:
            with contextlib.suppress(OSError, ValueError, KeyError):
                self.url = json.loads((self.state / "controller.json").read_text())["url"].rstrip("/")

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/jobs/{job_id}/cancel", b"")

    def jobs(self, states: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({k: v for k, v in (("state", states), ("user", user)) if v})
        return self._json("GET", "/jobs" + (f"?{query}" if query else ""))

    def job(self, job_id: str) -> dict[str, Any]:
        return self._json("GET", f"/jobs/{job_id}")

    def nodes(self) -> list[dict[str, Any]]:
        return self._json("GET", "/nodes")

    def logs(self, job_id: str, rank: int = 0) -> str:
        status, data = self.request("GET", f"/jobs/{job_id}/logs?rank={int(rank)}")
        if status >= 400:
            self._decode(status, data)
        return data.decode(errors="replace")
