"""shapeshift whatif / ss.whatif: files, agreement figures, recorded summary, bad input."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import shapeshift as ss
from shapeshift.cli.main import app
from shapeshift.slurm.agreement import agreement

CONF = """\
NodeName=n[1-2] CPUs=16 RealMemory=64000 Gres=gpu:4
PartitionName=gpu Nodes=ALL Default=YES
PriorityType=priority/multifactor
PriorityWeightAge=1000
SchedulerParameters=bf_interval=1,bf_resolution=1,sched_interval=1
"""
# 8 GPUs. 1 (4 GPUs) 0-60 and 2 (4 GPUs) 1-31 start at once; 3 needs all 8: it waits for
# 1's end at 60; 4 (2 GPUs, 1 min limit) fits on 2's GPUs at 31 and ends (51) before
# 3's reservation (from 0 + 2 min = 120 by 1's limit), so backfill starts it at 31.
HISTORY = """\
JobID|User|Account|Partition|Submit|Start|End|Timelimit|State|AllocTRES
1|a|x|gpu|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:00|00:02:00|COMPLETED|cpu=2,gres/gpu=4
2|b|y|gpu|2024-01-01T00:00:01|2024-01-01T00:00:01|2024-01-01T00:00:31|00:01:00|COMPLETED|cpu=2,gres/gpu=4
3|a|x|gpu|2024-01-01T00:00:02|2024-01-01T00:01:00|2024-01-01T00:02:00|00:02:00|COMPLETED|cpu=2,gres/gpu=8
4|b|y|gpu|2024-01-01T00:00:03|2024-01-01T00:00:31|2024-01-01T00:00:51|00:01:00|COMPLETED|cpu=2,gres/gpu=2
"""


@pytest.fixture
def inputs(tmp_path):
    (tmp_path / "slurm.conf").write_text(CONF)
    (tmp_path / "hist.txt").write_text(HISTORY)
    return tmp_path


def test_whatif_cli_writes_every_file(inputs):
    out = inputs / "out"
    result = CliRunner().invoke(
        app,
        [
            "whatif",
            "--sacct",
            str(inputs / "hist.txt"),
            "--slurm-conf",
            str(inputs / "slurm.conf"),
            "--policy",
            "slurm",
            "--policy",
            "fifo",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = (out / "comparison.csv").read_text().splitlines()
    assert rows[0].startswith("source,") and [r.split(",")[0] for r in rows[1:]] == ["recorded", "slurm", "fifo"]
    # Recorded waits: 0, 0, 58, 28 -> mean 21.5; JCTs 60, 30, 118, 48 -> mean 64.
    recorded = dict(zip(rows[0].split(","), rows[1].split(","), strict=True))
    assert float(recorded["avg_queue"]) == 21.5 and float(recorded["avg_jct"]) == 64.0
    agree = json.loads((out / "agreement.json").read_text())
    assert agree["jobs_compared"] == 4 and agree["within_5s"] == 1.0 and agree["same_order_share"] == 1.0
    # FIFO without backfill: 4 waits behind 3 (60-120) and starts at 120: wait 117.
    starts = (out / "starts.csv").read_text().splitlines()
    assert starts[0] == "job_id,submit,recorded,slurm,fifo" and starts[4].endswith(",120.0")
    assert "account" in (out / "by_account.csv").read_text().splitlines()[0]
    assert "How closely the slurm replay" in (out / "report.md").read_text()


def test_whatif_quiet_prints_nothing_and_writes_every_file(inputs):
    out = inputs / "out"
    args = ["whatif", "--sacct", str(inputs / "hist.txt"), "--slurm-conf", str(inputs / "slurm.conf")]
    result = CliRunner().invoke(app, [*args, "--policy", "slurm", "--policy", "fifo", "--out", str(out), "--quiet"])
    assert result.exit_code == 0 and result.output == ""
    assert [r.split(",")[0] for r in (out / "comparison.csv").read_text().splitlines()[1:]] == [
        "recorded",
        "slurm",
        "fifo",
    ]


def test_whatif_reports_progress_per_replay(inputs):
    # Two policies: called once before the first replay and once after each.
    calls = []
    ss.whatif(inputs / "hist.txt", inputs / "slurm.conf", ["slurm", "fifo"], progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 2), (1, 2), (2, 2)]


def test_whatif_library(inputs):
    outcome = ss.whatif(inputs / "hist.txt", inputs / "slurm.conf", ["slurm"])
    assert list(outcome.table()["source"]) == ["recorded", "slurm"]
    assert set(outcome.by_partition["group"]) == {"gpu"}


def test_whatif_bad_input_is_one_line(inputs):
    (inputs / "bad.conf").write_text("NodeName=n1 CPUs=many\n")
    result = CliRunner().invoke(
        app,
        [
            "whatif",
            "--sacct",
            str(inputs / "hist.txt"),
            "--slurm-conf",
            str(inputs / "bad.conf"),
            "--out",
            str(inputs / "o"),
        ],
    )
    assert result.exit_code == 2 and "bad.conf:1" in result.output and "Traceback" not in result.output


def test_agreement_by_hand():
    recorded = {"a": 0.0, "b": 10.0, "c": 20.0, "d": 30.0}
    replay = {"a": 0.0, "b": 14.0, "c": 90.0, "d": 25.0}
    result = agreement(recorded, replay)
    # |diffs| 0, 4, 70, 5: within 5 s 3/4, within 60 s 3/4; median (4+5)/2 = 4.5.
    assert (result["within_5s"], result["within_60s"], result["median_abs_diff_s"]) == (0.75, 0.75, 4.5)
    # Neighbours a-b, b-c in order; c-d reversed (90 > 25): 2/3.
    assert result["same_order_share"] == pytest.approx(2 / 3, abs=1e-6)


def test_ignored_slurm_conf_keys_listed_on_one_line(inputs):
    # Two keys the replay does not model (ClusterName, a SchedulerParameters item) and one
    # node attribute: each command that reads the file names all three on one line.
    conf = inputs / "slurm.conf"
    conf.write_text("ClusterName=x\n" + CONF.replace("sched_interval=1", "sched_interval=1,pack_serial_at_end"))
    conf.write_text(conf.read_text().replace("Gres=gpu:4", "Gres=gpu:4 Port=17000"))
    expected = (
        "slurm.conf: keys not modelled (ignored): ClusterName, NodeName.Port, SchedulerParameters.pack_serial_at_end"
    )
    sim = CliRunner().invoke(
        app, ["simulate", "--workload", str(inputs / "hist.txt"), "--cluster", str(conf), "--policy", "slurm"]
    )
    assert sim.exit_code == 0, sim.output
    assert sum(expected in line for line in sim.output.splitlines()) == 1
    out = inputs / "w"
    what = CliRunner().invoke(
        app, ["whatif", "--sacct", str(inputs / "hist.txt"), "--slurm-conf", str(conf), "--out", str(out)]
    )
    assert what.exit_code == 0, what.output
    assert sum(expected in line for line in what.output.splitlines()) == 1


def test_whatif_shows_jobs_a_submit_limit_refuses(tmp_path):
    # QOS normal: MaxSubmitPU 1. User a's job 3 is submitted at 2 while a's job 1 runs
    # (0-60), and user b's job 4 at 3 while b's job 2 runs (1-31): 1 + 1 > 1 each, so the
    # slurm replay refuses both at submission (QOSMaxSubmitJobPerUserLimit);
    # comparison.csv counts them in jobs_rejected (recorded: 0, the history ran them).
    (tmp_path / "slurm.conf").write_text(CONF)
    history = HISTORY.replace("JobID|User|", "JobID|QOS|User|")
    lines = history.splitlines()
    history = "\n".join(line.replace("|", "|normal|", 1) if line[0].isdigit() else line for line in lines)
    (tmp_path / "hist.txt").write_text(history + "\n")
    (tmp_path / "qos.txt").write_text("Name|Priority|MaxSubmitPU\nnormal|0|1\n")
    out = tmp_path / "out"
    ss.whatif(tmp_path / "hist.txt", tmp_path / "slurm.conf", ["slurm"], qos=tmp_path / "qos.txt", out=out)
    rows = [line.split(",") for line in (out / "comparison.csv").read_text().splitlines()]
    table = {row[0]: dict(zip(rows[0], row, strict=True)) for row in rows[1:]}
    assert table["recorded"]["jobs_rejected"] == "0" and table["slurm"]["jobs_rejected"] == "2"


def test_whatif_bad_kill_wait_is_one_line_with_exit_2(inputs):
    # A non-finite KillWait: one line naming the file, line and key; exit status 2.
    conf = "NodeName=n1 CPUs=8 Gres=gpu:4\nPartitionName=gpu Nodes=n1 Default=YES\nKillWait=inf\n"
    (inputs / "kw.conf").write_text(conf)
    args = ["whatif", "--sacct", str(inputs / "hist.txt"), "--slurm-conf", str(inputs / "kw.conf")]
    result = CliRunner().invoke(app, [*args, "--out", str(inputs / "o")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "kw.conf:3" in result.output and "KillWait" in result.output
    assert not (inputs / "o").exists() or not any((inputs / "o").iterdir())  # nothing stored


def test_whatif_names_why_a_replay_refused_jobs(inputs):
    # Job 4 ran in partition "old", which the slurm.conf given does not have: every replay
    # refuses it at submission, and the notes and the report say which job and why (the
    # agreement figures cover the three others only).
    history = HISTORY.replace("4|b|y|gpu|", "4|b|y|old|")
    (inputs / "hist.txt").write_text(history)
    out = inputs / "out"
    outcome = ss.whatif(inputs / "hist.txt", inputs / "slurm.conf", ["slurm", "fifo"], out=out)
    refused = [n for n in outcome.notes if "refused" in n]
    assert len(refused) == 2 and all("unknown partition" in n and "'old'" in n and "(job 4)" in n for n in refused)
    assert [n.split(":")[0] for n in refused] == ["slurm", "fifo"]
    assert outcome.agreement["jobs_compared"] == 3 and outcome.agreement["jobs_only_recorded"] == 1
    assert "1 job(s) that started in the record never started in the replay" in (out / "report.md").read_text()


def test_whatif_notes_a_history_busier_than_the_configuration(inputs):
    # One 4-GPU node instead of two: job 3 (8 GPUs) fits no node and is refused, and the
    # record kept more GPUs busy than the 4 there are (jobs 1 and 2, 4 GPUs each, ran
    # together from 1 to 31 s), so the utilisation of the record is above 1 and the
    # notes say that the configuration may not be the history's.
    (inputs / "slurm.conf").write_text(CONF.replace("n[1-2]", "n1"))
    outcome = ss.whatif(inputs / "hist.txt", inputs / "slurm.conf", ["slurm"])
    assert outcome.summaries["recorded"]["gpu_utilization"] > 1
    assert any("more GPUs busy than the configuration has" in n for n in outcome.notes)
    assert any(n.startswith("slurm: 1 job(s) refused") and "(job 3)" in n for n in outcome.notes)


def test_whatif_reads_times_in_the_sites_zone(inputs):
    # Europe/Berlin jumps from 02:00 to 03:00 on 2024-03-31: a job recorded 01:59:00 to
    # 03:01:00 ran 2 minutes there (120 s), 62 minutes if the times are read as UTC.
    history = (
        "JobID|Partition|Submit|Start|End|State|AllocTRES\n"
        "1|gpu|2024-03-31T01:59:00|2024-03-31T01:59:00|2024-03-31T03:01:00|COMPLETED|cpu=1,gres/gpu=1\n"
    )
    (inputs / "dst.txt").write_text(history)
    berlin = ss.whatif(inputs / "dst.txt", inputs / "slurm.conf", ["fifo"], zone="Europe/Berlin")
    utc = ss.whatif(inputs / "dst.txt", inputs / "slurm.conf", ["fifo"])
    assert berlin.summaries["recorded"]["avg_jct"] == 120 and utc.summaries["recorded"]["avg_jct"] == 3720
    files = ["--sacct", str(inputs / "dst.txt"), "--slurm-conf", str(inputs / "slurm.conf")]
    result = CliRunner().invoke(app, ["whatif", *files, "--zone", "Mars/Olympus", "--out", str(inputs / "w")])
    assert result.exit_code == 2 and "unknown time zone 'Mars/Olympus'" in result.output
    assert "Traceback" not in result.output and not (inputs / "w" / "comparison.csv").exists()


def test_rejection_notes_name_ten_reasons_and_sum_the_rest():
    # 12 jobs refused for 12 different reasons (one each): ten lines name them, one line
    # sums the other two.
    from shapeshift.engine.engine import Rejection
    from shapeshift.slurm.whatif import rejection_notes

    lines = rejection_notes("slurm", [Rejection(str(i), f"reason {i}") for i in range(12)])
    assert len(lines) == 11 and lines[0] == "slurm: 1 job(s) refused: reason 0 (job 0)"
    assert lines[-1] == "slurm: 2 more job(s) refused for 2 other reason(s)"
