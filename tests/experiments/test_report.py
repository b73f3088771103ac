"""Reports: a tiny two-policy sweep gives a report whose figures exist and are not empty."""

from __future__ import annotations

import base64

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.errors import InputError
from shapeshift.experiments.report import build_report
from shapeshift.experiments.runner import run_experiment
from shapeshift.experiments.schema import load_experiment
from shapeshift.experiments.timeseries import run_series
from shapeshift.page_style import PAGE_CSS

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def finished(tiny, tmp_path):
    out = tmp_path / "out"
    run_experiment(load_experiment(tiny), out, workers=2)
    return out


def test_report_has_tables_figures_and_the_experiment_file(finished, tmp_path, tiny):
    outcome = build_report(finished, tmp_path / "rep" / "report.html")
    names = sorted(p.name for p in outcome.figures)
    assert names[:3] == ["jct-cdf.png", "load-avg-jct.png", "load-responsiveness.png"]
    assert len([n for n in names if n.startswith("timeseries-")]) == 2  # one chosen run per policy
    for path in outcome.figures:
        data = path.read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000
    page = outcome.html.read_text()
    assert PAGE_CSS in page  # drawn like the live dashboard
    assert page.count("data:image/png;base64,") == len(outcome.figures)
    embedded = page.split("data:image/png;base64,")[1].split("'")[0]
    assert base64.b64decode(embedded).startswith(PNG)
    assert "fifo-backfill" in page and "avg JCT (h)" in page
    assert "workload.rate: [4, 8]" in page  # the experiment file, escaped into <pre>
    # chosen runs: the heaviest load (rate 8), first seed, one per policy
    table = pd.read_csv(finished / "results.csv").set_index("run_id")
    assert [
        (table.loc[r, "policy"], table.loc[r, "workload.rate"], table.loc[r, "seed"]) for r in outcome.chosen_runs
    ] == [
        ("fifo", 8, 0),
        ("fifo-backfill", 8, 0),
    ]


def test_report_cli_and_errors(finished, tmp_path):
    result = CliRunner().invoke(app, ["report", str(finished), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.html").is_file() and (tmp_path / "r_figures" / "jct-cdf.png").is_file()
    result = CliRunner().invoke(app, ["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "x.html")])
    assert result.exit_code == 2 and "run `shapeshift experiment run" in result.output
    with pytest.raises(InputError, match="matches 0 runs"):
        build_report(finished, tmp_path / "y.html", runs=["zzz"])
    with pytest.raises(InputError, match="no column 'speed'"):
        build_report(finished, tmp_path / "y.html", x_axis="speed")


def test_queue_and_utilization_series_are_exact(tmp_path):
    # 2 GPUs. a: 2 GPUs, submitted 0, runs 0-10, preempted, runs again 20-30.
    # b: 1 GPU, submitted 5, runs 10-20. c: 1 GPU, submitted 5, never starts before 30, runs 30-40.
    run = tmp_path / "run"
    run.mkdir()
    (run / "jobs.csv").write_text(
        "job_id,submit_time,first_start_time,end_time,jct,queue_time,num_gpus,preemptions,reconfigurations,status\n"
        "a,0,0,30,30,10,2,1,0,completed\n"
        "b,5,10,20,15,5,1,0,0,completed\n"
        "c,5,30,40,35,25,1,0,0,completed\n"
    )
    (run / "intervals.csv").write_text("job_id,start,end,gpus\na,0,10,2\nb,10,20,1\na,20,30,2\nc,30,40,1\n")
    series = run_series(run, cluster_gpus=2)
    assert series.source == "recorded"

    def at(s, t):
        return s.values[np.searchsorted(s.times, t, side="right") - 1]

    # queue: t=5: b, c wait (2); t=12: a (preempted), c wait (2); t=25: b done, c waits (1); t=35: none
    assert [at(series.queue, t) for t in (1, 5, 12, 25, 35, 45)] == [0, 2, 2, 1, 0, 0]
    assert [at(series.utilization, t) for t in (1, 12, 25, 35, 45)] == [1.0, 0.5, 1.0, 0.5, 0.0]
    (run / "intervals.csv").unlink()
    approx = run_series(run, cluster_gpus=2)
    assert approx.source == "approximate"
    assert at(approx.utilization, 12) == 1.5  # a counted as holding from 0 to 30: the stated overestimate


def test_report_from_compare_and_simulate_outputs(tmp_path):
    runner = CliRunner()
    cmp = tmp_path / "cmp"
    done = runner.invoke(app, ["compare", "--policies", "fifo,sjf", "--seeds", "0,1", "--out", str(cmp), "-q"])
    assert done.exit_code == 0, done.output
    outcome = build_report(cmp, tmp_path / "c.html")
    page = (tmp_path / "c.html").read_text()
    # Two seeds per policy: the table shows a mean with its 95% interval.
    assert "±" in page and "sjf" in page and len(outcome.chosen_runs) == 2
    sim = tmp_path / "sim"
    assert runner.invoke(app, ["simulate", "--out", str(sim), "-q"]).exit_code == 0
    one = build_report(sim, tmp_path / "s.html")
    assert one.chosen_runs == ("fifo",) and (tmp_path / "s_figures" / "jct-cdf.png").is_file()


def test_a_damaged_results_table_is_one_clear_error(finished, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(finished, broken)
    (broken / "results.parquet").write_bytes(b"PAR1 this is not parquet")
    result = CliRunner().invoke(app, ["report", str(broken), "--out", str(tmp_path / "b.html")])
    assert result.exit_code == 2 and "cannot read the results table" in result.output
    assert "Traceback" not in result.output
