"""What a client sees of a job, depending on who asks.

Everyone with a token sees the queue: id, name, owner, tenant, state, plan, placement,
progress, timings and the reason a job waits (a shared cluster is only usable if people
can see why they wait). Only the owner and the admin see a job's command and environment
(``env`` often holds API keys) and its logs.
"""

from __future__ import annotations

import json
from typing import Any

from shapeshift.model import ExecutionPlan
from shapeshift.runtime.auth import ADMIN, Identity
from shapeshift.runtime.store import Store
from shapeshift.runtime.store_schema import JOB_COLUMNS

#: Columns of a job row that every client sees: all but the stored spec (its public part
#: is returned parsed; command and env only to the owner) and bookkeeping.
PRIVATE_COLUMNS = frozenset({"spec", "cancel_requested", "submission_id", "submission_owner"})
PUBLIC_FIELDS = tuple(c for c in JOB_COLUMNS if c not in PRIVATE_COLUMNS)


def public_job(row: dict[str, Any], viewer: Identity | None = None) -> dict[str, Any]:
    """A job as ``viewer`` may see it (``None``: the public part only)."""
    job = {k: row.get(k) for k in PUBLIC_FIELDS}
    spec = json.loads(row["spec"])
    job["iterations"] = spec.get("iterations")
    job["tenant"] = spec.get("tenant", "")
    job["user"] = spec.get("user") or ADMIN  # submitted with the admin token for nobody in particular
    job["gpus"] = (spec.get("resources") or {}).get("gpus")
    if job["gpus"] is None:
        job["gpus"] = ExecutionPlan.parse(spec["plan"]).gpus if spec.get("plan") else 1
    if viewer is not None and viewer.owns(job):
        job["command"] = spec.get("command")
        job["env"] = spec.get("env") or {}
    return job


def throughput(job: dict[str, Any]) -> float | None:
    """Iterations per second from the last reports (None before the first report)."""
    iter_time = job.get("iter_time")
    return 1.0 / iter_time if iter_time else None


def recent_events(store: Store, limit: int) -> list[dict[str, Any]]:
    """The ``limit`` most recent events, newest first (the dashboard's feed), through the
    store's read-only connections so the writer's lock never delays it."""
    rows = store._read("SELECT * FROM events ORDER BY id DESC LIMIT ?", (int(limit),))
    return [dict(r) for r in rows]
