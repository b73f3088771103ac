"""What a submit goes through before anything is stored, and how healthy the state is.

A submission is refused (``InputError``, HTTP 400) when the job file is malformed, when
its command template cannot be rendered, or when the job can never run on this cluster
(more GPUs, CPUs or memory than any partition has): nothing is stored. A submission id
(``submission_id`` in the body or the ``Idempotency-Key`` header) its submitter used
before returns the first job (HTTP 200 instead of 201), so a client may retry a submit
whose answer it lost; the same id with a different job is refused (``SubmissionConflict``,
HTTP 409). Ids belong to their submitter: another user's id is simply a new id. When the
state database cannot be written, submits raise ``StateUnavailable`` (HTTP 503) and
``/health`` says so.
"""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from shapeshift.engine.engine import Engine
from shapeshift.errors import InputError
from shapeshift.runtime.group_commit import GroupCommit
from shapeshift.runtime.ids import ADMIN_OWNER, SubmissionConflict
from shapeshift.runtime.jobfile import JobFile, check_submission_id, parse_submission
from shapeshift.runtime.store import StateUnavailable, Store


@dataclass(frozen=True)
class Submission:
    """What the admission thread is handed per submit."""

    text: str  # the body
    overrides: dict[str, Any] | None  # job fields the token vouches for (user, tenant)
    owner: str  # whose submission ids these are: the token's user, or ``admin``
    key: str | None  # the ``Idempotency-Key`` header, if any


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

    def submit_later(
        self,
        text: str,
        *,
        overrides: dict[str, Any] | None = None,
        owner: str = ADMIN_OWNER,
        idempotency_key: str | None = None,
    ) -> Future[tuple[str, bool]]:
        """Queue one submit body for the admission thread; the future holds ``(job id,
        created)`` once the job is committed, or the ``InputError``, ``SubmissionConflict``
        or ``StateUnavailable``."""
        return self._group_commit.put(Submission(text, overrides, owner, idempotency_key))

    def submit_document(
        self,
        text: str,
        *,
        overrides: dict[str, Any] | None = None,
        owner: str = ADMIN_OWNER,
        idempotency_key: str | None = None,
    ) -> tuple[str, bool]:
        """Validate and store one submit body (job document + optional ``submission_id``);
        returns ``(job id, created)``. ``overrides`` set job fields the caller vouches for
        (``user``/``tenant`` from an authenticated token) before validation."""
        return self.submit_later(text, overrides=overrides, owner=owner, idempotency_key=idempotency_key).result()

    def admit(self, job: JobFile, submission_id: str | None = None, owner: str = ADMIN_OWNER) -> tuple[str, bool]:
        """Refuse a job that can never run here, then store it once per submission id."""
        now = time.time()
        self._refuse_impossible(job, now)
        self._refuse_when_unwritable()
        answer = self.store.add_job_once(job.name, job.to_json(), now, submission_id, owner)
        if isinstance(answer, SubmissionConflict):
            raise answer
        return answer

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
        valid: list[tuple[int, JobFile, str | None, str]] = []
        for i, submission in enumerate(batch):
            try:
                job, submission_id = parse_submission(submission.text, overrides=submission.overrides)
                submission_id = _one_id(submission_id, submission.key)
                self._refuse_impossible(job, now)
            except Exception as exc:  # this submit's answer, not the batch's
                results.append(exc)
                continue
            results.append(StateUnavailable("not stored"))  # replaced below once committed
            valid.append((i, job, submission_id, submission.owner))
        if not valid:
            return results
        try:
            self._refuse_when_unwritable()
            stored = self.store.add_jobs_once(
                [(job.name, job.to_json(), now, sid, owner) for _, job, sid, owner in valid]
            )
        except (StateUnavailable, sqlite3.Error) as exc:
            for i, *_ in valid:
                results[i] = exc
            return results
        for (i, job, _, _), answer in zip(valid, stored, strict=True):
            results[i] = answer
            if not isinstance(answer, SubmissionConflict) and answer[1]:
                self._admitted[answer[0]] = job
        return results

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(ok, body)`` for ``/health``: not ok while the state cannot be written."""
        error = self.store.write_error
        body: dict[str, Any] = {"ok": not error, "backend": self.backend.name, "state": "writable"}
        if error:
            body["state"] = f"unwritable: {error}"
        return not error, body


def _one_id(in_body: str | None, header: str | None) -> str | None:
    """The submission id from the body or the ``Idempotency-Key`` header; both must agree."""
    if header is None:
        return in_body
    key = check_submission_id(header, "Idempotency-Key")
    if in_body is not None and in_body != key:
        raise InputError(
            f"the body's submission_id {in_body!r} and the Idempotency-Key header {key!r} differ; send one",
            field="Idempotency-Key",
        )
    return key
