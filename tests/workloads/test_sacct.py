"""The sacct history reader: steps, arrays, requeues, hetjobs, times, TRES, detection."""

from __future__ import annotations

import math
from zoneinfo import ZoneInfo

import pytest

from shapeshift.errors import InputError
from shapeshift.workloads.readers import detect_format, read_sacct, read_sacct_notes, read_workload
from shapeshift.workloads.readers.sacct_fields import expand_ranges, parse_duration, parse_limit, parse_tres

HEADER = (
    "JobID|JobIDRaw|User|Account|Partition|QOS|Submit|Eligible|Start|End|Elapsed|Timelimit|State|NNodes"
    "|ReqTRES|AllocTRES|Priority|ExitCode"
)
ROWS = [
    # job 10: 2 GPUs, waits 60 s, runs 100 s; its steps fold into it.
    "10|10|alice|phys|gpu|normal|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:01:00|2024-03-01T10:02:40|00:01:40|00:05:00|COMPLETED|1|billing=8,cpu=8,gres/gpu=2,mem=32G,node=1|billing=8,cpu=8,gres/gpu=2,mem=32G,node=1|4294|0:0",
    "10.batch|10.batch|||||2024-03-01T10:01:00|2024-03-01T10:01:00|2024-03-01T10:01:00|2024-03-01T10:02:40|00:01:40||COMPLETED|1||cpu=8,gres/gpu=2,mem=32G,node=1||0:0",
    "10.0|10.0|||||2024-03-01T10:01:05|2024-03-01T10:01:05|2024-03-01T10:01:05|2024-03-01T10:02:40|00:01:35||COMPLETED|1||cpu=8,gres/gpu=2,mem=32G,node=1||0:0",
    # array task 11_3: typed GPUs only in ReqTRES, cancelled after 30 s of running.
    "11_3|14|bob|chem|gpu|normal|2024-03-01T10:00:30|2024-03-01T10:00:30|2024-03-01T10:00:30|2024-03-01T10:01:00"
    "|00:00:30|1-00:00:00|CANCELLED by 1001|1|cpu=4,gres/gpu:a100=1,mem=500M,node=1||1000|0:15",
    # pending array tasks 11_[4-5]: never started, left out.
    "11_[4-5%1]|11|bob|chem|gpu|normal|2024-03-01T10:00:30|Unknown|Unknown|Unknown|00:00:00|1-00:00:00|PENDING|1|cpu=4,gres/gpu:a100=1,node=1||1000|0:0",
    # job 12 requeued: first attempt from 10:00:10, last attempt 10:03:00-10:04:00.
    "12|12|carol|phys|gpu|high|2024-03-01T10:00:10|2024-03-01T10:00:10|2024-03-01T10:00:20|2024-03-01T10:01:20|00:01:00|UNLIMITED|REQUEUED|1|cpu=1,gres/gpu=4,node=1|cpu=1,gres/gpu=4,node=1|900|0:0",
    "12|12|carol|phys|gpu|high|2024-03-01T10:02:00|2024-03-01T10:02:00|2024-03-01T10:03:00|2024-03-01T10:04:00|00:01:00|UNLIMITED|COMPLETED|1|cpu=1,gres/gpu=4,node=1|cpu=1,gres/gpu=4,node=1|900|0:0",
    # job 13 still running: left out.
    "13|13|dan|phys|gpu|normal|2024-03-01T10:05:00|2024-03-01T10:05:00|2024-03-01T10:05:00|Unknown|00:10:00|00:30:00|RUNNING|1|cpu=2,gres/gpu=1,node=1|cpu=2,gres/gpu=1,node=1|800|0:0",
]


def _write(tmp_path, lines, name="hist.txt"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sacct_folds_steps_expands_arrays_counts_requeues(tmp_path):
    work, notes = read_sacct_notes(_write(tmp_path, [HEADER, *ROWS]))
    jobs = {j.job_id: j for j in work.jobs()}
    assert set(jobs) == {"10", "11_3", "12"}
    frame = work.frame.set_index("job_id")
    # Origin = the earliest Submit, 10:00:00.
    assert jobs["10"].submit_time == 0 and jobs["10"].duration == 100
    assert (frame.loc["10", "start_time"], frame.loc["10", "end_time"]) == (60, 160)
    # 32G is 32 GiB = 32 * 1024^3 bytes = 34.36 GB (Slurm's suffixes are binary).
    assert jobs["10"].num_gpus == 2 and jobs["10"].num_cpus == 8 and jobs["10"].mem_gb == pytest.approx(34.359738368)
    assert jobs["10"].time_limit == 300 and jobs["10"].qos == "normal"
    assert (jobs["10"].user, jobs["10"].tenant, jobs["10"].vc) == ("alice", "phys", "gpu")
    # Typed GPUs count; 500M = 500 MiB = 0.524288 GB; "CANCELLED by 1001" is CANCELLED; 1 day = 86400 s.
    assert jobs["11_3"].num_gpus == 1 and jobs["11_3"].mem_gb == pytest.approx(0.524288)
    assert frame.loc["11_3", "state"] == "CANCELLED" and jobs["11_3"].time_limit == 86400
    # Requeued: first submission (10 s), last attempt's times (180-240 s), 2 attempts, no limit.
    assert jobs["12"].submit_time == 10 and jobs["12"].duration == 60
    assert (frame.loc["12", "start_time"], frame.loc["12", "attempts"]) == (180, 2)
    assert jobs["12"].time_limit is None
    assert (notes.steps_folded, notes.never_started, notes.not_ended, notes.requeued) == (2, 2, 1, 1)
    assert frame.loc["10", "queue"] == 60


def test_sacct_any_field_order_and_parsable_trailing_bar(tmp_path):
    fields = HEADER.split("|")
    order = list(reversed(range(len(fields))))
    lines = ["|".join(line.split("|")[i] for i in order) + "|" for line in [HEADER, ROWS[0]]]
    work = read_sacct(_write(tmp_path, lines))
    (job,) = work.jobs()
    assert (job.job_id, job.duration, job.num_gpus) == ("10", 100, 2)


def test_sacct_detected_from_header_and_by_format(tmp_path):
    path = _write(tmp_path, [HEADER, ROWS[0]])
    assert detect_format(path) == "sacct"
    assert len(read_workload(path)) == 1
    assert len(read_workload(path, "sacct")) == 1


def test_sacct_leaves_a_hetjob_out_with_its_line(tmp_path):
    # Job 20's two components (20+0, 20+1) and a step of one (20+0.batch) on lines 3-5: one
    # heterogeneous job, left out and noted with its first line; job 10 is read.
    het = ROWS[0].replace("10|10|", "20+0|20|", 1)
    rows = [HEADER, ROWS[0], het, het.replace("20+0|", "20+1|", 1), het.replace("20+0|", "20+0.batch|", 1)]
    workload, notes = read_sacct_notes(_write(tmp_path, rows))
    assert [j.job_id for j in workload.jobs()] == ["10"]
    assert notes.heterogeneous == {"20": 3}
    assert any(line.startswith("1 heterogeneous job(s) left out") and "line 3" in line for line in notes.lines())


@pytest.mark.parametrize(
    ("column", "bad", "message"),
    [
        ("Start", "yesterday", "cannot read time"),
        ("AllocTRES", "gres/gpu", "TRES"),
        ("Timelimit", "1-xx", "cannot read"),
    ],
)
def test_sacct_bad_value_names_line_and_field(tmp_path, column, bad, message):
    fields = HEADER.split("|")
    values = ROWS[0].split("|")
    values[fields.index(column)] = bad
    with pytest.raises(InputError) as err:
        read_sacct(_write(tmp_path, [HEADER, "|".join(values)]))
    assert (err.value.line, err.value.field) == (2, column) and message in err.value.message


def test_sacct_missing_field_and_ragged_row(tmp_path):
    with pytest.raises(InputError) as err:
        read_sacct(_write(tmp_path, ["JobID|Submit|Start|End", "1|x|y|z"]))
    assert err.value.field == "State" and err.value.line == 1
    with pytest.raises(InputError) as err:
        read_sacct(_write(tmp_path, [HEADER, "1|2|3"]))
    assert err.value.line == 2


def test_sacct_offsets_and_zone(tmp_path):
    # 10:00+01:00 is 09:00Z; a naive 09:30 read as UTC is 30 min later.
    lines = [
        "JobID|Submit|Start|End|State",
        "1|2024-03-01T10:00:00+01:00|2024-03-01T10:00:00+01:00|2024-03-01T10:00:10+01:00|COMPLETED",
        "2|2024-03-01T09:30:00|2024-03-01T09:30:00|2024-03-01T09:31:00|COMPLETED",
    ]
    jobs = {j.job_id: j for j in read_sacct(_write(tmp_path, lines)).jobs(include_cpu_only=True)}
    assert jobs["2"].submit_time - jobs["1"].submit_time == 1800
    # Across the Europe/Paris spring-forward (2024-03-31 02:00 -> 03:00): 01:59 to 03:01 is 2 min.
    dst = [
        "JobID|Submit|Start|End|State",
        "1|2024-03-31T01:59:00|2024-03-31T01:59:00|2024-03-31T03:01:00|COMPLETED",
    ]
    (job,) = read_sacct(_write(tmp_path, dst), zone=ZoneInfo("Europe/Paris")).jobs(include_cpu_only=True)
    assert job.duration == 120


def test_sacct_field_parsers():
    assert parse_duration("1-02:03:04") == 93784 and parse_duration("05:06") == 306 and parse_duration("7") == 420
    assert parse_limit("Partition_Limit") is None and parse_limit("UNLIMITED") is None
    tres = parse_tres("cpu=2,mem=1T,node=2,gres/gpu:v100=3,gres/gpu:a100=1")
    assert (tres.gpus, tres.nodes) == (4, 2) and tres.mem_gb == pytest.approx(1024**4 / 1e9)
    assert expand_ranges("1-3,7,10-14:2%4") == (1, 2, 3, 7, 10, 12, 14)
    assert math.isclose(parse_tres("mem=1024").mem_gb, 1.073741824)


def test_only_the_last_attempt_of_a_requeued_job_is_read(tmp_path):
    # Job 12's first attempt carries a TRES string that cannot be read and an End before
    # its Start; the reader keeps the last attempt only (the module docstring's rule), so
    # neither is an error. The same faults in a last attempt are, naming its line (3) and
    # the first fault met (End is checked before the TRES).
    first = ROWS[5].replace("cpu=1,gres/gpu=4,node=1|cpu=1", "gpu|cpu=1").replace("10:01:20", "10:00:00")
    assert first.count("|") == ROWS[5].count("|")
    work = read_sacct(_write(tmp_path, [HEADER, first, ROWS[6]]))
    (job,) = work.jobs()
    assert (job.job_id, job.submit_time, job.num_gpus, job.duration) == ("12", 0, 4, 60)
    with pytest.raises(InputError) as bad:
        read_sacct(_write(tmp_path, [HEADER, ROWS[6], first]))
    assert (bad.value.line, bad.value.field) == (3, "End")


def test_plain_utc_times_read_as_datetime_reads_them(tmp_path):
    # The day-plus-seconds reading of YYYY-MM-DDTHH:MM:SS gives what datetime gives
    # (2024-02-29T23:59:59 UTC is 1709251199), and a time datetime refuses (hour 24)
    # is refused with its field.
    from shapeshift.workloads.readers.sacct_fields import parse_time

    assert parse_time("2024-02-29T23:59:59", None) == 1709251199.0
    assert parse_time("1970-01-01T00:00:01", None) == 1.0
    row = ROWS[0].replace("2024-03-01T10:01:00|2024-03-01T10:02:40", "2024-03-01T24:01:00|2024-03-01T10:02:40", 1)
    with pytest.raises(InputError) as bad:
        read_sacct(_write(tmp_path, [HEADER, row]))
    assert bad.value.field == "Start"
