"""Running experiments: the results table, the cache, resuming, failures, determinism, windows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from shapeshift.errors import InputError
from shapeshift.experiments.cache import PARTIAL_PREFIX
from shapeshift.experiments.runner import run_experiment
from shapeshift.experiments.schema import load_experiment
from shapeshift.model import Schedule
from shapeshift.policies.framework import registry as reg
from shapeshift.policies.framework.base import EVENT_TRIGGERS
from tests.experiments.conftest import write

METRICS = ("avg_jct", "avg_responsiveness", "gpu_utilization", "jobs_completed", "makespan")


def run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in (out / "runs").iterdir() if not p.name.startswith("."))


def test_tiny_sweep_writes_one_row_per_run(tiny, tmp_path):
    out = tmp_path / "out"
    outcome = run_experiment(load_experiment(tiny), out, workers=2)
    assert (outcome.total, outcome.executed, outcome.cached, outcome.failed) == (8, 8, 0, ())
    table = pd.read_parquet(out / "results.parquet")
    assert len(table) == 8
    assert table.columns[:7].tolist() == [
        "run_id",
        "workload",
        "cluster",
        "policy",
        "policy_name",
        "seed",
        "workload.rate",
    ]
    assert set(METRICS) <= set(table.columns)
    assert table["policy"].tolist() == ["fifo"] * 4 + ["fifo-backfill"] * 4
    assert table["workload.rate"].tolist() == [4, 4, 8, 8] * 2
    assert (table["jobs_total"] == 30).all() and (table["cluster_gpus"] == 8).all()
    csv = pd.read_csv(out / "results.csv")
    assert csv["run_id"].tolist() == table["run_id"].tolist()
    for rid in table["run_id"]:
        run = out / "runs" / rid
        summary = json.loads((run / "summary.json").read_text())
        assert summary["run_id"] == rid and summary["jobs_total"] == 30
        assert len(pd.read_csv(run / "jobs.csv")) == 30
        assert (run / "intervals.csv").is_file() and (run / "run.json").is_file()
    # the same seed and rate give the same jobs to both policies (one workload content, two runs)
    inputs = [json.loads((out / "runs" / r / "run.json").read_text())["inputs"] for r in table["run_id"]]
    assert [i["workload_sha256"] for i in inputs[:4]] == [i["workload_sha256"] for i in inputs[4:]]
    assert len({i["workload_sha256"] for i in inputs}) == 4
    assert (out / "experiment.yaml").read_text() == tiny.read_text()
    # results_mean.csv: one row per (policy, rate) over the two seeds, mean and Student-t
    # interval: half-width = t(0.975, 1) x |a - b| / 2 with t(0.975, 1) = 12.706205.
    means = pd.read_csv(out / "results_mean.csv")
    assert len(means) == 4 and (means["seeds"] == 2).all()
    first = table[(table["policy"] == "fifo") & (table["workload.rate"] == 4)]["avg_jct"].tolist()
    row = means[(means["policy"] == "fifo") & (means["workload.rate"] == 4)].iloc[0]
    assert row["avg_jct"] == pytest.approx(sum(first) / 2)
    assert row["avg_jct_ci95"] == pytest.approx(12.706205 * abs(first[0] - first[1]) / 2, rel=1e-6)


def test_rerun_hits_the_cache_and_changes_only_rerun_what_changed(tiny, tmp_path):
    out = tmp_path / "out"
    run_experiment(load_experiment(tiny), out)
    stamps = {p.name: (p / "summary.json").stat().st_mtime_ns for p in run_dirs(out)}
    again = run_experiment(load_experiment(tiny), out)
    assert (again.executed, again.cached) == (0, 8)
    assert {p.name: (p / "summary.json").stat().st_mtime_ns for p in run_dirs(out)} == stamps
    # one new rate: only its 4 runs are simulated
    tiny.write_text(tiny.read_text().replace("[4, 8]", "[4, 8, 12]"))
    more = run_experiment(load_experiment(tiny), out)
    assert (more.total, more.executed, more.cached) == (12, 4, 8)
    # renaming a label does not invalidate anything: the cache key is the content
    tiny.write_text(tiny.read_text().replace("name: poisson", "name: renamed"))
    renamed = run_experiment(load_experiment(tiny), out)
    assert (renamed.executed, renamed.cached) == (0, 12)
    assert set(pd.read_csv(out / "results.csv")["workload"]) == {"renamed"}


def test_resume_after_interruption(tiny, tmp_path):
    out = tmp_path / "out"
    exp = load_experiment(tiny)

    def interrupt(done: int, total: int) -> None:
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, out, progress=interrupt)
    finished = run_dirs(out)
    assert len(finished) == 3
    # leftovers of a killed run: a temporary directory and a half-written directory under a final name
    (out / "runs" / f"{PARTIAL_PREFIX}deadbeef-1").mkdir()
    (out / "runs" / f"{PARTIAL_PREFIX}deadbeef-1" / "jobs.csv").write_text("job_id\n")
    resumed = run_experiment(exp, out)
    assert (resumed.executed, resumed.cached) == (5, 3)
    victim = run_dirs(out)[0]
    (victim / "summary.json").unlink()
    again = run_experiment(exp, out)
    assert (again.executed, again.cached) == (1, 7)
    assert not [p for p in (out / "runs").iterdir() if p.name.startswith(".")]
    assert len(pd.read_csv(out / "results.csv")) == 8


def test_killed_process_resumes(tmp_path):
    """SIGKILL a real `shapeshift experiment run` after its first finished run, then resume."""
    path = write(
        tmp_path,
        """
        workloads:
          - {name: w, generator: poisson, jobs: 1500, rate: 30}
        clusters: [4x8]
        policies: [fifo]
        seeds: [0, 1, 2, 3, 4, 5]
        """,
    )
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "shapeshift.cli.main", "experiment", "run", str(path), "--out", str(out)]
    proc = subprocess.Popen([*cmd, "--workers", "1", "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "runs").is_dir() and run_dirs(out):
            break
        time.sleep(0.02)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(run_dirs(out))
    assert before >= 1
    resumed = run_experiment(load_experiment(path), out)
    assert resumed.cached == before and resumed.executed == 6 - before
    assert len(pd.read_csv(out / "results.csv")) == 6


class _CrashParams(reg.PolicyParams):
    after: int = 3


class _Crash:
    name = "test-crash"
    triggers = EVENT_TRIGGERS
    default_round = None

    def __init__(self, after: int):
        self.after = after

    def decide(self, view) -> Schedule:
        self.after -= 1
        if self.after < 0:
            raise RuntimeError("boom")
        return Schedule(base=view.allocations)


@pytest.fixture
def crash(monkeypatch):
    reg.registry()
    info = reg.PolicyInfo("test-crash", "raises midway", _CrashParams, lambda p: _Crash(p.after))
    monkeypatch.setitem(reg._REGISTRY, "test-crash", info)
    return "test-crash"


def test_a_run_that_raises_midway_leaves_nothing_behind(tiny, tmp_path, crash):
    tiny.write_text(tiny.read_text().replace("  - fifo\n", f"  - fifo\n  - {crash}\n"))
    out = tmp_path / "out"
    outcome = run_experiment(load_experiment(tiny), out)
    assert outcome.total == 12 and len(outcome.failed) == 4
    assert all("RuntimeError: boom" in error for _, error in outcome.failed)
    assert all("policy=test-crash" in run for run, _ in outcome.failed)
    assert len(run_dirs(out)) == 8
    assert not [p for p in (out / "runs").iterdir() if p.name.startswith(".")]
    assert set(pd.read_csv(out / "results.csv")["policy"]) == {"fifo", "fifo-backfill"}
    # a second attempt retries exactly the failed runs
    again = run_experiment(load_experiment(tiny), out)
    assert (again.cached, len(again.failed)) == (8, 4)


def test_same_experiment_gives_identical_tables(tiny, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    run_experiment(load_experiment(tiny), a, workers=1)
    run_experiment(load_experiment(tiny), b, workers=2)
    ta, tb = (pd.read_csv(d / "results.csv").drop(columns=["sim_wall_seconds"]) for d in (a, b))
    pd.testing.assert_frame_equal(ta, tb)
    for rid in ta["run_id"]:
        assert (a / "runs" / rid / "jobs.csv").read_bytes() == (b / "runs" / rid / "jobs.csv").read_bytes()


def test_tracked_window_recomputes_metrics(tmp_path):
    # one GPU, FIFO: five 10 s jobs submitted at t = 0..4 end at 10, 20, 30, 40, 50
    (tmp_path / "trace.csv").write_text(
        "job_id,submit_time,num_gpus,duration\n" + "".join(f"j{i},{i},1,10\n" for i in range(5))
    )
    path = write(
        tmp_path,
        """
        workloads: [{file: trace.csv}]
        clusters: [1x1]
        policies: [fifo]
        window: {start: 1, end: 3}
        """,
    )
    out = tmp_path / "out"
    run_experiment(load_experiment(path), out)
    row = pd.read_csv(out / "results.csv").iloc[0]
    assert row["jobs_total"] == 2 and row["jobs_simulated"] == 5
    assert row["avg_jct"] == pytest.approx((19 + 28) / 2)
    assert row["avg_responsiveness"] == pytest.approx((9 + 18) / 2)
    assert row["makespan"] == pytest.approx(30 - 1)
    assert row["gpu_utilization"] == pytest.approx(1.0)  # the GPU is busy all through [1, 30]
    assert (row["window_start"], row["window_end"]) == (1, 3)
    bad = write(tmp_path, path.read_text().replace("start: 1, end: 3", "start: 7, end: 9"), "bad.yaml")
    with pytest.raises(InputError, match="window starts at job 7 but workload 'trace' has 5 jobs"):
        run_experiment(load_experiment(bad), tmp_path / "bad")


def test_ray_backend_without_ray_is_a_clear_error(tiny, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail as if not installed
    with pytest.raises(InputError, match="--backend ray needs the 'ray' package"):
        run_experiment(load_experiment(tiny), tmp_path / "o", backend="ray")
    with pytest.raises(InputError, match="unknown backend 'dask'"):
        run_experiment(load_experiment(tiny), tmp_path / "o", backend="dask")
