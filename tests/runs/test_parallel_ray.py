"""Partitions in parallel on Ray (``run(spec, workers=N, backend="ray")``, ``simulate
--backend ray``): the same result as one process, on a local Ray that binds to loopback."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.errors import InputError
from shapeshift.runs import RunSpec, run
from tests.runs.test_parallel_partitions import _hand_trace, _two_vcs

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[object]:
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    os.environ.pop("RAY_ADDRESS", None)
    # Workers import shapeshift and the tests package from this checkout.
    root = str(Path(__file__).resolve().parents[2])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([root, *sys.path])}},
    )
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_split_matches_the_hand_derived_serial_run(local_ray, tmp_path):
    # The hand-derived two-VC case of test_parallel_partitions: a1 0-100, b1 0-50, a2
    # waits for a1 (its VC is full) and runs 100-120, x names no VC and is rejected; the
    # serial loop makes 7 events and 5 decisions. On Ray the two VCs are two tasks.
    spec = RunSpec(workload=_hand_trace(), cluster=_two_vcs(), policy="fifo")
    split = run(spec, workers=2, backend="ray")
    jobs = {j.job_id: j for j in split.simulation.jobs}
    assert [j.job_id for j in split.simulation.jobs] == ["a1", "b1", "x", "a2"]
    assert (jobs["a2"].first_start, jobs["a2"].end_time) == (100, 120)
    assert (split.summary["events"], split.summary["decisions"]) == (7, 5)
    split.write(tmp_path / "ray")
    run(spec).write(tmp_path / "one")
    for name in ("jobs.csv", "rejected.csv"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    one, two = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("one", "ray"))
    one.pop("sim_wall_seconds"), two.pop("sim_wall_seconds")
    assert one == two


def test_cli_backend_flag_refuses_unknown_backends_and_missing_ray(monkeypatch):
    runner = CliRunner()
    bad = runner.invoke(app, ["simulate", "--workers", "2", "--backend", "mpi"])
    assert bad.exit_code == 2 and "unknown backend 'mpi'" in bad.output
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    with pytest.raises(InputError, match="--backend ray needs the 'ray' package"):
        run(RunSpec(workload=_hand_trace(), cluster=_two_vcs(), policy="fifo"), workers=2, backend="ray")
