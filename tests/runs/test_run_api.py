"""The one run path: ``RunSpec`` -> ``run`` -> ``RunResult``, and ``import shapeshift``.

Expectations are derived by hand on tiny traces (derivations in comments); the front
doors (CLI, experiment files, the Python API) are checked to give the same numbers.
"""

from __future__ import annotations

import json
import pickle
import runpy
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import shapeshift as ss
from shapeshift.cli.main import app
from shapeshift.cluster import shorthand_cluster
from shapeshift.errors import InputError
from shapeshift.runs import RunSpec, run
from shapeshift.workloads.workload import Workload
from tests.conftest import bundled, job

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

# 1x4 GPUs, FIFO. a: 4 GPUs for 100 s from t=0 holds the node; b (2 GPUs, 50 s, t=10) and
# c (2 GPUs, 500 s, t=20) both start at 100 when a ends. b ends at 150, c at 600.
# JCTs: a 100, b 140, c 580 -> average 820/3; makespan 600; queueing b 90, c 80.
TINY = [job("a", 0, 4, 100), job("b", 10, 2, 50), job("c", 20, 2, 500)]


def tiny_csv(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.csv"
    Workload.from_jobs("tiny", TINY).write(path)
    return path


def test_run_gives_the_hand_computed_fifo_schedule():
    result = run(RunSpec(workload=Workload.from_jobs("tiny", TINY), cluster=shorthand_cluster(1, 4)))
    assert result.summary["avg_jct"] == pytest.approx(820 / 3)
    assert result.summary["makespan"] == pytest.approx(600)
    rows = result.jobs.set_index("job_id")
    assert rows.loc["b", "first_start_time"] == 100 and rows.loc["c", "end_time"] == 600
    assert rows.loc["b", "queue_time"] == pytest.approx(90)
    assert result.rejections == []


def test_python_api_and_cli_give_the_same_summary(tmp_path):
    trace = tiny_csv(tmp_path)
    out = tmp_path / "cli"
    cli = runner.invoke(app, ["simulate", "--workload", str(trace), "--cluster", "1x4", "--out", str(out), "-q"])
    assert cli.exit_code == 0, cli.output
    from_cli = json.loads((out / "summary.json").read_text())
    from_api = ss.simulate(str(trace), cluster="1x4").summary
    for key in ("sim_wall_seconds",):
        from_cli.pop(key)
        from_api.pop(key)
    assert from_api == from_cli


def test_policy_parameters_as_keywords_and_params():
    # LAS on 1x1 without restore cost: a (100 s at 0) is preempted by b (10 s at 50), which
    # has attained less; b runs 50..60, a resumes with 50 s left and ends at 110.
    # JCT a 110, b 10 -> average 60.
    jobs = Workload.from_jobs("las", [job("a", 0, 1, 100), job("b", 50, 1, 10)])
    r = ss.simulate(jobs, cluster="1x1", policy="las", restore_penalty=0, mode="event", lease=0)
    assert r.summary["avg_jct"] == pytest.approx(60) and r.summary["preemptions"] == 1
    # FIFO through ``params``: b waits for a (0..100) and runs 100..110: JCTs 100 and 60.
    r2 = ss.simulate(jobs, cluster="1x1", policy="fifo", params={"backfill": False})
    assert r2.summary["avg_jct"] == pytest.approx((100 + 60) / 2)


def test_bad_arguments_raise_the_cli_messages():
    with pytest.raises(InputError, match="unknown policy 'nope'"):
        ss.simulate(policy="nope")
    with pytest.raises(InputError, match="unknown parameter"):
        ss.simulate(policy="fifo", bogus=1)
    with pytest.raises(InputError, match="seed"):
        ss.simulate(seed=-1)
    with pytest.raises(InputError, match="round"):
        ss.simulate(round=float("nan"))
    with pytest.raises(InputError, match="launch_delay"):
        ss.simulate(launch_delay=float("inf"))
    with pytest.raises(InputError, match="cluster must be"):
        ss.simulate(cluster=12)
    with pytest.raises(InputError, match="window"):
        ss.simulate(window=(5, 2))


def test_compare_runs_one_policy_twice_under_labels():
    # On 1x1, a (100 s at 0) and b (10 s at 50): FIFO averages 80 s, event-driven LAS 60 s;
    # FIFO with backfill cannot do better here (nothing fits beside a): also 80 s.
    jobs = Workload.from_jobs("two", [job("a", 0, 1, 100), job("b", 50, 1, 10)])
    comparison = ss.compare(
        {"fifo": "fifo", "las": ("las", {"mode": "event", "lease": 0}), "fifo-backfill": ("fifo", {"backfill": True})},
        workload=jobs,
        cluster="1x1",
        restore_penalty=0,
    )
    table = comparison.table()
    assert list(table.index) == ["fifo", "las", "fifo-backfill"]
    assert table.loc["fifo", "avg_jct"] == pytest.approx(80) and table.loc["las", "avg_jct"] == pytest.approx(60)
    assert table.loc["fifo-backfill", "avg_jct"] == pytest.approx(80)


def test_compare_results_do_not_depend_on_workers():
    one = ss.compare(["fifo", "sjf"], workers=1).table()
    two = ss.compare(["fifo", "sjf"], workers=2).table()
    pd.testing.assert_frame_equal(one, two)


def test_run_spec_and_result_travel_between_processes():
    tiny = Workload.from_jobs("tiny", TINY)
    spec = RunSpec(workload=tiny, cluster=shorthand_cluster(1, 4), params={"backfill": True})
    assert pickle.loads(pickle.dumps(spec)) == spec
    result = pickle.loads(pickle.dumps(run(spec)))
    assert result.summary["avg_jct"] is not None and result.policy is None


def test_result_writes_the_contract_files(tmp_path):
    spec = RunSpec(
        workload=Workload.from_jobs("tiny", TINY), cluster=shorthand_cluster(1, 4), record=frozenset({"intervals"})
    )
    result = run(spec)
    summary = result.write(tmp_path, extra={"run_id": "x"})
    assert summary["run_id"] == "x"
    assert {p.name for p in tmp_path.iterdir()} == {"summary.json", "jobs.csv", "rejected.csv", "intervals.csv"}
    # Intervals: a holds 4 GPUs over [0, 100], b 2 over [100, 150], c 2 over [100, 600].
    intervals = pd.read_csv(tmp_path / "intervals.csv").set_index("job_id")
    assert intervals.loc["c", "start"] == 100 and intervals.loc["c", "end"] == 600 and intervals.loc["a", "gpus"] == 4


def test_window_restricts_metrics_to_the_tracked_jobs():
    # Jobs [1, 3) in submit order are b and c: JCTs 140 and 580.
    r = ss.simulate(Workload.from_jobs("tiny", TINY), cluster="1x4", window=(1, 3))
    assert r.summary["avg_jct"] == pytest.approx(360) and r.summary["jobs_total"] == 2


def test_energy_works_on_every_front_door(tmp_path):
    r = ss.simulate(cluster="4x8", energy=ss.EnergySpec("ces", {"buffer": 1}))
    assert r.summary["energy_policy"] == "ces" and r.summary["energy_baseline_avg_jct"] > 0
    out = tmp_path / "cmp"
    cli = runner.invoke(
        app, ["compare", "--policies", "fifo,sjf", "--energy", "ces", "--energy-arg", "buffer=1", "--out", str(out)]
    )
    assert cli.exit_code == 0, cli.output
    assert json.loads((out / "sjf" / "summary.json").read_text())["energy_policy"] == "ces"
    bad = runner.invoke(app, ["simulate", "--energy-arg", "buffer=1"])
    assert bad.exit_code == 2 and "--energy ces" in bad.output


def test_experiment_files_accept_energy_and_a_ground_truth_model(tmp_path):
    from shapeshift.experiments.runner import run_experiment
    from shapeshift.experiments.schema import load_experiment

    traces = bundled("rubick-a800-tables")
    naive = bundled("rubick-naive")
    cluster = bundled("rubick-a800")
    path = tmp_path / "e.yaml"
    path.write_text(
        f"workloads: [{{file: {naive}, format: rubick}}]\nclusters: [{cluster}]\npolicies: [fifo]\n"
        f"overheads: {{restore_penalty: 78}}\nthroughput: {{kind: ground-truth, path: {traces}}}\nenergy: ces\n"
    )
    experiment = load_experiment(path)
    assert experiment.throughput.kind == "ground-truth" and experiment.energy is not None
    outcome = run_experiment(experiment, tmp_path / "out")
    assert outcome.ok, outcome.failed
    summary = json.loads(next((tmp_path / "out" / "runs").glob("*/summary.json")).read_text())
    assert summary["energy_policy"] == "ces"
    # The same run through the Python API gives the same schedule.
    direct = ss.simulate(
        str(naive),
        cluster=str(cluster),
        throughput=ss.ThroughputSpec("ground-truth", str(traces)),
        energy="ces",
        restore_penalty=78,
    )
    assert direct.summary["avg_jct"] == pytest.approx(summary["avg_jct"])


def test_experiment_file_errors_name_the_key(tmp_path):
    from shapeshift.experiments.schema import load_experiment

    path = tmp_path / "e.yaml"
    path.write_text("workloads: [{generator: poisson, jobs: 5}]\nclusters: [2x4]\npolicies: [fifo]\nenergy: solar\n")
    with pytest.raises(InputError, match=r"energy\.mode.*unknown energy mode 'solar'"):
        load_experiment(path)
    path.write_text("workloads: [{generator: poisson, jobs: 5}]\nclusters: [2x4]\npolicies: [fifo]\nround: .nan\n")
    with pytest.raises(InputError, match="round"):
        load_experiment(path)


def test_the_notebook_example_runs(capsys):
    runpy.run_path(str(ROOT / "examples" / "notebook_api.py"), run_name="__main__")
    printed = capsys.readouterr().out
    # FIFO on the example's three jobs: JCTs 100, 140, 580 (see TINY above) -> 273.33.
    assert printed.startswith("273.33")


def test_replace_keeps_a_valid_spec():
    spec = RunSpec(workload=Workload.from_jobs("tiny", TINY), cluster=shorthand_cluster(1, 4))
    with pytest.raises(InputError):
        replace(spec, seed=-3)


def test_slowdown_and_fairness_figures_by_hand():
    # TINY under FIFO on 1x4 (see above): JCT / isolated run time = a 100/100, b 140/50,
    # c 580/500 -> slowdowns 1, 2.8, 1.16 (mean 1.653333). All are above the 10 s bound.
    # Jobs present over time: 0-10: 1, 10-20: 2, 20-100: 3, 100-150: 2, 150-600: 1, so the
    # average presence is a 270/100 = 2.7, b 360/140, c 790/580. Ideal time on a 1/N share
    # of 4 GPUs: a 100 x 4 x 2.7 / 4 = 270 (rho 0.37037), b 50 x 2 x (360/140) / 4 (rho
    # 2.177778), c 500 (the share exceeds its 2 GPUs; rho 1.16). Users u1 = {a, b},
    # u2 = {c}: mean 1/slowdown 0.678571 and 0.862069 -> Jain 0.986012.
    users = [replace(j, user=u) for j, u in zip(TINY, ["u1", "u1", "u2"], strict=True)]
    s = run(RunSpec(workload=Workload.from_jobs("tiny", users), cluster=shorthand_cluster(1, 4))).summary
    assert s["avg_slowdown"] == pytest.approx((1 + 2.8 + 1.16) / 3, abs=1e-6)
    assert s["avg_bounded_slowdown"] == pytest.approx(s["avg_slowdown"])
    assert s["ftf_rho_max"] == pytest.approx(140 / (50 * 2 * (360 / 140) / 4), abs=1e-6)
    assert s["ftf_rho_mean"] == pytest.approx((100 / 270 + 140 / (50 * 2 * (360 / 140) / 4) + 1.16) / 3, abs=1e-6)
    x = [(1 + 1 / 2.8) / 2, 1 / 1.16]
    assert s["fairness_groups"] == "user"
    assert s["jain_fairness"] == pytest.approx(sum(x) ** 2 / (2 * sum(v * v for v in x)), abs=1e-6)


def test_bounded_slowdown_caps_tiny_jobs():
    # A 1 s job that waits 9 s: slowdown 10, bounded slowdown max(10, 10) / max(1, 10) = 1.
    jobs = [job("a", 0, 1, 9), job("b", 0, 1, 1)]
    s = run(RunSpec(workload=Workload.from_jobs("t", jobs), cluster=shorthand_cluster(1, 1))).summary
    # FIFO: a 0..9 (slowdown 1), b 9..10 (JCT 10, slowdown 10).
    assert s["avg_slowdown"] == pytest.approx(5.5) and s["p99_slowdown"] == pytest.approx(1 + 0.99 * 9)
    assert s["avg_bounded_slowdown"] == pytest.approx(1.0)
    assert s["jain_fairness"] is None  # no users or tenants
