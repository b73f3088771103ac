"""Experiment files take a bundled workload's evaluation setting where they set nothing."""

from __future__ import annotations

from pathlib import Path

from shapeshift.experiments.expand import expand
from shapeshift.experiments.schema import load_experiment
from shapeshift.runs.spec import ThroughputSpec


def _plans(tmp_path: Path, extra: str = "") -> dict[str, object]:
    path = tmp_path / "exp.yaml"
    path.write_text(
        "workloads:\n  - {file: rubick-naive}\n  - {file: philly}\n"
        "clusters: [8x8]\npolicies: [rubick, fifo]\n" + extra
    )
    return {f"{p.workload.name}/{p.policy}": p for p in expand(load_experiment(path))}


def test_a_bundled_workload_fills_what_the_file_leaves_unset(tmp_path):
    plans = _plans(tmp_path)
    rubick = plans["rubick-naive/rubick"]
    # Rubick §7.3 setting: measured tables, 78 s restore, no launch delay; the tables also
    # go to the plan-aware policy's own model (its declared 'traces' parameter).
    assert rubick.throughput == ThroughputSpec("ground-truth", "rubick-a800-tables")
    assert rubick.overheads.restore_penalty == 78.0 and rubick.overheads.launch_delay == 0.0
    assert dict(rubick.params)["traces"] == "rubick-a800-tables"
    assert "traces" not in dict(plans["rubick-naive/fifo"].params)  # fifo declares no such parameter
    # Philly's setting names only a cluster, which an experiment file always gives itself.
    philly = plans["philly/fifo"]
    assert philly.throughput == ThroughputSpec() and philly.overheads.restore_penalty == 30.0


def test_what_the_file_sets_wins(tmp_path):
    plans = _plans(tmp_path, "throughput: trace\noverheads: {restore_penalty: 5}\n")
    rubick = plans["rubick-naive/rubick"]
    assert rubick.throughput == ThroughputSpec("trace")
    assert rubick.overheads.restore_penalty == 5.0
    assert rubick.overheads.launch_delay == 0.0  # unset in the file: the data set's (0 s)
