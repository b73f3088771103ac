"""A real Slurm (``scripts/real_slurm.sh``) for the tests beside it: the skip markers and
one start/stop, shared by every test that runs one."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "real_slurm.sh"

NEEDS_REAL_SLURM = [
    pytest.mark.skipif(
        shutil.which("slurmctld") is None, reason="slurmctld not installed (scripts/real_slurm.sh install)"
    ),
    pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="a real Slurm here needs root"),
]


@contextmanager
def started_slurm(prefix: str, env: dict[str, str]) -> Iterator[Path]:
    """A real Slurm started with ``env`` in a fresh directory, stopped and removed after.
    Not under pytest's tmp_path: that is private to root, and the job users (alice, bob)
    must read slurm.conf."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    work.chmod(0o755)
    start = subprocess.run([str(SCRIPT), "start", str(work)], env=env, capture_output=True, text=True, timeout=180)
    if start.returncode != 0:
        subprocess.run([str(SCRIPT), "stop", str(work)], env=env, capture_output=True, timeout=60)
        pytest.fail(f"real Slurm did not start: {start.stderr[-2000:]}")
    try:
        yield work
    finally:
        subprocess.run([str(SCRIPT), "stop", str(work)], env=env, capture_output=True, timeout=60)
        shutil.rmtree(work, ignore_errors=True)
