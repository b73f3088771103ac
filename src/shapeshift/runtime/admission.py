"""What a submit goes through before anything is stored, and how healthy the state is.

A submission is refused (``InputError``, HTTP 400) when the job file is malformed, when
its command template cannot be rendered, or when the job can never run on this cluster
(more GPUs, CPUs or memory than any partition has): nothing is stored. A submission with
a ``submission_id`` seen before returns the first job (HTTP 200 instead of 201), so a
client may retry a submit whose answer it lost. When the state database cannot be
written, submits raise ``StateUnavailable`` (HTTP 503) and ``/health`` says so.
"""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import Future
from typing import Any

from shapeshift.engine.engine import Engine
from shapeshift.errors import InputError
from shapeshift.runtime.group_commit import GroupCommit
from shapeshift.runtime.jobfile import JobFile, parse_submission
from shapeshift.runtime.store import StateUnavailable, Store

#: What the admission thread is handed per submit: the body and the token's overrides.
Submission = tuple[str, dict[str, Any] | None]


class Admission:
    """Mixin of ``Controller``: the API's entry points (never touch the engine's state).

    Submits are validated and stored on one admission thread in groups (``group_commit``):
    each job is validated on its own (a bad one is refused alone), the valid ones of a
    group are committed in one transaction. ``_admitted`` hands the validated job to the
    control loop so it is not parsed and validated a second time."""

    store: Store
    engine: Engine
    backend: Any
    _admitted: dict[str, JobFile]
    _group_commit: GroupCommit[Submission, tuple[str, bool]]

    def _start_admission(self) -> None:
        self._admitted = {}
        self._group_commit = GroupCommit(self._admit_batch, "shapeshift-admission")

    def _stop_admission(self) -> None:
        self._group_commit.close()

    def submit_later(self, text: str, *, overrides: dict[str, Any] | None = None) -> Future[tuple[str, bool]]:
        """Queue one submit body for the admission thread; the future holds ``(job id,
        created)`` once the job is committed, or the ``InputError``/``StateUnavailable``."""
        return self._group_commit.put((text, overrides))

    def submit_document(self, text: str, *, overrides: dict[str, Any] | None = None) -> tuple[str, bool]:
        """Validate and store one submit body (job document + optional ``submission_id``);
        returns ``(job id, created)``. ``overrides`` set job fields the caller vouches for
        (``user``/``tenant`` from an authenticated token) before validation."""
        return self.submit_later(text, overrides=overrides).result()

    def submit_job(self, job: JobFile, submission_id: str | None = None) -> str:
        """Store a validated job once per ``submission_id`` (a repeat returns the first
        job's id); refuse one that can never run (``InputError``, HTTP 400) or when the
        state cannot be written (``StateUnavailable``, HTTP 503)."""
        return self.admit(job, submission_id)[0]

    def admit(self, job: JobFile, submission_id: str | None = None) -> tuple[str, bool]:
        """Refuse a job that can never run here, then store it once per submission id."""
        now = time.time()
        self._refuse_impossible(job, now)
        self._refuse_when_unwritable()
        return self.store.add_job_once(job.name, job.to_json(), now, submission_id)

    def _refuse_impossible(self, job: JobFile, now: float) -> None:
        reason = self.engine.never_fits(job.spec("0", now))
        if reason:
            raise InputError(f"job can never run here: {reason}")

    def _refuse_when_unwritable(self) -> None:
        if self.store.write_error:
            raise StateUnavailable(f"the controller cannot write its state ({self.store.write_error})")

    def _admit_batch(self, batch: list[Submission]) -> list[tuple[str, bool] | BaseException]:
        """Validate each submit body; commit the valid ones in one transaction."""
        now = time.time()
        results: list[tuple[str, bool] | BaseException] = []
        valid: list[tuple[int, JobFile, str | None]] = []
        for i, (text, overrides) in enumerate(batch):
            try:
                job, submission_id = parse_submission(text, overrides=overrides)
                self._refuse_impossible(job, now)
            except Exception as exc:  # this submit's answer, not the batch's
                results.append(exc)
                continue
            results.append(StateUnavailable("not stored"))  # replaced below once committed
            valid.append((i, job, submission_id))
        if not valid:
            return results
        try:
            self._refuse_when_unwritable()
            stored = self.store.add_jobs_once([(job.name, job.to_json(), now, sid) for _, job, sid in valid])
        except (StateUnavailable, sqlite3.Error) as exc:
            for i, _, _ in valid:
                results[i] = exc
            return results
        for (i, job, _), (job_id, created) in zip(valid, stored, strict=True):
            results[i] = (job_id, created)
            if created:
                self._admitted[job_id] = job
        return results

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(ok, body)`` for ``/health``: not ok while the state cannot be written."""
        error = self.store.write_error
        body: dict[str, Any] = {"ok": not error, "backend": self.backend.name, "state": "writable"}
        if error:
            body["state"] = f"unwritable: {error}"
        return not error, body
