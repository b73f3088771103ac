"""Shared test helpers: tiny clusters and traces, the bundled data sets, and where the
reference data that cannot be bundled lives."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.state import JobState
from shapeshift.model import ClusterSpec, JobSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import SimulationResult, simulate

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SHARED_DATA = SHARED / "data"
EXAMPLES = SHARED / "examples"


def bundled(name: str) -> Path:
    """A bundled data set's main file or directory, or a file inside it (``NAME/inner/path``)."""
    from shapeshift.datasets import locate

    return locate(name)


def shared_file(relative: str) -> Path:
    """A file under ../shared (data that cannot be bundled), or skip the test saying what is
    missing."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"reference data {path} is not present (../shared is only in the project checkout and CI)")
    return path


def job(job_id: str, submit: float, gpus: int, duration: float, **kw) -> JobSpec:
    return JobSpec(job_id=job_id, submit_time=submit, num_gpus=gpus, duration=duration, **kw)


def run(
    jobs: Iterable[JobSpec], cluster: ClusterSpec | str = "1x4", policy="fifo", args=None, **kw
) -> SimulationResult:
    if isinstance(cluster, str):
        n, g = cluster.split("x")
        cluster = shorthand_cluster(int(n), int(g))
    pol = make_policy(policy, args or {}) if isinstance(policy, str) else policy
    return simulate(list(jobs), cluster, pol, **kw)


def by_id(result: SimulationResult) -> dict:
    return {j.job_id: j for j in result.jobs}


def jcts(result: SimulationResult) -> dict[str, float]:
    return {j.job_id: j.end_time - j.spec.submit_time for j in result.jobs if j.state is JobState.COMPLETED}
