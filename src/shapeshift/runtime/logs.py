"""Reading a job's rank logs from its directory: what ``GET /jobs/ID/logs`` serves and
what ``shapeshift logs`` reads directly when no controller runs.

A rank is an integer, and the file name is built from it, so no request can name a path
outside the job's directory (``rank=x/../../..`` is refused before any file is opened).
"""

from __future__ import annotations

import re
from pathlib import Path

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
