"""Talking to a running controller from the CLI (standard library HTTP).

The CLI finds the controller through its state directory: ``DIR/controller.json`` holds
the URL and ``DIR/token`` the bearer token, so ``--state DIR`` is all a user passes
(or ``SHAPESHIFT_STATE``). Every failure becomes an ``InputError`` with a hint, never a
traceback.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from shapeshift.errors import InputError

DEFAULT_STATE = ".shapeshift"


def state_dir(value: str | None) -> Path:
    return Path(value or os.environ.get("SHAPESHIFT_STATE") or DEFAULT_STATE)


class ControllerClient:
    def __init__(self, url: str, token: str | None = None, timeout: float = 10.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    @classmethod
    def from_state(cls, directory: str | Path | None) -> ControllerClient:
        path = state_dir(str(directory) if directory else None)
        address = path / "controller.json"
        if not address.exists():
            raise InputError(
                f"no controller state in {path}; start one with 'shapeshift serve --state {path}' or pass --state"
            )
        url = json.loads(address.read_text())["url"]
        token_file = path / "token"
        token = token_file.read_text().strip() if token_file.exists() else None
        return cls(url, token)

    def request(self, method: str, path: str, body: bytes | None = None, auth: bool = False) -> tuple[int, bytes]:
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
            raise InputError(
                f"cannot reach the controller at {self.url}: {reason}; is 'shapeshift serve' running?"
            ) from None

    def _json(self, method: str, path: str, body: bytes | None = None, auth: bool = False) -> Any:
        status, data = self.request(method, path, body, auth)
        if status >= 400:
            try:
                message = json.loads(data)["error"]
            except (ValueError, KeyError, TypeError):
                message = data.decode(errors="replace") or f"HTTP {status}"
            raise InputError(message)
        return json.loads(data) if data else None

    def submit(self, job_json: str) -> str:
        return str(self._json("POST", "/jobs", job_json.encode(), auth=True)["id"])

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/jobs/{job_id}/cancel", b"", auth=True)

    def jobs(self) -> list[dict[str, Any]]:
        return self._json("GET", "/jobs")

    def job(self, job_id: str) -> dict[str, Any]:
        return self._json("GET", f"/jobs/{job_id}")

    def nodes(self) -> list[dict[str, Any]]:
        return self._json("GET", "/nodes")

    def logs(self, job_id: str, rank: int = 0) -> str:
        status, data = self.request("GET", f"/jobs/{job_id}/logs?rank={rank}")
        if status >= 400:
            raise InputError(f"no job {job_id}")
        return data.decode(errors="replace")
