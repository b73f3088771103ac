"""Persistent controller state in SQLite (WAL): jobs, runs (one per launch attempt) and events.

Everything the controller must not forget goes here *before* it acts on it: a submission
is a row before its id is returned; a run is a row before its processes are spawned. So
killing the controller at any moment loses no submitted job and no finished result, and
a restarted controller finds every process it may have left behind. WAL lets the API
threads read the queue while the control loop writes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    submit_time REAL NOT NULL,
    first_start REAL,
    end_time REAL,
    plan TEXT NOT NULL DEFAULT '',
    placement TEXT NOT NULL DEFAULT '',
    progress REAL NOT NULL DEFAULT 0,
    reason TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    loss REAL,
    iter_time REAL,
    result TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS runs (
    job_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    allocation TEXT NOT NULL,
    ranks TEXT NOT NULL,
    lease_key TEXT NOT NULL,
    state TEXT NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0,
    started REAL NOT NULL,
    PRIMARY KEY (job_id, attempt)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    job_id INTEGER,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
"""

JOB_COLUMNS = (
    "id",
    "name",
    "spec",
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
    "cancel_requested",
    "loss",
    "iter_time",
    "result",
)


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


class Store:
    """Thread-safe access to the controller database (one connection, one lock)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # ------------------------------------------------------------------ jobs
    def add_job(self, name: str, spec_json: str, now: float | None = None) -> str:
        now = time.time() if now is None else now
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO jobs (name, spec, state, submit_time) VALUES (?, ?, ?, ?)", (name, spec_json, QUEUED, now)
            )
            job_id = str(cur.lastrowid)
            db.execute(
                "INSERT INTO events (time, job_id, kind, detail) VALUES (?, ?, ?, ?)", (now, job_id, "submitted", "")
            )
        return job_id

    def jobs(self, states: frozenset[str] | None = None) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM jobs ORDER BY id").fetchall()
        result = [dict(r) for r in rows]
        for r in result:
            r["id"] = str(r["id"])
        return [r for r in result if states is None or r["state"] in states]

    def jobs_after(self, last_id: int) -> list[dict[str, Any]]:
        """Jobs submitted after ``last_id`` (how the control loop picks up new submissions)."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM jobs WHERE id > ? ORDER BY id", (last_id,)).fetchall()
        return [{**dict(r), "id": str(r["id"])} for r in rows]

    def cancel_requests(self) -> list[str]:
        terminal = tuple(sorted(TERMINAL))
        marks = ", ".join("?" for _ in terminal)
        with self._lock:
            rows = self._db.execute(
                f"SELECT id FROM jobs WHERE cancel_requested = 1 AND state NOT IN ({marks}) ORDER BY id", terminal
            ).fetchall()
        return [str(r["id"]) for r in rows]

    def job(self, job_id: str) -> dict[str, Any] | None:
        if not str(job_id).isdigit():
            return None
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (int(job_id),)).fetchone()
        if row is None:
            return None
        result = dict(row)
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

    def set_state(self, job_id: str, state: str, now: float, detail: str = "", **fields: Any) -> None:
        """Change a job's state and log the transition in one transaction."""
        fields["state"] = state
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as db:
            db.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*fields.values(), int(job_id)))
            db.execute(
                "INSERT INTO events (time, job_id, kind, detail) VALUES (?, ?, ?, ?)", (now, job_id, state, detail)
            )

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
        with self._lock:
            if job_id is None:
                rows = self._db.execute("SELECT * FROM events ORDER BY id").fetchall()
            else:
                rows = self._db.execute("SELECT * FROM events WHERE job_id = ? ORDER BY id", (job_id,)).fetchall()
        return [dict(r) for r in rows]

    # ------------------------------------------------------------------ runs
    def add_run(self, run: RunRecord) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
        with self._lock:
            rows = self._db.execute(query + " ORDER BY job_id, attempt", args).fetchall()
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
            )
            for r in rows
        ]

    def lease(self, job_id: str, key: str) -> dict[str, Any] | None:
        """The run a lease key belongs to (the key authenticates the worker)."""
        if not str(job_id).isdigit():
            return None
        with self._lock:
            row = self._db.execute(
                "SELECT attempt, revoked, state FROM runs WHERE job_id = ? AND lease_key = ?", (int(job_id), key)
            ).fetchone()
        return dict(row) if row is not None else None

    # ------------------------------------------------------ additive: the API's views
    def recent_events(self, limit: int) -> list[dict[str, Any]]:
        """The ``limit`` most recent events, newest first (the dashboard's feed)."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM events ORDER BY id DESC LIMIT ?", (int(limit),)).fetchall()
        return [dict(r) for r in rows]
