"""The sacct reader's column-at-a-time path, for the common history.

A history of plain jobs and their steps (``123``, ``123.batch``, ``123.0``), each job
listed once, with times in the plain form sacct prints (``YYYY-MM-DDTHH:MM:SS`` or
``Unknown``/``None``) and no zone to apply, is read by pyarrow's CSV parser and turned
into the same columns the per-row reader (``sacct.py``) gives, by array operations: a
history of a million jobs is parsed in C instead of row by row in Python. The text
fields that repeat (users, accounts, TRES strings, limits, run times) are read once per
distinct value with the per-row reader's own parsers.

Anything else, or anything the per-row reader would refuse (array records, requeued
attempts, heterogeneous jobs, a row of the wrong width, a field with spaces around it,
a time or TRES it cannot read, a run past the longest allowed), makes ``read_columns``
answer ``None``: the per-row reader then reads the whole file, so its rules and its
error lines (file, line, field) stay the only ones.
"""

from __future__ import annotations

import math
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from shapeshift.errors import InputError
from shapeshift.workloads.readers.sacct_fields import (
    NO_TIME,
    Tres,
    base_state,
    parse_duration,
    parse_limit,
    parse_tres,
)
from shapeshift.workloads.readers.table import MAX_SECONDS, open_text

if TYPE_CHECKING:
    import pyarrow as pa

#: Bytes of text the CSV parser reads at a time (each block is one chunk of every column).
BLOCK = 1 << 24
#: The fields a job is read from (``sacct._Jobs._values``).
_READ = (
    "JobID", "Submit", "Eligible", "Start", "End", "Elapsed", "Timelimit", "State", "User", "Account", "Partition",
    "QOS", "JobName", "AllocTRES", "ReqTRES", "Priority",
)  # fmt: skip
#: The plain time form, digits and separators in place (RE2 syntax).
_PLAIN_TIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$"
#: Days before each month in a common year (``_civil_days``).
_MONTH_START = np.array([0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334], dtype=np.int64)
_MONTH_DAYS = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


class _Other(Exception):
    """The history is not one this path reads: the per-row reader reads it."""


def read_columns(
    path: Path, header: list[str], trailing: bool, zone: tzinfo | None
) -> tuple[dict[str, object], float, dict[str, int]] | None:
    """The kept jobs' columns and the origin, as ``_Jobs.frame`` gives them, and the
    counts of ``SacctNotes`` (steps folded, never started, not ended); ``None`` when the
    per-row reader must read the file. ``header`` and ``trailing`` are the per-row
    reader's reading of the header."""
    if zone is not None:
        return None
    import pyarrow as pa

    try:
        table = _table(path, header, trailing)
        if table is None:
            return None
        return _columns(table, header)
    except _Other:
        return None
    finally:
        # The parsed text is dropped by now: its memory goes back before the replay grows.
        pa.default_memory_pool().release_unused()


def _table(path: Path, header: list[str], trailing: bool) -> pa.Table | None:
    import pyarrow as pa
    from pyarrow import csv

    try:
        with open_text(path) as handle:
            data = handle.buffer.read()
    except (OSError, EOFError, InputError):
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    # The header is the first line with something in it.
    start = 0
    while True:
        end = data.find(b"\n", start)
        line = data[start:] if end < 0 else data[start:end]
        if line.strip():
            break
        if end < 0:
            return None
        start = end + 1
    try:
        text = line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        return None
    names = [h.strip() for h in text.split("|")]
    if trailing:
        names = names[:-1]
    if names != header or "\r" in text:
        return None
    body = pa.py_buffer(data)[len(data) if end < 0 else end + 1 :]
    if data.find(b"\r", end + 1 if end >= 0 else len(data)) >= 0:
        return None  # lines ended by '\r': left to the per-row reader's reading of lines
    columns = [f"c{i}" for i in range(len(header) + trailing)]
    # Only the fields a job is read from are converted (every row's width is still checked).
    at = {name: i for i, name in enumerate(header)}
    used = sorted({at[name] for name in _READ if name in at}) + ([len(header)] if trailing else [])
    try:
        return csv.read_csv(
            pa.BufferReader(body),
            read_options=csv.ReadOptions(column_names=columns, use_threads=False, block_size=BLOCK),
            parse_options=csv.ParseOptions(delimiter="|", quote_char=False, escape_char=False),
            convert_options=csv.ConvertOptions(
                column_types={c: pa.string() for c in columns},
                include_columns=[columns[i] for i in used],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowException):
        return None


def _columns(table: pa.Table, header: list[str]) -> tuple[dict[str, object], float, dict[str, int]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    at = {name: f"c{i}" for i, name in enumerate(header)}
    extra = f"c{len(header)}"
    if extra in table.column_names and pc.any(pc.not_equal(table.column(extra), "")).as_py():
        raise _Other  # the trailing '|' had a field after it
    if table.num_rows == 0:
        raise _Other

    ids = table.column(at["JobID"])
    job = pc.match_substring_regex(ids, r"^[0-9]+$")
    step = pc.match_substring_regex(ids, r"^[0-9]+\.")
    if not pc.all(pc.or_(job, step)).as_py():
        raise _Other  # arrays, heterogeneous jobs, spaces or a job id the per-row reader reads
    notes_steps = table.num_rows - int(pc.sum(job).as_py() or 0)
    jobs = table.filter(job)
    del table
    n = jobs.num_rows
    if n == 0:
        raise _Other
    job_ids = jobs.column(at["JobID"])
    if pc.count_distinct(job_ids).as_py() != n:
        raise _Other  # a requeued job's attempts

    def col(name: str) -> pa.ChunkedArray | None:
        i = at.get(name)
        return None if i is None else jobs.column(i)

    submit, submit_none = _times(col("Submit"), n)
    if submit_none.any():
        raise _Other
    eligible, eligible_none = _times(col("Eligible"), n)
    start, start_none = _times(col("Start"), n)
    end, end_none = _times(col("End"), n)
    never = start_none
    not_ended = ~start_none & end_none
    kept = ~never & ~not_ended
    if not kept.any():
        raise _Other
    # Checks of the per-row reader on a kept job (only the last attempt of each).
    if (end[kept] < start[kept]).any() or (end[kept] - start[kept] > MAX_SECONDS).any():
        raise _Other
    sel = np.flatnonzero(kept)
    take = pa.array(sel)
    jobs = jobs.take(take)
    submit, eligible, eligible_none, start, end = (
        submit[sel], eligible[sel], eligible_none[sel], start[sel], end[sel],
    )  # fmt: skip

    alloc = _per_value(col("AllocTRES"), _tres, len(sel))
    req = _per_value(col("ReqTRES"), _tres, len(sel))
    a_gpus, a_cpus, a_mem = alloc
    r_gpus, r_cpus, r_mem = req
    gpus = np.where(np.isnan(a_gpus), np.nan_to_num(r_gpus, nan=0.0), a_gpus).astype(np.int64)
    cpus = np.where(np.isnan(a_cpus), np.nan_to_num(r_cpus, nan=0.0), a_cpus)
    mem = np.where(np.isnan(a_mem), np.nan_to_num(r_mem, nan=0.0), a_mem)
    (limit,) = _per_value(col("Timelimit"), _limit, len(sel))
    run = end - start
    if "Elapsed" in at:
        (elapsed,) = _per_value(col("Elapsed"), _elapsed, len(sel))
        duration = np.where(np.isnan(elapsed), np.round(run), elapsed)
    else:
        duration = np.round(run)
    (priority,) = _per_value(col("Priority"), _priority, len(sel))

    ready = np.where(eligible_none, submit, np.maximum(submit, eligible))
    # Slurm records a start before eligibility only for clock skew (as ``_Jobs.frame``).
    ready = np.minimum(ready, start)
    origin = float(ready.min())
    submit_time = np.round(ready - origin)
    start_time = np.round(start - origin)
    out: dict[str, object] = {
        "job_id": job_ids.take(take).to_pylist(),
        "submit_time": submit_time,
        "num_gpus": gpus,
        "duration": duration,
        "name": _text(col("JobName"), len(sel)),
        "user": _text(col("User"), len(sel)),
        "vc": _text(col("Partition"), len(sel)),
        "tenant": _text(col("Account"), len(sel)),
        "num_cpus": cpus,
        "mem_gb": mem,
        "cpu_only": gpus == 0,
        "state": _text(col("State"), len(sel), base_state),
        "start_time": start_time,
        "end_time": np.round(end - origin),
        "time_limit": limit,
        "qos": _text(col("QOS"), len(sel)),
        "attempts": np.ones(len(sel), dtype=np.int64),
        "priority": priority,
    }
    types = _text(col("ReqTRES"), len(sel), _asked_type)
    if any(types):  # left out where no job asked for a GPU type (as the per-row reader)
        out["gpu_types"] = types
    out["queue"] = start_time - submit_time
    counts = {"steps_folded": notes_steps, "never_started": int(never.sum()), "not_ended": int(not_ended.sum())}
    return out, origin, counts


def _times(values: pa.ChunkedArray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """POSIX seconds of a time column (read as UTC) and where it is ``Unknown``/``None``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if values is None:
        return np.zeros(n), np.ones(n, dtype=bool)
    plain = pc.match_substring_regex(values, _PLAIN_TIME)
    none = np.zeros(n, dtype=bool)
    if not pc.all(plain).as_py():
        odd = np.flatnonzero(~plain.to_numpy(zero_copy_only=False))
        for i, text in zip(odd, values.take(pa.array(odd)).to_pylist(), strict=True):
            if text.strip().lower() not in NO_TIME:
                raise _Other  # another form of time, or one the per-row reader refuses
            none[i] = True
        values = pc.if_else(plain, values, "1970-01-01T00:00:00")
    digits = _fixed(values, 19)
    d = digits.astype(np.int64) - 48
    year = d[:, 0] * 1000 + d[:, 1] * 100 + d[:, 2] * 10 + d[:, 3]
    month = d[:, 5] * 10 + d[:, 6]
    day = d[:, 8] * 10 + d[:, 9]
    hour = d[:, 11] * 10 + d[:, 12]
    minute = d[:, 14] * 10 + d[:, 15]
    second = d[:, 17] * 10 + d[:, 18]
    if ((year < 1) | (month < 1) | (month > 12) | (hour > 23) | (minute > 59) | (second > 59)).any():
        raise _Other
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    if ((day < 1) | (day > _MONTH_DAYS[month] + (leap & (month == 2)))).any():
        raise _Other
    seconds = _civil_days(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    return seconds.astype(np.float64), none


def _civil_days(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days from 1970-01-01 of valid proleptic Gregorian dates."""
    y = year - 1
    before = y * 365 + y // 4 - y // 100 + y // 400  # days of the years before, from 0001-01-01
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    in_year = _MONTH_START[month] + (leap & (month > 2)) + day - 1
    return before + in_year - 719162  # 719162: days from 0001-01-01 to 1970-01-01


def _fixed(values: pa.ChunkedArray, width: int) -> np.ndarray:
    """An ``(n, width)`` byte matrix of a string column whose values all have ``width``
    bytes (checked by the caller's pattern)."""
    parts = []
    for chunk in values.chunks:
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1, offset=4 * chunk.offset)
        first, last = int(offsets[0]), int(offsets[-1])
        if last - first != width * len(chunk):
            raise _Other
        data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8, count=last - first, offset=first)
        parts.append(data.reshape(len(chunk), width))
    if not parts:
        return np.zeros((0, width), dtype=np.uint8)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _per_value(values: pa.ChunkedArray | None, read, n: int) -> tuple[np.ndarray, ...]:
    """``read(text)`` of each row's value (a tuple of floats, ``nan`` for none), computed
    once per distinct value; ``read`` raises ``_Other`` for a value the per-row reader
    refuses. A column the header lacks reads as ``""`` on every row."""

    if values is None:
        return tuple(np.full(n, v, dtype=np.float64) for v in read(""))
    distinct, codes = _distinct(values)
    answers = [read(text) for text in distinct]
    table = np.array(answers, dtype=np.float64).reshape(len(answers), -1)
    return tuple(table[codes, k] for k in range(table.shape[1]))


def _distinct(values: pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """A column's distinct values and each row's position among them (one value set for
    every chunk, so the positions agree across chunks)."""
    import pyarrow.compute as pc

    distinct = pc.unique(values)
    codes = pc.index_in(values, value_set=distinct)
    return distinct.to_pylist(), np.asarray(codes.to_numpy(), dtype=np.intp)


def _text(values: pa.ChunkedArray | None, n: int, read=None) -> list[str]:
    """A text column's values, stripped (and passed through ``read``), one string object
    per distinct value; ``""`` for a column the header lacks."""

    if values is None:
        return [read("") if read else ""] * n
    distinct, codes = _distinct(values)
    texts = [t.strip() for t in distinct]
    if read is not None:
        texts = [read(t) for t in texts]
    return [texts[c] for c in codes.tolist()]


def _tres(text: str) -> tuple[float, float, float]:
    text = text.strip()
    if not text:
        t = _NO_TRES
    else:
        try:
            t = parse_tres(text)
        except ValueError:
            raise _Other from None
    if t.gpus is not None and t.gpus > 2**53:
        raise _Other  # not exact as a float: the per-row reader keeps the integer
    nan = math.nan
    return (
        nan if t.gpus is None else float(t.gpus),
        nan if t.cpus is None else float(t.cpus),
        nan if t.mem_gb is None else float(t.mem_gb),
    )


_NO_TRES = Tres()


def _asked_type(text: str) -> str:
    """The GPU type a ``ReqTRES`` asks for (``""``: none), as the per-row reader reads it."""
    return parse_tres(text).gpu_type if text else ""  # a bad one was refused by ``_tres``


def _limit(text: str) -> tuple[float]:
    try:
        limit = parse_limit(text.strip())
    except ValueError:
        raise _Other from None
    return (math.nan if limit is None else float(limit),)


def _elapsed(text: str) -> tuple[float]:
    text = text.strip()
    if not text:
        return (math.nan,)
    try:
        return (float(parse_duration(text)),)
    except ValueError:
        raise _Other from None


def _priority(text: str) -> tuple[float]:
    text = text.strip()
    try:
        return (float(text) if text.isdigit() else math.nan,)
    except ValueError:
        raise _Other from None
