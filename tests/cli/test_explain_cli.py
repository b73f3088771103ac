"""``shapeshift explain`` and ``shapeshift simulate --explain`` on a tiny generated Helios-schema trace."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

pytest.importorskip("interpret")
pytest.importorskip("optuna")

from shapeshift.cli.main import app

runner = CliRunner()


@pytest.fixture(scope="module")
def helios_trace(tmp_path_factory):
    """240 jobs; user k's jobs take about e^(5 + k/2) s, so ``user`` is what a model must find."""
    rng = np.random.default_rng(0)
    n = 240
    users = rng.integers(0, 6, n)
    gpus = rng.choice([1, 2, 4], n)
    duration = np.round(np.exp(5 + 0.5 * users + rng.normal(0, 0.2, n)))
    submit = np.sort(rng.uniform(0, 10 * 86400, n)).round()
    frame = pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "user": [f"u{u}" for u in users],
            "vc": "a",
            "gpu_num": gpus,
            "cpu_num": 4 * gpus,
            "node_num": 1,
            "state": "COMPLETED",
            "submit_time": submit,
            "start_time": submit,
            "end_time": submit + duration,
            "duration": duration,
            "queue": 0,
        }
    )
    path = tmp_path_factory.mktemp("primo") / "helios.csv"
    frame.to_csv(path, index=False)
    return path


def test_explain_trace_then_the_saved_model(helios_trace, tmp_path):
    out = tmp_path / "fit"
    args = ["explain", "--trace", str(helios_trace), "--format", "helios", "--out", str(out)]
    result = runner.invoke(app, [*args, "--trials", "3", "--model-kinds", "prdt", "-q"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    # one VC, no names, and ten days from epoch 0 all fall in January
    assert metrics["dropped_features"] == ["vc", "name_bucket", "month"]
    # user carries 0.5 per step over 6 users (sd ~0.85) against noise sd 0.2: R^2 well above 0.5.
    assert metrics["test"]["r2_log"] > 0.5
    assert metrics["train_jobs"] + metrics["test_jobs"] <= 240
    cf = json.loads((out / "counterfactuals.json").read_text())
    assert len(cf["rows"]) == 5 and all(row for row in cf["rows"])
    again = runner.invoke(app, ["explain", str(out / "model.json"), "--out", str(tmp_path / "saved"), "-q"])
    assert again.exit_code == 0, again.output
    saved = json.loads((tmp_path / "saved" / "global.json").read_text())
    assert saved["kind"] == "prdt" and saved["feature_importance"]["user"] > 0.5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "X"], "either a MODEL.json or --trace"),
        (["--trace", "T", "--out", "X", "--target", "queue"], "unknown target"),
        (["--trace", "T", "--out", "X", "--model-kinds", "gbdt"], "--model-kinds"),
    ],
)
def test_explain_bad_input_is_one_line(helios_trace, tmp_path, args, message):
    args = [str(helios_trace) if a == "T" else str(tmp_path / "o") if a == "X" else a for a in args]
    result = runner.invoke(app, ["explain", *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_simulate_explain_adds_the_top_contributions_to_jobs_csv(helios_trace, tmp_path, monkeypatch):
    from shapeshift.policies.framework import estimators
    from shapeshift.predict.primo_duration import PrimoEstimator

    # The plumbing is under test, not the search: a PrDT without the model search keeps it fast.
    monkeypatch.setitem(estimators.ESTIMATORS, "primo", lambda: PrimoEstimator(model="prdt"))
    out = tmp_path / "sim"
    base = ["simulate", "--workload", str(helios_trace), "--format", "helios", "--cluster", "2x8", "-q"]
    refused = runner.invoke(app, [*base, "--policy", "sjf", "--explain"])
    assert refused.exit_code == 2 and "estimator=primo" in refused.output
    ok = runner.invoke(
        app, [*base, "--policy", "sjf", "--policy-arg", "estimator=primo", "--explain", "--out", str(out)]
    )
    assert ok.exit_code == 0, ok.output
    with (out / "jobs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {"predicted_duration", "explain_1", "explain_2", "explain_3"} <= set(rows[0])
    # sjf's estimator trains after 100 finished jobs: later jobs are explained by the model.
    learned = [r for r in rows if r["explain_1"].startswith("user=")]
    assert learned and all(float(r["predicted_duration"]) >= 1 for r in learned)
