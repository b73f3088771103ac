"""The tuning loop end to end on a tiny model, eager transfer, and the CLI's errors."""

from __future__ import annotations

import csv
import json
import math

from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.cli.tune_cmd import tuning_job
from shapeshift.runtime.jobfile import parse_job
from shapeshift.tune.search import TuneSpec, run_tuning
from shapeshift.tune.space import parse_space

SPACE = """optimizer: adam
steps: 3
eval_batches: 1
batch_size: 4
sampler: grid
space:
  lr: {type: grid, values: [0.0001, 0.001, 0.01, 0.1]}
"""


def test_eager_transfer_follows_the_rule():
    # one trial per group; the target starts once 2 of 4 have finished with the best so far,
    # and restarts each later time the best changes (rule of hydro/tune/tune_config.py).
    result = run_tuning(TuneSpec("tiny-lm-small", parse_space(SPACE), trials=4, scale=4, fusion=1))
    metrics = [r.surrogate_metric for r in result.rows]
    best_after = [min(range(k + 1), key=lambda i: metrics[i]) for k in range(4)]
    expected_restarts = sum(1 for k in (2, 3) if best_after[k] != best_after[k - 1])
    assert result.target_restarts == expected_restarts
    assert expected_restarts >= 1  # this grid does exercise a restart (trial 2 beats trials 0-1)
    chosen = [r for r in result.rows if r.target_metric is not None]
    assert [r.trial for r in chosen] == [best_after[3]]
    assert math.isfinite(result.target_metric)
    assert result.groups == 4


def test_cli_run_writes_table_plot_and_a_reproducible_summary(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    runner = CliRunner()
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        res = runner.invoke(app, ["tune", "run", str(space), "--model", "tiny-lm-small", "--trials", "4",
                                  "--scale", "4", "--fusion", "2", "--out", str(out), "--quiet"])
        assert res.exit_code == 0, res.output
        outs.append(out)
    rows = list(csv.DictReader((outs[0] / "results.csv").open()))
    assert list(rows[0]) == ["trial", "group", "slot", "lr", "surrogate_metric", "state", "target_metric"]
    assert [r["group"] for r in rows] == ["0", "0", "1", "1"]
    assert sum(1 for r in rows if r["target_metric"]) == 1
    assert (outs[0] / "search.png").stat().st_size > 0
    assert (outs[0] / "summary.json").read_bytes() == (outs[1] / "summary.json").read_bytes()
    assert json.loads((outs[0] / "summary.json").read_text())["fusion"] == 2


def test_cli_bad_inputs_exit_2_with_the_location(tmp_path):
    runner = CliRunner()
    bad = tmp_path / "bad.yaml"
    bad.write_text("space:\n  lr: {type: loguniform, low: 0, high: 0.1}\n")
    res = runner.invoke(app, ["tune", "run", str(bad), "--model", "tiny-lm-small", "--trials", "2"])
    assert res.exit_code == 2
    assert "space.lr.low" in res.output and "bad.yaml:2" in res.output
    good = tmp_path / "good.yaml"
    good.write_text(SPACE)
    for args, where in ((["--model", "nope", "--trials", "2"], "--model"),
                        (["--model", "tiny-lm-small", "--trials", "0"], "--trials"),
                        (["--model", "tiny-lm-small", "--trials", "2", "--fusion", "many"], "--fusion"),
                        (["--model", "tiny-lm-small", "--trials", "2", "--scale", "64"], "--scale")):
        res = runner.invoke(app, ["tune", "run", str(good), *args, "--out", str(tmp_path / "o")])
        assert res.exit_code == 2, (args, res.output)
        assert where in res.output and "Traceback" not in res.output


def test_planner_fits_every_trial_in_16_gib_and_refuses_a_tiny_device(tmp_path):
    from shapeshift.tune.search import auto_fusion

    # a width-16 surrogate at batch 4 needs well under a megabyte per trial
    assert auto_fusion("tiny-lm-small", parse_space(SPACE), 4, trials=5) == 5
    good = tmp_path / "good.yaml"
    good.write_text(SPACE)
    res = CliRunner().invoke(app, ["tune", "run", str(good), "--model", "tiny-lm-small", "--trials", "2",
                                   "--memory-gb", "1e-9", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--memory-gb" in res.output and "more than the device" in res.output


def test_submission_is_a_valid_job_file(tmp_path):
    job = parse_job(tuning_job(tmp_path / "s p{a}.yaml", "tiny-lm", 8, 4, 4, 2, tmp_path / "out"))
    assert job.gpus == 2 and job.iterations == 8
    assert "-m shapeshift.tune.worker" in job.command and "--fusion 4" in job.command
