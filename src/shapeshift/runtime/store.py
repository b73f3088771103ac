"""Persistent controller state in SQLite (WAL): jobs, runs (one per launch attempt) and events.

Everything the controller must not forget goes here *before* it acts on it: a submission
is a row before its id is returned; a run is a row before its processes are spawned. So
killing the controller at any moment loses no submitted job and no finished result, and
a restarted controller finds every process it may have left behind.

Every state change is ONE transaction (the job row, its run row and the event together),
so a crash or a failed write leaves the old state or the new one, never half of each.
Reads use their own connection per thread under WAL and never wait for the writer's lock;
writes wait at most ``WRITE_TIMEOUT`` seconds for an outside lock and then raise
``StateUnavailable`` (the API answers 503), never hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shapeshift.runtime.ids import ADMIN_OWNER, SubmissionConflict, is_job_id
from shapeshift.runtime.store_schema import ADDED_COLUMNS, JOB_COLUMNS, SCHEMA, SUBMISSION_INDEX

#: Seconds a write waits for a lock held by someone else before ``StateUnavailable``.
WRITE_TIMEOUT = 5.0
#: Seconds a read waits (only a checkpoint or an outside exclusive lock can block it under WAL).
READ_TIMEOUT = 5.0


class StateUnavailable(RuntimeError):
    """The state database cannot be written (read-only, full, or locked by another process).

    The HTTP layer maps it to ``503 Service Unavailable``; nothing was stored."""


#: Job states as shown by ``shapeshift queue``. Terminal states never change again.
QUEUED, RUNNING, COMPLETED, FAILED, CANCELLED, REJECTED = (
    "queued",
    "running",
    "completed",
    "failed",
    "cancelled",
    "rejected",
)
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED, REJECTED})


@dataclass(frozen=True)
class RunRecord:
    """One launch attempt of a job: where its ranks went and how to reach them again."""

    job_id: str
    attempt: int
    allocation: dict[str, Any]
    ranks: list[dict[str, Any]]
    lease_key: str
    state: str
    revoked: bool
    started: float
    exit_codes: str = ""


class Store:
    """Thread-safe access to the controller database: one writer connection behind a
    lock, one read connection per reading thread (WAL readers never wait for the writer)."""

    def __init__(self, path: str | Path, write_timeout: float | None = None):
        self.path = Path(path)
        timeout = WRITE_TIMEOUT if write_timeout is None else write_timeout
        self._lock = threading.RLock()
        self._pool: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        #: The last write failure, cleared by the next successful write (``/health`` shows it).
        self.write_error = ""
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=timeout)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            for table, column, kind in ADDED_COLUMNS:
                have = {r["name"] for r in self._db.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            for statement in SUBMISSION_INDEX:
                self._db.execute(statement)
        except sqlite3.Error as exc:
            raise StateUnavailable(f"cannot open the state database {self.path}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()
            while True:
                try:
                    reader = self._pool.get_nowait()
                except queue.Empty:
                    break
                with contextlib.suppress(sqlite3.Error):
                    reader.close()

    def _read(self, query: str, args: tuple[Any, ...] | list[Any] = ()) -> list[sqlite3.Row]:
        """Run a read on a pooled read-only connection (one per concurrent reader, reused:
        the HTTP server's threads come and go, the connections stay few)."""
        try:
            db = self._pool.get_nowait()
        except queue.Empty:
            try:
                db = sqlite3.connect(
                    f"file:{self.path}?mode=ro",
                    uri=True,
                    check_same_thread=False,
                    isolation_level=None,
                    timeout=READ_TIMEOUT,
                )
            except sqlite3.Error as exc:
                raise StateUnavailable(f"cannot read the state database: {exc}") from None
            db.row_factory = sqlite3.Row
        try:
            return db.execute(query, args).fetchall()
        except sqlite3.OperationalError as exc:
            raise StateUnavailable(f"cannot read the state database: {exc}") from None
        finally:
            self._pool.put(db)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                self.write_error = str(exc)
                raise StateUnavailable(f"cannot write the state database: {exc}") from None
            try:
                yield self._db
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                self.write_error = str(exc)
                raise StateUnavailable(f"cannot write the state database: {exc}") from None
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise
            self.write_error = ""

    def meta(self, key: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0]["value"]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def probe(self, now: float | None = None) -> str:
        """Try a real write (the controller does this every few seconds); '' when writable."""
        try:
            with self.transaction() as db:
                db.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('probe', ?)",
                    (str(time.time() if now is None else now),),
                )
        except StateUnavailable:
            pass
        return self.write_error

    # ------------------------------------------------------------------ jobs
    def add_job(self, name: str, spec_json: str, now: float | None = None, submission_id: str | None = None) -> str:
        answer = self.add_job_once(name, spec_json, now, submission_id)
        if isinstance(answer, SubmissionConflict):
            raise answer
        return answer[0]

    def add_job_once(
        self,
        name: str,
        spec_json: str,
        now: float | None = None,
        submission_id: str | None = None,
        owner: str = ADMIN_OWNER,
    ) -> tuple[str, bool] | SubmissionConflict:
        """Store a submission; with a ``submission_id`` ``owner`` used before, return the
        first job instead (``(id, False)``): a client retrying a lost response creates no
        second job. The same id with another job is a ``SubmissionConflict``."""
        now = time.time() if now is None else now
        return self.add_jobs_once([(name, spec_json, now, submission_id, owner)])[0]

    def add_jobs_once(
        self, submissions: list[tuple[str, str, float, str | None, str]]
    ) -> list[tuple[str, bool] | SubmissionConflict]:
        """Store several submissions ``(name, spec_json, now, submission_id, owner)`` in
        ONE transaction (group commit: concurrent submits share one commit); per submission
        ``(id, created)`` or a ``SubmissionConflict``, as ``add_job_once`` answers. Either
        all are stored or none (``StateUnavailable``), and nothing is acknowledged before
        the commit returned. An id repeated within the batch is judged like a retry.

        Ids are scoped per owner (the IETF Idempotency-Key draft's rule: a key is unique
        per client), so one user's id never returns another user's job, and a repeat must
        carry the same job (the stored, validated spec) or it is refused, not merged."""
        answers: list[tuple[str, bool] | SubmissionConflict] = []
        with self.transaction() as db:
            seen: dict[tuple[str, str], tuple[str, str]] = {}
            for name, spec_json, now, submission_id, owner in submissions:
                if submission_id is not None:
                    first = seen.get((owner, submission_id))
                    if first is None:
                        row = db.execute(
                            "SELECT id, spec FROM jobs WHERE submission_owner = ? AND submission_id = ?",
                            (owner, submission_id),
                        ).fetchone()
                        first = None if row is None else (str(row["id"]), row["spec"])
                    if first is not None:
                        if first[1] != spec_json:
                            answers.append(SubmissionConflict(submission_id, first[0]))
                        else:
                            answers.append((first[0], False))
                        continue
                cur = db.execute(
                    "INSERT INTO jobs (name, spec, state, submit_time, submission_id, submission_owner) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (name, spec_json, QUEUED, now, submission_id, None if submission_id is None else owner),
                )
                job_id = str(cur.lastrowid)
                if submission_id is not None:
                    seen[(owner, submission_id)] = (job_id, spec_json)
                db.execute(
                    "INSERT INTO events (time, job_id, kind, detail) VALUES (?, ?, ?, ?)",
                    (now, job_id, "submitted", ""),
                )
                answers.append((job_id, True))
        crash_point("after_submit_commit")
        return answers

    def jobs(self, states: frozenset[str] | None = None) -> list[dict[str, Any]]:
        rows = self._read("SELECT * FROM jobs ORDER BY id")
        result = [dict(r) for r in rows]
        for r in result:
            r["id"] = str(r["id"])
        return [r for r in result if states is None or r["state"] in states]

    def jobs_after(self, last_id: int) -> list[dict[str, Any]]:
        """Jobs submitted after ``last_id`` (how the control loop picks up new submissions)."""
        rows = self._read("SELECT * FROM jobs WHERE id > ? ORDER BY id", (last_id,))
        return [{**dict(r), "id": str(r["id"])} for r in rows]

    def cancel_requests(self) -> list[str]:
        terminal = tuple(sorted(TERMINAL))
        marks = ", ".join("?" for _ in terminal)
        rows = self._read(
            f"SELECT id FROM jobs WHERE cancel_requested = 1 AND state NOT IN ({marks}) ORDER BY id", terminal
        )
        return [str(r["id"]) for r in rows]

    def job(self, job_id: str) -> dict[str, Any] | None:
        if not is_job_id(job_id):
            return None
        rows = self._read("SELECT * FROM jobs WHERE id = ?", (int(job_id),))
        if not rows:
            return None
        result = dict(rows[0])
        result["id"] = str(result["id"])
        return result

    def update_job(self, job_id: str, **fields: Any) -> None:
        unknown = set(fields) - set(JOB_COLUMNS)
        if unknown:
            raise KeyError(f"unknown job columns {sorted(unknown)}")
        if not fields:
            return
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as db:
            db.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*fields.values(), int(job_id)))

    def update_jobs(self, changes: dict[str, dict[str, Any]]) -> None:
        """``update_job`` for several jobs in one transaction (a decision's new reasons)."""
        for fields in changes.values():
            unknown = set(fields) - set(JOB_COLUMNS)
            if unknown:
                raise KeyError(f"unknown job columns {sorted(unknown)}")
        with self.transaction() as db:
            for job_id, fields in changes.items():
                if fields:
                    assignments = ", ".join(f"{k} = ?" for k in fields)
                    db.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*fields.values(), int(job_id)))

    def set_state(self, job_id: str, state: str, now: float, detail: str = "", **fields: Any) -> None:
        """Change a job's state and log the transition in one transaction."""
        fields["state"] = state
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as db:
            db.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*fields.values(), int(job_id)))
            db.execute(
                "INSERT INTO events (time, job_id, kind, detail) VALUES (?, ?, ?, ?)", (now, job_id, state, detail)
            )

    def transition(
        self,
        job_id: str,
        state: str,
        now: float,
        detail: str = "",
        *,
        run: tuple[int, dict[str, Any]] | None = None,
        unless_terminal: bool = False,
        **fields: Any,
    ) -> bool:
        """One state change as ONE transaction: the job's new state and fields, its run's
        new fields (``run=(attempt, fields)``) and the event. With ``unless_terminal`` a job
        that already finished is left alone (returns False): a late cancel never turns a
        completed job into a cancelled one."""
        fields["state"] = state
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as db:
            if unless_terminal:
                row = db.execute("SELECT state FROM jobs WHERE id = ?", (int(job_id),)).fetchone()
                if row is None or row["state"] in TERMINAL:
                    return False
            if run is not None and run[1]:
                attempt, run_fields = run
                run_set = ", ".join(f"{k} = ?" for k in run_fields)
                db.execute(
                    f"UPDATE runs SET {run_set} WHERE job_id = ? AND attempt = ?",
                    (*run_fields.values(), int(job_id), attempt),
                )
            db.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*fields.values(), int(job_id)))
            db.execute(
                "INSERT INTO events (time, job_id, kind, detail) VALUES (?, ?, ?, ?)", (now, job_id, state, detail)
            )
        return True

    def request_cancel(self, job_id: str) -> str | None:
        """Mark a job for cancellation; returns its state, or None if unknown."""
        with self.transaction() as db:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (int(job_id),)).fetchone()
            if row is None:
                return None
            if row["state"] not in TERMINAL:
                db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (int(job_id),))
            return str(row["state"])

    def event(self, kind: str, job_id: str | None = None, detail: str = "", now: float | None = None) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO events (time, job_id, kind, detail) VALUES (?, ?, ?, ?)",
                (time.time() if now is None else now, job_id, kind, detail),
            )

    def events(self, job_id: str | None = None) -> list[dict[str, Any]]:
        if job_id is None:
            rows = self._read("SELECT * FROM events ORDER BY id")
        else:
            rows = self._read("SELECT * FROM events WHERE job_id = ? ORDER BY id", (job_id,))
        return [dict(r) for r in rows]

    # ------------------------------------------------------------------ runs
    def add_run(self, run: RunRecord) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO runs (job_id, attempt, allocation, ranks, lease_key, state, revoked, started) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    int(run.job_id),
                    run.attempt,
                    json.dumps(run.allocation),
                    json.dumps(run.ranks),
                    run.lease_key,
                    run.state,
                    int(run.revoked),
                    run.started,
                ),
            )

    def update_run(self, job_id: str, attempt: int, **fields: Any) -> None:
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as db:
            db.execute(
                f"UPDATE runs SET {assignments} WHERE job_id = ? AND attempt = ?",
                (*fields.values(), int(job_id), attempt),
            )

    def runs(self, state: str | None = None, job_id: str | None = None) -> list[RunRecord]:
        query, args = "SELECT * FROM runs WHERE 1=1", []
        if state is not None:
            query += " AND state = ?"
            args.append(state)
        if job_id is not None:
            query += " AND job_id = ?"
            args.append(int(job_id))
        rows = self._read(query + " ORDER BY job_id, attempt", args)
        return [
            RunRecord(
                job_id=str(r["job_id"]),
                attempt=r["attempt"],
                allocation=json.loads(r["allocation"]),
                ranks=json.loads(r["ranks"]),
                lease_key=r["lease_key"],
                state=r["state"],
                revoked=bool(r["revoked"]),
                started=r["started"],
                exit_codes=r["exit_codes"],
            )
            for r in rows
        ]

    def lease(self, job_id: str, key: str) -> dict[str, Any] | None:
        """The run a lease key belongs to (the key authenticates the worker)."""
        if not is_job_id(job_id):
            return None
        rows = self._read(
            "SELECT attempt, revoked, state FROM runs WHERE job_id = ? AND lease_key = ?", (int(job_id), key)
        )
        return dict(rows[0]) if rows else None

    # ------------------------------------------------------ additive: the API's views
    def recent_events(self, limit: int) -> list[dict[str, Any]]:
        """The ``limit`` most recent events, newest first (the dashboard's feed)."""
        rows = self._read("SELECT * FROM events ORDER BY id DESC LIMIT ?", (int(limit),))
        return [dict(r) for r in rows]


def crash_point(name: str) -> None:
    """Crash-injection hook (tests only): with ``SHAPESHIFT_CRASH_AT=name`` in the
    environment, the controller process dies here as if SIGKILLed (no cleanup)."""
    if os.environ.get("SHAPESHIFT_CRASH_AT") == name:
        os._exit(137)
