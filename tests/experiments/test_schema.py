"""Experiment files: every unknown key or value is one clear error with file, line and key path."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.errors import InputError
from shapeshift.experiments.expand import expand
from shapeshift.experiments.schema import load_experiment
from tests.experiments.conftest import TINY, write

BASE = """
workloads:
  - {name: w, generator: poisson, jobs: 10}
clusters: [1x4]
policies: [fifo]
"""


def error(tmp_path, text: str) -> InputError:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_experiment(path)
    assert info.value.path == str(path)
    return info.value


@pytest.mark.parametrize(
    ("text", "field", "line", "message"),
    [
        (BASE + "colour: red\n", "colour", 5, "unknown key 'colour'"),
        (BASE.replace("[fifo]", "[fifo, nope]"), "policies[1].policy", 4, "unknown policy 'nope'; known: .*fifo"),
        (
            BASE.replace("[fifo]", "[{policy: fifo, params: {speed: 3}}]"),
            "policies[0].params.speed",
            4,
            "policy fifo: unknown parameter; parameters: backfill",
        ),
        (BASE.replace("jobs: 10", "jobs: 10, rat: 3"), "workloads[0].rat", 2, "unknown key 'rat'"),
        (BASE.replace("jobs: 10", "jobs: -1"), "workloads[0].jobs", 2, "greater than or equal to 0"),
        (BASE.replace("generator: poisson", "generator: zipf"), "workloads[0].generator", 2, "unknown generator"),
        (
            BASE.replace("jobs: 10", "jobs: 10, transforms: [{shuffle: 1}]"),
            "workloads[0].transforms[0]",
            2,
            "unknown transformation 'shuffle'; known: head",
        ),
        (BASE.replace("generator: poisson", "file: x.csv, generator: poisson"), "workloads[0]", 2, "exactly one"),
        (BASE.replace("generator: poisson, jobs: 10", "file: missing.csv"), "workloads[0].file", 2, "not found"),
        (BASE.replace("[1x4]", "[1y4]"), "clusters[0]", 3, "neither NxG"),
        (BASE + "sweep:\n  policy.backfil: [true]\n", "sweep.policy.backfil", 6, "no policy .* has a parameter"),
        (BASE + "sweep:\n  workload.rate: [1, -2]\n", "sweep.workload.rate", 6, "value -2: .*greater than 0"),
        (BASE + "sweep:\n  speed: [1]\n", "sweep.speed", 6, "unknown sweep axis 'speed'"),
        (BASE + "sweep:\n  seed: [1]\n", "sweep.seed", 6, "top-level 'seeds'"),
        (BASE + "window: {start: 5, end: 5}\n", "window", 5, "end must be greater"),
        (BASE + "round: 0\n", "round", 5, "greater than 0"),
        (BASE + "overheads: {restore_penalty: sometimes}\n", "overheads.restore_penalty", 5, "helios"),
        (BASE.replace("[fifo]", "[fifo, fifo]"), "policies[1]", 4, "duplicate name 'fifo'"),
        ("workloads: []\nclusters: [1x4]\npolicies: [fifo]\n", "workloads", 1, "at least 1"),
        ("clusters: [1x4]\npolicies: [fifo]\n", "workloads", None, "required key is missing"),
    ],
)
def test_validation_errors(tmp_path, text, field, line, message):
    err = error(tmp_path, text)
    assert err.field == field
    assert err.line == line
    assert re.search(message, err.message), err.message


def test_not_yaml_and_not_a_mapping(tmp_path):
    assert "not valid YAML" in error(tmp_path, "workloads: [\n").message
    assert "must be a mapping" in error(tmp_path, "- 1\n").message
    with pytest.raises(InputError, match="not found"):
        load_experiment(tmp_path / "absent.yaml")


def test_cross_product_and_axes_that_do_not_apply(tmp_path):
    exp = load_experiment(write(tmp_path, TINY))
    plans = expand(exp)
    # 1 workload x 1 cluster x 2 policies x 2 rates x 2 seeds
    assert len(plans) == 8
    assert [(p.policy_label, dict(p.axes)["workload.rate"], p.seed) for p in plans[:4]] == [
        ("fifo", 4, 0),
        ("fifo", 4, 1),
        ("fifo", 8, 0),
        ("fifo", 8, 1),
    ]
    assert dict(plans[0].workload.params)["rate"] == 4
    # policy.k exists for auto only: it multiplies auto's runs and leaves fifo's alone
    text = BASE.replace("[fifo]", "[fifo, {name: a, policy: auto, params: {orderings: [fifo]}}]")
    plans = expand(load_experiment(write(tmp_path, text + "sweep:\n  policy.k: [1, 2]\n")))
    assert [(p.policy_label, dict(p.axes)["policy.k"]) for p in plans] == [("fifo", None), ("a", 1), ("a", 2)]
    assert dict(plans[2].params)["k"] == 2


def test_paths_are_relative_to_the_experiment_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "trace.csv").write_text("job_id,submit_time,num_gpus,duration\nj1,0,1,10\n")
    exp = load_experiment(write(tmp_path / "sub", BASE.replace("generator: poisson, jobs: 10", "file: trace.csv")))
    assert exp.workloads[0].file == str(tmp_path / "sub" / "trace.csv")


def test_cli_reports_one_line_and_exit_2(tmp_path):
    path = write(tmp_path, BASE.replace("[fifo]", "[fifo, nope]"))
    result = CliRunner().invoke(app, ["experiment", "run", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "unknown policy 'nope'" in result.output
    assert "Traceback" not in result.output
    result = CliRunner().invoke(app, ["experiment", "validate", str(write(tmp_path, TINY, "t.yaml"))])
    assert result.exit_code == 0, result.output
    assert "8 runs" in result.output


@pytest.mark.parametrize("name", ["blox-load-sweep.yaml", "blox-admission.yaml"])
def test_shipped_experiment_files_validate(name):
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / name
    plans = expand(load_experiment(path))
    assert len(plans) == {"blox-load-sweep.yaml": 27, "blox-admission.yaml": 8}[name]  # 2 workloads x 4 admissions
    assert all(p.window == (3000, 4000) for p in plans)


def test_yaml_numbers_are_decimal_only(tmp_path):
    """YAML 1.1 reads 0x4 as the number 4 (hexadecimal); a cluster written 0x4 is text here,
    so the error names what the user wrote."""
    from shapeshift.yaml_lines import safe_load

    assert safe_load("a: [0x4, 4, 1.5, 007, 1_000]") == {"a": ["0x4", 4, 1.5, "007", "1_000"]}
    path = tmp_path / "e.yaml"
    path.write_text("workloads: [{generator: poisson, jobs: 5}]\nclusters: [0x4]\npolicies: [fifo]\n")
    with pytest.raises(InputError, match="got 0x4"):
        load_experiment(path)
