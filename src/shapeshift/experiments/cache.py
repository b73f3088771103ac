"""Content-addressed run directories: what makes a finished run reusable.

A run's id is a hash of everything that can change its result: the workload's *content*
(not its file name or path), the cluster's nodes and partitions, the policy and its
validated parameters, overheads, round length, seed, the tracked-job window and the
Shapeshift version. Re-running an experiment therefore only simulates what changed, and
two experiments that share a run share its directory.

A run directory is written under a temporary name and renamed into place when complete
(a rename within one directory is atomic), so a directory named like a run id is a
finished run; ``is_finished`` still checks the files and the recorded key, in case a
directory was copied or edited by hand.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
from pathlib import Path
from typing import Any

from shapeshift.model import ClusterSpec

#: Bump when the runner's outputs change meaning, to invalidate old caches.
RUN_FORMAT = 1
PARTIAL_PREFIX = ".partial-"


def shapeshift_version() -> str:
    try:
        return importlib.metadata.version("shapeshift")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a bare source tree
        return "unknown"


def cluster_fingerprint(cluster: ClusterSpec) -> str:
    text = repr(cluster.nodes) + repr(sorted(cluster.partitions.items())) + repr(sorted(cluster.tenants.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def run_inputs(
    *,
    workload_hash: str,
    cluster_hash: str,
    policy: str,
    params: dict[str, Any],
    overheads: dict[str, Any],
    round_seconds: float | None,
    seed: int,
    window: tuple[int, int] | None,
    throughput: dict[str, Any] | None = None,
    energy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The canonical inputs of a run, as recorded in its ``run.json``. ``throughput`` and
    ``energy`` enter the record only when a run uses them, so the ids of plain runs
    cached before they existed stay valid."""
    extra = {}
    if throughput is not None:
        extra["throughput"] = throughput
    if energy is not None:
        extra["energy"] = energy
    return {
        "format": RUN_FORMAT,
        "shapeshift": shapeshift_version(),
        "workload_sha256": workload_hash,
        "cluster_sha256": cluster_hash,
        "policy": policy,
        "params": params,
        "overheads": overheads,
        "round": round_seconds,
        "seed": seed,
        "window": list(window) if window else None,
        **extra,
    }


def directory_fingerprint(path: str | Path) -> str:
    """A content hash of every file under ``path`` (names and bytes), for measured data
    a run reads: edited tables invalidate the runs that used them."""
    root = Path(path)
    digest = hashlib.sha256()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(root) if file != root else file.name).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def run_id(inputs: dict[str, Any]) -> str:
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def is_finished(run_dir: Path) -> bool:
    """A complete run: its summary and inputs exist and the inputs hash to its name."""
    try:
        recorded = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return False
    return (run_dir / "summary.json").is_file() and run_id(recorded.get("inputs", {})) == run_dir.name


def clean_partials(runs_dir: Path) -> int:
    """Remove temporary directories left by runs that were interrupted; returns how many."""
    removed = 0
    if runs_dir.is_dir():
        for child in sorted(runs_dir.iterdir()):
            if child.name.startswith(PARTIAL_PREFIX) and child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
                removed += 1
    return removed
