"""``shapeshift workload describe|generate|transform``: outputs and clean failures."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.cli.workload_cmd import parse_downsample, parse_seconds, parse_window
from shapeshift.errors import InputError
from shapeshift.workloads import generators, transforms
from shapeshift.workloads.readers import read_workload
from tests.conftest import bundled
from tests.workloads.test_readers import HELIOS

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_describe_prints_tables_and_writes_json(tmp_path):
    path = tmp_path / "helios.csv"
    path.write_text(HELIOS)
    result = invoke("workload", "describe", path, "--json", tmp_path / "stats.json")
    assert result.exit_code == 0, result.output
    for fragment in ("jobs", "arrival rate", "GPU demand", "p50", "Jobs per VC", "Jobs per final state", "CPU-only"):
        assert fragment in result.output
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["jobs"] == 4 and stats["cpu_only_jobs"] == 1
    assert {r["name"] for r in stats["states"]} == {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"}


def test_generate_writes_what_the_library_generates(tmp_path):
    out = tmp_path / "g.parquet"
    result = invoke(
        "workload", "generate", "--kind", "bursty", "--jobs", 200, "--rate", 3, "--seed", 9,
        "--period", 12, "--burst-length", 1, "--burst-factor", 5, "--models", "resnet50,bert", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    expected = generators.bursty(200, 3.0, generators.Bursts(12.0, 1.0, 5.0), seed=9, models=("resnet50", "bert"))
    pd.testing.assert_frame_equal(read_workload(out).frame, expected.frame)


def test_transform_applies_filters_in_order(tmp_path):
    path = tmp_path / "helios.csv"
    path.write_text(HELIOS)
    out = tmp_path / "t.csv"
    result = invoke("workload", "transform", path, "--vc", "vcA", "--vc", "vcB", "--window", "5m:", "--scale", 2,
                    "--cpu-jobs", "drop", "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    frame = read_workload(out).frame
    # window from 300 s keeps j3 (300 s), j2 (600 s, CPU-only: dropped), j4 (1800 s); then /2
    assert frame["job_id"].tolist() == ["j3", "j4"] and frame["submit_time"].tolist() == [0.0, 750.0]


def test_transform_downsample_matches_the_library(tmp_path):
    trace = bundled("rubick-base")
    expected = transforms.downsample(read_workload(trace), 32, 64, hours=6.0, seed=3)
    assert 0 < len(expected) < 406
    out = tmp_path / "d.parquet"
    result = invoke("workload", "transform", trace, "--downsample", "32:64:6", "--seed", 3, "--out", out)
    assert result.exit_code == 0, result.output
    pd.testing.assert_frame_equal(read_workload(out).frame, expected.frame)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("describe", "missing.csv"), "not found"),
        (("generate", "--kind", "wavy", "--out", "x.csv"), "unknown kind"),
        (("generate", "--rate", "0", "--out", "x.csv"), "--rate must be a finite number > 0"),
        (("generate", "--rate", "inf", "--out", "x.csv"), "--rate must be a finite number > 0"),
        (("generate", "--models", "nope,bert", "--out", "x.csv"), "unknown model(s) nope"),
        (("transform", "{helios}", "--feasible", "bert=0,-1", "--out", "x.csv"), "GPU counts >= 1"),
        (("transform", "{helios}", "--window", "2h", "--out", "x.csv"), "START:END"),
        (("transform", "{helios}", "--downsample", "64", "--out", "x.csv"), "TARGET_GPUS:SOURCE_GPUS"),
        (("transform", "{helios}", "--vc", "nope", "--out", "x.csv"), "unknown virtual cluster"),
        (("transform", "{helios}", "--feasible", "m=a", "--out", "x.csv"), "MODEL=1,2,4,8"),
        (("describe", "{helios}", "--format", "rubick"), "missing required column"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, fragment):
    helios = tmp_path / "helios.csv"
    helios.write_text(HELIOS)
    args = [a.replace("{helios}", str(helios)).replace("x.csv", str(tmp_path / "x.csv")) for a in args]
    result = invoke("workload", *args)
    assert result.exit_code == 2
    assert fragment in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("error:")


def test_time_parsing():
    assert parse_seconds("90", "x") == 90 and parse_seconds("30m", "x") == 1800 and parse_seconds("1.5d", "x") == 129600
    assert parse_window("2h:14h") == (7200.0, 50400.0) and parse_window(":1h") == (None, 3600.0)
    assert parse_downsample("64:2816:12") == (64, 2816, 12.0) and parse_downsample("8:16") == (8, 16, None)
    with pytest.raises(InputError):
        parse_seconds("2 weeks", "--window")
