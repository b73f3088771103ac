"""The controller database's tables. Changes are additive only: new tables, and new
columns listed in ``ADDED_COLUMNS`` (added with ``ALTER TABLE`` to older databases)."""

from __future__ import annotations

SCHEMA = """
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
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
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
    "submission_id",
    "predicted_iter_time",
    "submission_owner",
)

#: Columns added after the first release (``ALTER TABLE`` on older databases): additive only.
ADDED_COLUMNS = (
    ("jobs", "submission_id", "TEXT"),
    ("jobs", "predicted_iter_time", "REAL"),
    ("runs", "exit_codes", "TEXT NOT NULL DEFAULT ''"),
    ("jobs", "submission_owner", "TEXT"),
)

#: Submission ids are unique per submitter (the token's user, or ``admin``), not globally.
#: Rows written before the owner was recorded take the job's user (``admin`` when none).
SUBMISSION_INDEX = (
    "DROP INDEX IF EXISTS jobs_submission",
    "UPDATE jobs SET submission_owner = coalesce(nullif(json_extract(spec, '$.user'), ''), 'admin') "
    "WHERE submission_id IS NOT NULL AND submission_owner IS NULL",
    "CREATE UNIQUE INDEX IF NOT EXISTS jobs_submission_owner ON jobs (submission_owner, submission_id) "
    "WHERE submission_id IS NOT NULL",
)
