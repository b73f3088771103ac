"""What a submit goes through before anything is stored, and how healthy the state is.

A submission is refused (``InputError``, HTTP 400) when the job file is malformed, when
its command template cannot be rendered, or when the job can never run on this cluster
(more GPUs, CPUs or memory than any partition has): nothing is stored. A submission with
a ``submission_id`` seen before returns the first job (HTTP 200 instead of 201), so a
client may retry a submit whose answer it lost. When the state database cannot be
written, submits raise ``StateUnavailable`` (HTTP 503) and ``/health`` says so.
"""

from __future__ import annotations

import time
from typing import Any

from shapeshift.engine.engine import Engine
from shapeshift.errors import InputError
from shapeshift.runtime.jobfile import JobFile, parse_submission
from shapeshift.runtime.store import StateUnavailable, Store


class Admission:
    """Mixin of ``Controller``: the API thread's entry points (never touch the engine's state)."""

    store: Store
    engine: Engine
    backend: Any

    def submit_document(self, text: str, *, overrides: dict[str, Any] | None = None) -> tuple[str, bool]:
        """Validate and store one submit body (job document + optional ``submission_id``);
        returns ``(job id, created)``. ``overrides`` set job fields the caller vouches for
        (``user``/``tenant`` from an authenticated token) before validation."""
        job, submission_id = parse_submission(text)
        if overrides:
            job = type(job).model_validate({**job.model_dump(), **overrides})
        return self.admit(job, submission_id)

    def submit_job(self, job: JobFile, submission_id: str | None = None) -> str:
        """Store a validated job once per ``submission_id`` (a repeat returns the first
        job's id); refuse one that can never run (``InputError``, HTTP 400) or when the
        state cannot be written (``StateUnavailable``, HTTP 503)."""
        return self.admit(job, submission_id)[0]

    def admit(self, job: JobFile, submission_id: str | None = None) -> tuple[str, bool]:
        """Refuse a job that can never run here, then store it once per submission id."""
        now = time.time()
        reason = self.engine.never_fits(job.spec("0", now))
        if reason:
            raise InputError(f"job can never run here: {reason}")
        if self.store.write_error:
            raise StateUnavailable(f"the controller cannot write its state ({self.store.write_error}); retry later")
        return self.store.add_job_once(job.name, job.to_json(), now, submission_id)

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(ok, body)`` for ``/health``: not ok while the state cannot be written."""
        error = self.store.write_error
        body: dict[str, Any] = {"ok": not error, "backend": self.backend.name, "state": "writable"}
        if error:
            body["state"] = f"unwritable: {error}"
        return not error, body
