"""A GPU type asked for in the history (``ReqTRES`` ``gres/gpu:TYPE=N``) constrains the
replay's placement, as ``--gres=gpu:TYPE:N`` constrains Slurm's; the type in
``AllocTRES`` (what the job got) does not."""

from __future__ import annotations

from shapeshift.cluster import load_cluster
from shapeshift.runs.facade import simulate
from shapeshift.workloads.readers import read_sacct

CONF = """\
NodeName=a1 CPUs=16 RealMemory=64000 Gres=gpu:a100:4
NodeName=v1 CPUs=16 RealMemory=64000 Gres=gpu:v100:4
PartitionName=gpu Nodes=ALL Default=YES
SchedulerParameters=bf_interval=1,bf_resolution=1,sched_interval=1
"""
# One A100 node, one V100 node, 4 GPUs each. Job 1 asks for 4 A100s at 0 and runs 100 s.
# Job 2 asks for 4 A100s at 10 (50 s): the V100 node is free, but Slurm does not give it
# V100s, so it waits for job 1's end and starts at 100. Job 3 asks for 4 GPUs of any type
# at 20 (its AllocTRES names the type it got, its ReqTRES none): it starts at once on the
# V100 node.
HISTORY = """\
JobID|Partition|Submit|Start|End|Timelimit|State|ReqTRES|AllocTRES
1|gpu|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:40|00:05:00|COMPLETED|cpu=1,gres/gpu:a100=4,gres/gpu=4|cpu=1,gres/gpu:a100=4,gres/gpu=4
2|gpu|2024-01-01T00:00:10|2024-01-01T00:01:40|2024-01-01T00:02:30|00:05:00|COMPLETED|cpu=1,gres/gpu:a100=4,gres/gpu=4|cpu=1,gres/gpu:a100=4,gres/gpu=4
3|gpu|2024-01-01T00:00:20|2024-01-01T00:00:20|2024-01-01T00:01:20|00:05:00|COMPLETED|cpu=1,gres/gpu=4|cpu=1,gres/gpu:v100=4,gres/gpu=4
"""


def _history(tmp_path, text=HISTORY):
    (tmp_path / "slurm.conf").write_text(CONF)
    path = tmp_path / "hist.txt"
    path.write_text(text)
    return path


def test_the_asked_type_is_the_jobs_constraint(tmp_path):
    jobs = {j.job_id: j for j in read_sacct(_history(tmp_path)).jobs()}
    assert jobs["1"].gpu_types == {"a100"} and jobs["2"].gpu_types == {"a100"}
    assert jobs["3"].gpu_types == frozenset()  # AllocTRES's type is what it got, not asked


def test_the_replay_waits_for_the_asked_type(tmp_path):
    result = simulate(read_sacct(_history(tmp_path)), load_cluster(tmp_path / "slurm.conf"), "slurm")
    start = dict(zip(result.jobs["job_id"], result.jobs["first_start_time"], strict=True))
    assert start == {"1": 0.0, "2": 100.0, "3": 20.0}


def test_the_row_by_row_reader_reads_the_type_the_same_way(tmp_path):
    # A requeued attempt sends the history to the row-by-row reader: job 2 listed twice
    # (the first attempt's row first), the last attempt's times kept.
    rows = HISTORY.splitlines()
    requeued = rows[2].replace("|COMPLETED|", "|REQUEUED|").replace("00:02:30", "00:01:50")
    text = "\n".join([*rows[:2], requeued, *rows[2:]]) + "\n"
    jobs = {j.job_id: j for j in read_sacct(_history(tmp_path, text)).jobs()}
    assert jobs["2"].gpu_types == {"a100"} and jobs["3"].gpu_types == frozenset()


def test_a_history_without_typed_requests_has_no_constraints(tmp_path):
    text = HISTORY.replace("gres/gpu:a100=4,", "")
    jobs = read_sacct(_history(tmp_path, text)).jobs()
    assert all(not j.gpu_types for j in jobs)


def test_whatif_survives_a_replay_that_refuses_every_job(tmp_path):
    # Every job asks for H100s, which no node has: each replay refuses all three (a
    # replay with no start at all), and whatif says so instead of failing.
    import shapeshift as ss

    text = HISTORY.replace("gres/gpu:a100=4", "gres/gpu:h100=4")
    path = _history(tmp_path, text.replace("cpu=1,gres/gpu=4|", "cpu=1,gres/gpu:h100=4,gres/gpu=4|"))
    outcome = ss.whatif(path, tmp_path / "slurm.conf", ["slurm"])
    assert outcome.summaries["slurm"]["jobs_rejected"] == 3
    assert any(n.startswith("slurm: 3 job(s) refused") for n in outcome.notes)


def test_whatif_drops_types_a_configuration_without_types_cannot_match(tmp_path):
    # Gres=gpu:4 names no type: jobs 1 and 2 asked for A100s, which no node is said to
    # be, so the replay places them on any GPU (with a note) rather than refusing them:
    # job 1 on one node at 0, job 2 on the other at 10, job 3 (20 s) when one frees.
    import shapeshift as ss

    path = _history(tmp_path)
    (tmp_path / "slurm.conf").write_text(CONF.replace("gpu:a100:4", "gpu:4").replace("gpu:v100:4", "gpu:4"))
    outcome = ss.whatif(path, tmp_path / "slurm.conf", ["slurm"])
    assert any("2 job(s) asked for a GPU type (a100)" in n for n in outcome.notes)
    assert dict(zip(outcome.starts["job_id"], outcome.starts["slurm"], strict=True)) == {"1": 0, "2": 10, "3": 60}


def test_whatif_matches_the_asked_type_whatever_its_case(tmp_path):
    # sacct spells the type A100, slurm.conf a100: the same type, so job 2 still waits for
    # the A100 node (100 s) as in test_the_replay_waits_for_the_asked_type.
    import shapeshift as ss

    path = _history(tmp_path, HISTORY.replace("gres/gpu:a100=4", "gres/gpu:A100=4"))
    outcome = ss.whatif(path, tmp_path / "slurm.conf", ["slurm"])
    assert dict(zip(outcome.starts["job_id"], outcome.starts["slurm"], strict=True)) == {"1": 0, "2": 100, "3": 20}
