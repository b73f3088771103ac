"""Chaos run: submit jobs while the controller is SIGKILLed and restarted at random moments.

Used in a short, bounded form by ``tests/runtime/test_chaos.py`` and in a long form by
``benchmarks/bench_runtime_chaos.py``. Every job is the demo worker, which appends one
line to a marker file when it finishes, and every submit carries a submission id and is
retried (``ControllerClient.submit(retry=True)``), so the run can count exactly:

* **submitted**: submits the client saw acknowledged;
* **lost**: acknowledged submission ids with no job in the store;
* **duplicated**: submission ids with more than one job, or jobs that ran to the end more
  than once (two marker lines);
* **completed** / **failed**: jobs in those states at the end;
* **stuck**: jobs not finished when the run gave up waiting.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from shapeshift.runtime.remote import ControllerClient
from shapeshift.runtime.store import TERMINAL


def _rows(state: Path) -> list[dict[str, object]]:
    with contextlib.closing(sqlite3.connect(f"file:{state / 'state.db'}?mode=ro", uri=True, timeout=10)) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT id, state, submission_id FROM jobs")]


@dataclass(frozen=True)
class ChaosResult:
    submitted: int
    completed: int
    failed: int
    lost: int
    duplicated: int
    stuck: int
    kills: int

    def line(self) -> str:
        return (
            f"submitted {self.submitted}  completed {self.completed}  failed {self.failed}  lost {self.lost}  "
            f"duplicated {self.duplicated}  stuck {self.stuck}  kills survived {self.kills}"
        )


def _serve(state: Path, cluster: str, log: Path) -> subprocess.Popen[bytes]:
    address = state / "controller.json"
    with contextlib.suppress(FileNotFoundError):
        address.unlink()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "shapeshift.cli.main", "serve", "--state", str(state)),
                *("--cluster", cluster, "--poll-interval", "0.05", "--stop-grace", "2"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "SHAPESHIFT_CRASH_AT": ""},
        )
    deadline = time.monotonic() + 60
    while not address.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is not None or not address.exists():
        raise RuntimeError(f"the controller did not start; see {log}")
    return proc


def _job(i: int, rng: random.Random, marker: Path) -> str:
    iterations = rng.randint(5, 25)
    extra = f" --fail-at {rng.randint(1, iterations - 1)}" if rng.random() < 0.2 else ""
    command = (
        f"{{python}} -m shapeshift.client.demo --iterations {{iterations}} --iter-time 0.05 --marker {marker}{extra}"
    )
    gpus = 2 if rng.random() < 0.2 else 1
    return json.dumps({"name": f"chaos{i}", "command": command, "iterations": iterations, "resources": {"gpus": gpus}})


def run_chaos(
    workdir: Path,
    jobs: int = 12,
    kills: int = 3,
    seed: int = 0,
    cluster: str = "1x4",
    mean_gap: float = 0.25,
    kill_every: float = 2.0,
    settle: float = 60.0,
) -> ChaosResult:
    """Submit ``jobs`` jobs ``mean_gap`` seconds apart (exponential gaps) while killing the
    controller ``kills`` times about every ``kill_every`` seconds; wait up to ``settle``
    seconds for every job to finish, then count."""
    rng = random.Random(seed)
    state, marker = workdir / "state", workdir / "done.txt"
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "serve.log"
    proc = _serve(state, cluster, log)
    acknowledged: dict[str, str] = {}
    specs = [_job(i, rng, marker) for i in range(jobs)]
    gaps = [rng.expovariate(1.0 / mean_gap) for _ in range(jobs)]
    kill_gaps = [rng.uniform(0.5, 1.5) * kill_every for _ in range(kills)]
    errors: list[str] = []

    def submitter() -> None:
        client = ControllerClient.from_state(state)
        for i, (spec, gap) in enumerate(zip(specs, gaps, strict=True)):
            time.sleep(gap)
            try:
                acknowledged[f"chaos-{seed}-{i}"] = client.submit(spec, f"chaos-{seed}-{i}", retry=True)
            except Exception as exc:  # counted as not submitted
                errors.append(str(exc))

    thread = threading.Thread(target=submitter, daemon=True)
    thread.start()
    survived = 0
    try:
        for gap in kill_gaps:
            time.sleep(gap)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            proc = _serve(state, cluster, log)
            survived += 1
        thread.join(timeout=settle)
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            rows = _rows(state)
            if len(rows) >= len(acknowledged) and all(r["state"] in TERMINAL for r in rows):
                break
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    rows = _rows(state)
    by_submission = Counter(r["submission_id"] for r in rows)
    ids = {str(r["id"]) for r in rows}
    done_lines = Counter(line.split()[1] for line in marker.read_text().splitlines()) if marker.exists() else Counter()
    duplicated = sum(n - 1 for n in by_submission.values() if n > 1) + sum(1 for n in done_lines.values() if n > 1)
    return ChaosResult(
        submitted=len(acknowledged),
        completed=sum(r["state"] == "completed" for r in rows),
        failed=sum(r["state"] == "failed" for r in rows),
        lost=sum(1 for job_id in acknowledged.values() if job_id not in ids),
        duplicated=duplicated,
        stuck=sum(r["state"] not in TERMINAL for r in rows),
        kills=survived,
    )
