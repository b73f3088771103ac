"""The sacct reader's column-at-a-time path (``sacct_fast``) against its per-row reader.

Each history is read twice, once as the reader reads it and once with the
column-at-a-time path turned off; the workloads (every column, every dtype) and the notes
must be the same, and an error the same line. Histories the fast path must take are
checked to be taken, those it must leave to the per-row reader to be left."""

from __future__ import annotations

import gzip
import math

import pytest

import shapeshift.workloads.readers.sacct as sacct
from shapeshift.errors import InputError
from shapeshift.workloads.readers import sacct_fast
from shapeshift.workloads.readers.sacct import read_sacct_notes
from shapeshift.workloads.readers.sacct_fast import read_columns

HEADER = "JobID|User|Account|Partition|QOS|Submit|Eligible|Start|End|Elapsed|Timelimit|State|ReqTRES|AllocTRES|Priority"
PLAIN = [
    # job 7: eligible 30 s after its submission (10:00:30), runs 10:01:00-10:03:00; Elapsed 2 min.
    "7|alice|phys|gpu|normal|2024-02-28T10:00:00|2024-02-28T10:00:30|2024-02-28T10:01:00|2024-02-28T10:03:00"
    "|00:02:00|00:10:00|COMPLETED|cpu=8,gres/gpu=2,mem=32G,node=1|cpu=8,gres/gpu=2,mem=32G,node=1|4294",
    "7.batch|||||2024-02-28T10:01:00|2024-02-28T10:01:00|2024-02-28T10:01:00|2024-02-28T10:03:00|00:02:00||COMPLETED|||",
    "7.0|||||2024-02-28T10:01:02|2024-02-28T10:01:02|2024-02-28T10:01:02|2024-02-28T10:03:00|00:01:58||COMPLETED|||",
    # job 8: Eligible Unknown, no GPUs (cpu_only), ReqTRES only, blank Elapsed, limit UNLIMITED,
    # crosses the leap day (2024 is a leap year: Feb 29 exists), cancelled "by" a user.
    "8|bob|chem|cpu|high|2024-02-28T23:59:50|Unknown|2024-02-29T00:00:10|2024-03-01T00:00:10"
    "||UNLIMITED|CANCELLED by 1001|cpu=4,mem=500M,node=1||",
    # job 9: never started (Start None), job 10: still running (End Unknown): both left out.
    "9|carol|phys|gpu|normal|2024-02-28T10:00:05|2024-02-28T10:00:05|None|Unknown||1-00:00:00|PENDING|cpu=1,gres/gpu=1||",
    "10|dan|phys|gpu|normal|2024-02-28T10:00:06|2024-02-28T10:00:06|2024-02-28T10:00:07|Unknown||01:00|RUNNING||cpu=2,gres/gpu:a100=1|77",
    # job 11: starts before its recorded eligibility (clock skew): submitted at its start.
    "11|alice|phys|gpu|normal|2024-02-28T10:00:00|2024-02-28T10:05:00|2024-02-28T10:04:00|2024-02-28T10:04:10"
    "|00:00:10|5|FAILED|gres/gpu=1|gres/gpu:v100=4|12",
]


def _write(tmp_path, lines, name="hist.txt", end="\n"):
    path = tmp_path / name
    path.write_text(end.join(lines) + end)
    return path


def _per_row(path):
    """The reader with the column-at-a-time path turned off."""
    saved = sacct.read_columns
    sacct.read_columns = lambda *args: None
    try:
        return read_sacct_notes(path)
    finally:
        sacct.read_columns = saved


def _taken(path) -> bool:
    header, trailing = sacct._header(path, *next(sacct._lines(path)))
    return read_columns(path, header, trailing, None) is not None


def _same(path):
    fast, fast_notes = read_sacct_notes(path)
    slow, slow_notes = _per_row(path)
    assert fast.frame.equals(slow.frame)
    assert list(fast.frame.dtypes) == list(slow.frame.dtypes)
    assert fast_notes == slow_notes
    return fast, fast_notes


def test_plain_history_taken_and_the_same(tmp_path):
    path = _write(tmp_path, [HEADER, *PLAIN])
    assert _taken(path)
    work, notes = _same(path)
    assert set(work.frame["job_id"]) == {"7", "8", "11"}
    assert (notes.never_started, notes.not_ended, notes.steps_folded) == (1, 1, 2)
    # Origin: the earliest ready time, job 7's eligibility at 10:00:30 (job 11 is ready at
    # min(max(10:00, 10:05), 10:04) = 10:04; job 8 at its submission, 23:59:50).
    frame = work.frame.set_index("job_id")
    assert frame.loc["7", "submit_time"] == 0 and frame.loc["11", "submit_time"] == 210
    assert frame.loc["8", "submit_time"] == 13 * 3600 + 59 * 60 + 20  # 10:00:30 -> 23:59:50
    # Job 8 runs 00:00:10 Feb 29 -> 00:00:10 Mar 1: one day, the leap day.
    assert frame.loc["8", "duration"] == 86400 and frame.loc["8", "num_gpus"] == 0 and frame.loc["8", "cpu_only"]
    assert math.isnan(frame.loc["8", "time_limit"]) and frame.loc["8", "state"] == "CANCELLED"
    # AllocTRES over ReqTRES: 4 typed GPUs; a bare limit "5" is minutes.
    assert frame.loc["11", "num_gpus"] == 4 and frame.loc["11", "time_limit"] == 300
    assert frame.loc["11", "priority"] == 12 and frame.loc["7", "duration"] == 120
    assert math.isnan(frame.loc["8", "priority"])


@pytest.mark.parametrize(
    "variant",
    ["crlf", "trailing_bar", "blank_lines", "bom", "gzip", "few_columns", "ragged_trailing"],
)
def test_file_forms_read_the_same(tmp_path, variant):
    lines, end, name = [HEADER, *PLAIN], "\n", "hist.txt"
    if variant == "crlf":
        end = "\r\n"
    elif variant == "trailing_bar":
        lines = [line + "|" for line in lines]
    elif variant == "blank_lines":
        lines = ["", "   ", lines[0], "", *lines[1:], "  "]
    elif variant == "few_columns":  # only the required fields
        lines = ["JobID|Submit|Start|End|State"] + [
            "|".join(f for i, f in enumerate(row.split("|")) if i in (0, 5, 7, 8, 11)) for row in PLAIN
        ]
    elif variant == "ragged_trailing":  # --parsable header, one row without its trailing '|'
        lines = [line + "|" for line in lines]
        lines[1] = lines[1][:-1]
    if variant == "bom":
        path = tmp_path / name
        path.write_bytes(b"\xef\xbb\xbf" + (end.join(lines) + end).encode())
    elif variant == "gzip":
        path = tmp_path / "hist.txt.gz"
        path.write_bytes(gzip.compress((end.join(lines) + end).encode()))
    else:
        path = _write(tmp_path, lines, name, end)
    _same(path)
    if variant in ("trailing_bar", "bom", "gzip", "few_columns"):
        assert _taken(path)


def test_arrays_requeues_and_hetjobs_left_to_the_per_row_reader(tmp_path):
    from tests.workloads.test_sacct import HEADER as FULL_HEADER
    from tests.workloads.test_sacct import ROWS

    path = _write(tmp_path, [FULL_HEADER, *ROWS], "arrays.txt")
    assert not _taken(path)  # array tasks and a requeued job
    _same(path)
    requeued = _write(tmp_path, [HEADER, *PLAIN, PLAIN[0].replace("10:00:00", "10:00:01", 1)], "requeued.txt")
    assert not _taken(requeued)
    _, notes = _same(requeued)
    assert notes.requeued == 1


@pytest.mark.parametrize(
    ("row", "column", "value"),
    [
        (0, "Start", "2024-02-30T10:01:00"),  # no Feb 30
        (0, "Start", "2023-02-29T10:01:00"),  # 2023 is not a leap year
        (0, "Start", "2024-02-28T24:01:00"),
        (0, "Start", " 2024-02-28T10:01:00"),  # spaces: stripped by the per-row reader
        (0, "Start", "2024-02-28T10:01:00+01:00"),  # an offset
        (0, "Submit", "Unknown"),
        (0, "Eligible", "soon"),
        (4, "Eligible", "soon"),  # on a job left out
        (0, "End", "2024-02-28T10:00:59"),  # before Start
        (0, "AllocTRES", "cpu"),
        (0, "Timelimit", "x"),
        (0, "Elapsed", "1:2:3:4"),
        (0, "JobID", " 7"),
        (0, "JobID", "7+0"),
        (0, "JobID", "seven"),
        (0, "State", " COMPLETED "),
        (0, "Priority", "00012"),
    ],
)
def test_odd_values_read_or_refused_as_the_per_row_reader_does(tmp_path, row, column, value):
    rows = [r.split("|") for r in PLAIN]
    rows[row][HEADER.split("|").index(column)] = value
    path = _write(tmp_path, [HEADER, *("|".join(r) for r in rows)])
    try:
        expected = _per_row(path)
    except InputError as exc:
        with pytest.raises(InputError) as err:
            read_sacct_notes(path)
        assert str(err.value) == str(exc)
        return
    _same(path)
    assert expected is not None


def test_wrong_width_row_refused_with_its_line(tmp_path):
    path = _write(tmp_path, [HEADER, PLAIN[0], PLAIN[1] + "|extra"])
    with pytest.raises(InputError) as err:
        read_sacct_notes(path)
    assert ":3:" in str(err.value) and "expected 15 '|'-separated fields, got 16" in str(err.value)


def test_no_job_kept_refused(tmp_path):
    path = _write(tmp_path, [HEADER, PLAIN[4], PLAIN[5]])
    with pytest.raises(InputError, match="nothing to replay"):
        read_sacct_notes(path)


def test_many_parser_blocks_read_the_same(tmp_path, monkeypatch):
    # 60 jobs of 7 rows' pattern in 1 KiB blocks: every column comes in many chunks, whose
    # distinct values (users, TRES, limits) must be numbered alike across chunks.
    lines = [HEADER]
    for k in range(60):
        for row in PLAIN:
            job, _, rest = row.partition("|")
            head, dot, step = job.partition(".")
            fields = rest.split("|")
            if fields[0]:
                fields[0] = f"user{k % 7}"
            lines.append("|".join([f"{int(head) + 100 * k}{dot}{step}", *fields]))
    path = _write(tmp_path, lines)
    monkeypatch.setattr(sacct_fast, "BLOCK", 1024)
    assert _taken(path)
    work, notes = _same(path)
    assert len(work) == 180 and notes.steps_folded == 120
    assert sorted(set(work.frame["user"])) == [f"user{k}" for k in range(7)]
