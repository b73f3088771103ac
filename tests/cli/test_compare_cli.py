"""``shapeshift compare``: one table, compare.csv, per-policy outputs, same results for any --jobs."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from shapeshift.cli.compare_cmd import COMPARE_KEYS
from shapeshift.cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_compare_writes_one_csv_and_a_folder_per_policy(tmp_path):
    result = invoke("compare", "--policies", "fifo,sjf,las", "--out", str(tmp_path), "--jobs", "1")
    assert result.exit_code == 0, result.output
    for name in ("fifo", "sjf", "las", "avg JCT", "P99 JCT", "resp.", "makespan", "util", "preempt"):
        assert name in result.output
    with (tmp_path / "compare.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["policy"] for r in rows] == ["fifo", "sjf", "las"]
    # The contract columns first, in order; the policy's name, parameters and seeds after them.
    assert tuple(rows[0])[1 : 1 + len(COMPARE_KEYS)] == COMPARE_KEYS
    assert rows[0]["policy_name"] == "fifo" and rows[0]["seeds"] == "0"
    for name in ("fifo", "sjf", "las"):
        assert (tmp_path / name / "summary.json").exists() and (tmp_path / name / "jobs.csv").exists()
    # The demo's FIFO queue blocks; SJF (with backfill) cuts the average JCT.
    assert float(rows[1]["avg_jct"]) < float(rows[0]["avg_jct"])


def test_results_do_not_depend_on_the_number_of_workers(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    args = ["compare", "--policies", "srtf,themis", "--policy-arg", "themis.knob=0.5", "-q"]
    assert invoke(*args, "--jobs", "1", "--out", str(one)).exit_code == 0
    assert invoke(*args, "--jobs", "2", "--out", str(two)).exit_code == 0
    assert (one / "compare.csv").read_bytes() == (two / "compare.csv").read_bytes()
    for name in ("srtf", "themis"):
        assert (one / name / "jobs.csv").read_bytes() == (two / name / "jobs.csv").read_bytes()


def test_bad_compare_input_is_one_line_and_exit_2():
    for args, fragment in (
        (["--policies", "fifo,nope"], "unknown policy"),
        (["--policies", "fifo", "--policy-arg", "sjf.backfill=true"], "not in --policies"),
        (["--policies", "sjf", "--policy-arg", "backfill=true"], "policy.key=value"),
        (["--policies", "sjf", "--policy-arg", "sjf.estimator=psychic"], "oracle"),
        (["--policies", "fifo,fifo"], "twice"),
        (["--policies", "fifo", "--jobs", "0"], "--jobs"),
    ):
        result = runner.invoke(app, ["compare", *args])
        assert result.exit_code == 2, (args, result.output)
        assert fragment in result.output and "Traceback" not in result.output


def test_one_policy_twice_under_labels_and_parameters(tmp_path):
    result = invoke(
        "compare",
        "--policies",
        "tiresias,tiresias(thresholds=1800),t5=tiresias:thresholds=600",
        "--out",
        str(tmp_path),
        "-q",
    )
    assert result.exit_code == 0, result.output
    with (tmp_path / "compare.csv").open() as handle:
        rows = {r["policy"]: r for r in csv.DictReader(handle)}
    assert set(rows) == {"tiresias", "tiresias(thresholds=1800)", "t5"}
    assert rows["t5"]["policy_name"] == "tiresias" and rows["t5"]["params"] == "thresholds=600"
    assert rows["tiresias(thresholds=1800)"]["params"] == "thresholds=1800" and rows["tiresias"]["params"] == ""
    assert (tmp_path / "t5" / "summary.json").exists()
    # Same policy, same parameters as the default (no starvation promotion) -> the same schedule.
    same = invoke("compare", "--policies", "tiresias,t2=tiresias:starvation=0", "-q", "--json")
    first, second = json.loads(same.output)
    assert first["avg_jct"] == second["avg_jct"]


def test_seeds_give_the_mean_and_a_95_percent_interval(tmp_path):
    result = invoke("compare", "--policies", "fifo", "--seeds", "0,1,2", "--out", str(tmp_path), "-q")
    assert result.exit_code == 0, result.output
    per_seed = [json.loads((tmp_path / "fifo" / f"seed{s}" / "summary.json").read_text())["avg_jct"] for s in range(3)]
    with (tmp_path / "compare.csv").open() as handle:
        row = next(csv.DictReader(handle))
    mean = sum(per_seed) / 3
    sd = (sum((x - mean) ** 2 for x in per_seed) / 2) ** 0.5
    # Student's t with 2 degrees of freedom: t(0.975, 2) = 4.302653.
    assert float(row["avg_jct"]) == pytest.approx(mean, rel=1e-6)
    assert float(row["avg_jct_ci95"]) == pytest.approx(4.302653 * sd / 3**0.5, rel=1e-5)


def test_window_and_json_on_compare_and_simulate():
    out = invoke("compare", "--policies", "fifo", "--window", "100:200", "--json")
    (row,) = json.loads(out.output)
    assert row["jobs_total"] == 100 and row["window_start"] == 100
    sim = invoke("simulate", "--window", "100:200", "--json")
    assert json.loads(sim.output)["avg_jct"] == row["avg_jct"]
    bad = runner.invoke(app, ["compare", "--policies", "fifo", "--window", "200:100"])
    assert bad.exit_code == 2 and "END must be greater" in bad.output
