"""Reading a job's rank logs from its directory: what ``GET /jobs/ID/logs`` serves and
what ``shapeshift logs`` reads directly when no controller runs.

A rank is an integer, and the file name is built from it, so no request can name a path
outside the job's directory (``rank=x/../../..`` is refused before any file is opened).
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from pathlib import Path

from shapeshift.errors import InputError
from shapeshift.runtime.ids import is_job_id

_ATTEMPT = re.compile(r"^attempt(\d+)$")
_RANK_LOG = re.compile(r"^rank(\d+)\.log$")


def attempts(job_dir: Path) -> list[Path]:
    """The job's attempt directories, in order (``attempt2`` before ``attempt10``)."""
    if not job_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in job_dir.iterdir() if (m := _ATTEMPT.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found)]


def ranks_logged(job_dir: Path) -> list[int]:
    """Every rank that has a log in some attempt."""
    ranks = {int(m.group(1)) for a in attempts(job_dir) for p in a.iterdir() if (m := _RANK_LOG.match(p.name))}
    return sorted(ranks)


def read_rank_logs(job_dir: Path, rank: int) -> tuple[str | None, list[int]]:
    """Every attempt's log of ``rank`` with a header per attempt, and the ranks that exist.

    ``None`` when that rank has no log in any attempt (a rank the job does not have, or
    a job that has not started)."""
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise ValueError(f"a rank is an integer >= 0, not {rank!r}")
    chunks = []
    for attempt in attempts(job_dir):
        path = attempt / f"rank{rank}.log"
        if path.is_file():
            chunks.append(f"==> {attempt.name} rank {rank} <==\n{path.read_text(errors='replace')}")
    if not chunks:
        return None, ranks_logged(job_dir)
    return "\n".join(chunks), ranks_logged(job_dir)


def job_dir_from_state(state_dir: Path, job_id: str) -> Path:
    """Where a job's logs are, read from the state database alone (no controller needed):
    every run records its ranks' log paths."""
    db = state_dir / "state.db"
    if not is_job_id(job_id):
        raise InputError(f"{job_id!r} is not a job id", field="JOB_ID")
    if not db.is_file():
        raise InputError(f"no controller state in {state_dir}; pass --state")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
            job = conn.execute("SELECT state FROM jobs WHERE id = ?", (int(job_id),)).fetchone()
            run = conn.execute(
                "SELECT ranks FROM runs WHERE job_id = ? ORDER BY attempt DESC LIMIT 1", (int(job_id),)
            ).fetchone()
    except sqlite3.Error as exc:
        raise InputError(f"{db} cannot be read: {exc}") from None
    if job is None:
        raise InputError(f"no job {job_id}")
    ranks = json.loads(run[0]) if run is not None else []
    if not ranks:
        raise InputError(f"job {job_id} has not started yet ({job[0]}); no logs")
    return Path(ranks[0]["log"]).parent.parent
