"""A run's options: the user's value, else the bundled data set's evaluation setting, else
the default; and the record of where each came from."""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest
from typer.testing import CliRunner

import shapeshift as ss
from shapeshift.cli.main import app
from shapeshift.reproduce.experiment import Paths, load_jobs, spec_for
from shapeshift.runs import RunSpec, ThroughputSpec, run
from shapeshift.runs.pairing import PairingWarning, pairing_notes
from shapeshift.runs.setting import Given, settle


def _sources(settled) -> dict[str, tuple[object, str]]:
    return {key: (value, source) for key, value, source in settled.origins}


def test_a_rubick_workload_takes_the_papers_setting():
    # Rubick §7.3: 8 x 8 A800, measured tables, 78 s restore; base/bp/naive have no tenants.
    settled = settle("rubick-naive", Given())
    got = _sources(settled)
    assert got["dataset"] == ("rubick-naive", "dataset")
    assert got["cluster"] == ("rubick-a800", "dataset") and settled.cluster.total_gpus == 64
    assert dict(settled.cluster.tenants) == {}
    assert settled.throughput == ThroughputSpec("ground-truth", "rubick-a800-tables")
    assert got["restore_penalty"] == (78.0, "dataset") and settled.overheads.restore_penalty == 78.0
    assert got["launch_delay"] == (0.0, "dataset")
    assert got["round"] == (None, "default")


def test_the_multi_tenant_trace_keeps_the_clusters_tenants():
    assert dict(settle("rubick-mt", Given()).cluster.tenants) == {"A": 64, "B": 0}


def test_every_value_the_user_gives_wins_over_the_data_set():
    settled = settle("rubick-naive", Given(cluster="2x8", restore_penalty="5", round_seconds=60.0))
    got = _sources(settled)
    assert got["cluster"] == ("2x8", "flag") and settled.cluster.total_gpus == 16
    assert got["restore_penalty"] == (5.0, "flag") and settled.overheads.restore_penalty == 5.0
    assert got["round"] == (60.0, "flag")
    assert got["throughput"] == ("ground-truth:rubick-a800-tables", "dataset")  # not given: still the data set's


def test_a_plain_file_takes_the_defaults(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,num_gpus,duration\na,0,1,10\n")
    got = _sources(settle(str(trace), Given()))
    assert "dataset" not in got
    assert got["cluster"] == ("4x8", "default")
    assert got["throughput"] == ("trace", "default")
    assert got["restore_penalty"] == (30.0, "default") and got["launch_delay"] == (0.0, "default")


def test_data_set_policy_parameters_go_only_to_policies_that_declare_them():
    settled = settle("rubick-naive", Given())
    params, origins = settled.params_for("rubick", {})
    assert params == {"traces": "rubick-a800-tables"}
    assert origins == [("rubick.traces", "rubick-a800-tables", "dataset")]
    assert settled.params_for("fifo", {}) == ({}, [])
    mine, origins = settled.params_for("sia", {"traces": "/my/tables"})
    assert mine == {"traces": "/my/tables"} and origins == [("sia.traces", "/my/tables", "flag")]


def test_antman_packs_two_jobs_per_gpu_on_the_data_sets_cluster_only():
    # Rubick study, AntMan baseline: two jobs per GPU; its own cluster (or sharing off) keeps the file's limit.
    settled = settle("rubick-mt", Given())
    assert settled.cluster_for("antman", {}).gpu_share_limit == 2
    assert settled.cluster_for("antman", {"sharing": "false"}).gpu_share_limit == 1
    assert settled.cluster_for("rubick", {}).gpu_share_limit == 1
    assert settle("rubick-mt", Given(cluster="8x8")).cluster_for("antman", {}).gpu_share_limit == 1


@pytest.mark.parametrize("policy", ["rubick", "sia", "antman"])
def test_simulate_on_a_rubick_name_is_the_reproduction_run(policy):
    # The same RunSpec (workload jobs aside, compared below) means the same simulation.
    paths = Paths.default()
    jobs = load_jobs(paths, "base")
    reproduced = spec_for(paths, jobs, policy, "base")
    settled = settle("rubick-base", Given())
    simulated = settled.spec(policy, {})
    for field in ("cluster", "policy", "params", "round_seconds", "overheads", "seed", "throughput"):
        assert getattr(simulated, field) == getattr(reproduced, field), field
    assert settled.workload.jobs() == reproduced.workload.jobs()


@pytest.mark.parametrize("policy", ["rubick", "sia"])
def test_simulate_and_the_reproduction_write_the_same_jobs_csv(tmp_path, policy):
    # End to end on the ten-job Rubick trace (same setting as rubick-base): the command line
    # with a data set name against the reproduction's own run, byte for byte.
    paths = Paths.default()
    jobs = read_naive()
    run(spec_for(paths, jobs, policy, "naive")).write(tmp_path / "reproduce")
    result = CliRunner().invoke(
        app, ["simulate", "--workload", "rubick-naive", "--policy", policy, "--out", str(tmp_path / "cli"), "-q"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cli" / "jobs.csv").read_bytes() == (tmp_path / "reproduce" / "jobs.csv").read_bytes()
    setting = json.loads((tmp_path / "cli" / "summary.json").read_text())["setting"]
    assert setting["dataset"] == "rubick-naive"
    assert setting["restore_penalty"] == {"value": 78.0, "source": "dataset"}
    assert setting[f"{policy}.traces"] == {"value": "rubick-a800-tables", "source": "dataset"}


def read_naive():
    from shapeshift.workloads.readers import read_workload

    return read_workload("rubick-naive").jobs()


def test_the_printed_summary_says_where_the_setting_came_from():
    result = CliRunner().invoke(
        app,
        ["simulate", "--workload", "rubick-naive", "--policy", "fifo", "--restore-penalty", "10", "--allow-unfinished"],
    )
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("setting:"))
    assert "(data set rubick-naive)" in line and "restore penalty 10 s (flag)" in line


def test_the_python_api_records_the_setting_too():
    summary = ss.simulate("rubick-naive", policy="fifo", restore_penalty=12.0).summary
    assert summary["setting"]["restore_penalty"] == {"value": 12.0, "source": "flag"}
    assert summary["setting"]["cluster"] == {"value": "rubick-a800", "source": "dataset"}


def test_a_run_spec_built_by_hand_records_no_setting():
    settled = settle("rubick-naive", Given())
    assert "setting" not in run(RunSpec(workload=settled.workload, cluster=settled.cluster)).summary


# --- pairing notes --------------------------------------------------------------------


def test_a_goodput_policy_without_efficiency_profiles_gets_one_note():
    base = settle("rubick-naive", Given(throughput="trace"))
    notes = pairing_notes(base.spec("sia", {}))
    assert len(notes) == 1 and "sia" in notes[0] and "statistical efficiency" in notes[0]
    assert pairing_notes(settle("pollux-workload6", Given()).spec("sia", {})) == []


def test_a_plan_aware_policy_under_recorded_durations_gets_one_note():
    settled = settle("rubick-naive", Given(throughput="trace"))
    notes = pairing_notes(settled.spec("rubick", {}))
    assert len(notes) == 1 and "execution plans" in notes[0] and "ground-truth" in notes[0]
    assert pairing_notes(settle("rubick-naive", Given()).spec("rubick", {})) == []
    assert pairing_notes(settled.spec("fifo", {})) == []
    assert pairing_notes(settled.spec("rubick-n", {})) == []  # changes neither plans nor resources


def test_the_python_api_warns_and_the_command_line_prints_the_note():
    frame = pd.DataFrame({"job_id": ["a"], "submit_time": [0.0], "num_gpus": [1], "duration": [60.0]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ss.simulate(frame, policy="rubick-r", cluster="1x8")
    assert [w.category for w in caught if issubclass(w.category, PairingWarning)] == [PairingWarning]
    result = CliRunner().invoke(app, ["simulate", "--workload", "rubick-naive", "--policy", "rubick-r",
                                      "--throughput", "trace"])
    assert result.exit_code == 0 and "note: rubick-r reconfigures execution plans" in result.output
