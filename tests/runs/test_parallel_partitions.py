"""Partitions in parallel (``run(spec, workers=N)``, ``simulate --workers N``): the same
result as one process, byte for byte, or a serial run with the reason."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.state import JobState
from shapeshift.model import ClusterSpec, NodeSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.runs import EnergySpec, RunSpec, run
from shapeshift.runs.parallel import serial_reason
from shapeshift.workloads.workload import Workload
from tests.conftest import job


def _two_vcs() -> ClusterSpec:
    nodes = tuple(NodeSpec(f"n{i}", gpus=2, cpus=16, mem_gb=128) for i in range(2))
    return ClusterSpec(nodes, partitions={"a": ("n0",), "b": ("n1",)})


def _hand_trace() -> Workload:
    return Workload.of_jobs(
        "hand",
        [
            job("a1", 0, 2, 100, vc="a"),
            job("b1", 0, 2, 50, vc="b"),
            job("a2", 10, 1, 20, vc="a"),  # waits for a1 (vc a is full) although vc b frees at 50
            job("x", 5, 1, 10, vc="zz"),  # no such partition: rejected on arrival
        ],
    )


def test_split_run_matches_the_hand_derived_serial_run():
    # FIFO, no restart penalty on first launches:
    #   a1 runs 0-100, b1 0-50, a2 starts when a1 ends: 100-120 (JCT 110), x rejected.
    # Events: 4 arrivals + 3 completions = 7.
    # Decisions, one per instant with an event (the serial loop decides once per instant,
    # however many partitions changed): 0 (a1, b1 arrive), 5 (x arrives, rejected: no
    # partition is dirty, no decision), 10, 50, 100, 120 -> 5.
    spec = RunSpec(workload=_hand_trace(), cluster=_two_vcs(), policy="fifo")
    split = run(spec, workers=2)
    jobs = {j.job_id: j for j in split.simulation.jobs}
    assert [j.job_id for j in split.simulation.jobs] == ["a1", "b1", "x", "a2"]  # arrival order
    assert jobs["a2"].first_start == 100 and jobs["a2"].end_time == 120
    assert jobs["b1"].end_time == 50 and jobs["x"].state is JobState.REJECTED
    assert split.summary["events"] == 7
    assert split.summary["decisions"] == 5
    serial = run(spec)
    drop = {"sim_wall_seconds"}
    assert {k: v for k, v in split.summary.items() if k not in drop} == {
        k: v for k, v in serial.summary.items() if k not in drop
    }
    assert [r.job_id for r in split.rejections] == ["x"]


def test_split_run_with_rounds_matches_the_hand_derived_serial_run():
    # LAS as Blox runs it: decisions only at 300 s rounds (0, 300, 600, ...), a job keeps
    # its GPUs for one round. vc a (2 GPUs): a1 (2 GPUs, 100 s) and b1 in vc b (2 GPUs,
    # 700 s) start at round 0; a2 (1 GPU, 20 s) arrives at 10 and waits for round 300
    # (arrivals and completions do not decide), runs 300-320 (JCT 310). Rounds fire while
    # some partition has work: 0, 300 and 600 (b1 runs until 700), so events = 3 arrivals
    # + 3 completions + 3 rounds = 9 and decisions = 3. Split, vc a has rounds at 0 and
    # 300 and vc b at 0, 300 and 600: a round is one event and one decision per instant.
    trace = Workload.of_jobs(
        "rounds",
        [job("a1", 0, 2, 100, vc="a"), job("b1", 0, 2, 700, vc="b"), job("a2", 10, 1, 20, vc="a")],
    )
    spec = RunSpec(workload=trace, cluster=_two_vcs(), policy="las")
    assert serial_reason(spec, make_policy("las", {})) == ""
    split, serial = run(spec, workers=2), run(spec)
    jobs = {j.job_id: j for j in split.simulation.jobs}
    assert (jobs["a2"].first_start, jobs["a2"].end_time, jobs["b1"].end_time) == (300, 320, 700)
    assert (split.summary["events"], split.summary["decisions"]) == (9, 3)
    assert split.simulation.timer_instants == serial.simulation.timer_instants == [0, 300, 600]
    drop = {"sim_wall_seconds"}
    assert {k: v for k, v in split.summary.items() if k not in drop} == {
        k: v for k, v in serial.summary.items() if k not in drop
    }


def test_a_partition_left_stuck_sends_the_run_back_to_one_process():
    # vc a has two 1-GPU nodes of 8 CPUs; s asks for 1 GPU and 12 CPUs: the partition has
    # them (not rejected) but no node does, so s never starts and rounds go on until the
    # loop gives up (``IDLE_ROUNDS_LIMIT``). The serial loop counts those rounds only once
    # nothing runs or arrives anywhere, vc a's own run from its own last event: the split
    # run is redone in one process, which says so.
    nodes = tuple(NodeSpec(f"n{i}", gpus=1, cpus=8, mem_gb=64) for i in range(3))
    cluster = ClusterSpec(nodes, partitions={"a": ("n0", "n1"), "b": ("n2",)})
    trace = Workload.of_jobs(
        "stuck", [job("s", 0, 1, 50, vc="a", num_cpus=12), job("b1", 0, 1, 5000, vc="b")]
    )
    spec = RunSpec(workload=trace, cluster=cluster, policy="las")
    notes: list[str] = []
    split = run(spec, workers=2, on_serial=notes.append)
    assert any("one process" in note for note in notes)
    serial = run(spec)
    drop = {"sim_wall_seconds"}
    assert {k: v for k, v in split.summary.items() if k not in drop} == {
        k: v for k, v in serial.summary.items() if k not in drop
    }
    assert serial.summary["jobs_unfinished"] == 1


def _philly_slice(n: int) -> Workload:
    from shapeshift.workloads.readers import read_workload

    whole = read_workload("philly")
    return Workload.from_frame(whole.name, whole.frame.iloc[:n])


@pytest.mark.parametrize(
    "policy,params",
    [
        ("fifo", {}),
        ("fifo", {"backfill": True}),
        ("srtf", {"lease": 0}),
        ("sjf", {"estimator": "noise"}),
        ("las", {}),  # 300 s rounds and a one-round lease
        ("themis", {}),  # 600 s lease rounds, hand-outs at arrivals and completions
        ("gavel", {}),  # a round per partition, ended by its own wake-up
        ("gavel", {"rounds": "grid"}),  # the run's round timer
    ],
)
def test_split_run_writes_the_same_files_as_one_process(tmp_path, policy, params):
    from shapeshift.cluster import load_cluster

    cluster = load_cluster("philly-vcs")
    spec = RunSpec(workload=_philly_slice(4000), cluster=cluster, policy=policy, params=tuple(params.items()))
    assert serial_reason(spec, make_policy(policy, params)) == ""
    run(spec).write(tmp_path / "one")
    run(spec, workers=2).write(tmp_path / "two")
    for name in ("jobs.csv", "rejected.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    one, two = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("one", "two"))
    one.pop("sim_wall_seconds"), two.pop("sim_wall_seconds")
    assert one == two


@pytest.mark.parametrize(
    "policy,params,change,reason",
    [
        ("las", {"mode": "event"}, {}, "not partition-local"),  # its lease's wake-ups fall anywhere
        ("gavel", {"fill": True}, {}, "not partition-local"),  # hands out GPUs at others' round ends
        ("fifo", {}, {"round_seconds": 0.5}, "whole seconds"),
        ("tiresias", {}, {}, "not partition-local"),  # asks to wake up at queue demotions
        ("srtf", {}, {}, "not partition-local"),  # its default lease asks for timed wake-ups
        ("qssf", {}, {}, "not partition-local"),  # learns durations from every partition's jobs
        ("fifo", {}, {"energy": EnergySpec()}, "CES"),
        ("fifo", {}, {"cluster": shorthand_cluster(2, 4)}, "single partition"),
    ],
)
def test_runs_that_must_stay_serial_say_why(policy, params, change, reason):
    base = {"workload": _hand_trace(), "cluster": _two_vcs(), "policy": policy, "params": tuple(params.items())}
    spec = RunSpec(**{**base, **change})
    assert reason in serial_reason(spec, make_policy(policy, params))


def test_cli_workers_flag(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(app, ["simulate", "--workers", "0"])
    assert bad.exit_code == 2 and "--workers" in bad.output
    noted = runner.invoke(app, ["simulate", "--policy", "tiresias", "--workers", "2"])
    assert noted.exit_code == 0, noted.output
    assert "running in one process" in noted.output
