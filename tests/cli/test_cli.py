"""The command line: the demo, outputs, determinism, and clean failures (exit 2, no traceback)."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from shapeshift.analysis.metrics import JOB_COLUMNS, SUMMARY_KEYS, WALL_TIME_KEYS
from shapeshift.cli.main import app
from shapeshift.policies.framework.registry import registry
from tests.conftest import bundled

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_demo_runs_and_prints_a_summary():
    result = invoke("simulate")
    assert result.exit_code == 0, result.output
    assert "average JCT" in result.output and "300 completed / 300 total" in result.output


def test_outputs_have_the_contract_fields(tmp_path):
    result = invoke("simulate", "--out", str(tmp_path), "--quiet")
    assert result.exit_code == 0 and result.output == ""
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary)[: len(SUMMARY_KEYS)] == list(SUMMARY_KEYS)
    assert 0 < summary["gpu_utilization"] <= 1 and summary["jobs_completed"] == summary["jobs_total"] == 300
    with (tmp_path / "jobs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == JOB_COLUMNS and len(rows) == 300
    jct = [float(r["jct"]) for r in rows]
    assert summary["avg_jct"] == pytest.approx(sum(jct) / len(jct), rel=1e-6)


def _strip_wall(path):
    data = json.loads(path.read_text())
    for key in WALL_TIME_KEYS:
        data.pop(key)
    return data


def test_same_seed_gives_byte_identical_outputs(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out, seed in ((a, "7"), (b, "7"), (c, "8")):
        assert (
            invoke("simulate", "--seed", seed, "--policy-arg", "backfill=true", "--out", str(out), "-q").exit_code == 0
        )
    text_a = (a / "summary.json").read_text().splitlines()
    text_b = (b / "summary.json").read_text().splitlines()
    assert [line for line in text_a if "sim_wall_seconds" not in line] == [
        line for line in text_b if "sim_wall_seconds" not in line
    ]
    assert (a / "jobs.csv").read_bytes() == (b / "jobs.csv").read_bytes()
    assert _strip_wall(a / "summary.json") != _strip_wall(c / "summary.json")


def test_policies_lists_every_registered_policy():
    result = invoke("policies")
    assert result.exit_code == 0
    for name in registry():
        assert name in result.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--cluster", "nonsense"], "NxG"),
        (["--policy", "nope"], "unknown policy"),
        (["--policy-arg", "backfill"], "key=value"),
        (["--policy-arg", "color=red"], "unknown parameter"),
        (["--restore-penalty", "someday"], "restore penalty"),
        (["--round", "-5"], "--round"),
    ],
)
def test_bad_arguments_exit_2_with_one_message(args, fragment):
    result = invoke("simulate", *args)
    assert result.exit_code == 2
    assert fragment in result.output and "Traceback" not in result.output


def test_bad_workload_file_names_file_line_and_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("job_id,submit_time,num_gpus,duration\na,0,1,10\nb,5,two,10\n")
    result = invoke("simulate", "--workload", str(path), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert f"{path}:3" in result.output and "num_gpus" in result.output
    assert not (tmp_path / "o").exists()  # no partial output presented as success


def test_rejected_jobs_are_counted_and_listed(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,num_gpus,duration\na,0,1,10\nhuge,0,64,10\n")
    result = invoke("simulate", "--workload", str(trace), "--cluster", "1x8", "--out", str(tmp_path / "o"))
    assert result.exit_code == 0
    assert "1 job(s) rejected" in result.output and "huge" in result.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["jobs_rejected"] == 1 and summary["jobs_completed"] == 1
    assert "huge" in (tmp_path / "o" / "rejected.csv").read_text()
    assert "huge,0.0,,,,,64,0,0,rejected" in (tmp_path / "o" / "jobs.csv").read_text()


def test_philly_on_its_virtual_clusters_small_slice(tmp_path):
    source = bundled("philly")
    cluster = bundled("philly-vcs")
    head = source.read_text().splitlines()[:2001]
    sliced = tmp_path / "philly2k.csv"
    sliced.write_text("\n".join(head) + "\n")
    result = invoke(
        "simulate", "--workload", str(sliced), "--cluster", str(cluster), "--out", str(tmp_path / "o"), "-q"
    )
    assert result.exit_code == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["jobs_completed"] + summary["jobs_rejected"] == 2000


def test_unfinished_jobs_are_flagged_and_exit_3():
    """Under FIFO with the measured Rubick speeds, one job of the smoke trace asks for a plan
    that does not fit in GPU memory: it holds its GPUs at speed 0 and never finishes. The
    run says so and exits 3, unless --allow-unfinished."""

    trace = bundled("rubick-naive")
    cluster = bundled("rubick-a800")
    args = ["simulate", "--workload", str(trace), "--cluster", str(cluster)]
    # The CLI has no flag for the speed model; the Python API does: check the summary there,
    # the exit status on a CLI run of the same spec through the API's own CLI path below.
    import shapeshift as ss

    traces = bundled("rubick-a800-tables")
    r = ss.simulate(str(trace), cluster=str(cluster), throughput=ss.ThroughputSpec("ground-truth", str(traces)))
    assert r.summary["jobs_unfinished"] == 1
    result = runner.invoke(app, [*args, "--throughput", f"ground-truth:{traces}"])
    assert result.exit_code == 3 and "never finished" in result.output
    allowed = runner.invoke(app, [*args, "--throughput", f"ground-truth:{traces}", "--allow-unfinished", "-q"])
    assert allowed.exit_code == 0
