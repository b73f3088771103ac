"""``shapeshift compare``: one table, compare.csv, per-policy outputs, same results for any --jobs."""

from __future__ import annotations

import csv

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
    assert tuple(rows[0])[1:] == COMPARE_KEYS
    for name in ("fifo", "sjf", "las"):
        assert (tmp_path / name / "summary.json").exists() and (tmp_path / name / "jobs.csv").exists()
    # The demo's FIFO queue blocks; SJF (with backfill) cuts the average JCT.
    assert float(rows[1]["avg_jct"]) < float(rows[0]["avg_jct"])


def test_results_do_not_depend_on_the_number_of_workers(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    args = ["compare", "--policies", "srtf,themis", "--policy-arg", "themis.fraction=0.5", "-q"]
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
