"""Slurm accounting history: ``sacct --parsable2 --allusers --duplicates`` output.

What a replay needs from each job, and how the rows become one job each:

* the header names the fields, in any order (``--format`` picks them); ``JobID``,
  ``Submit``, ``Start``, ``End`` and ``State`` are required, the rest optional;
* job steps (``123.batch``, ``123.extern``, ``123.0``) fold into their job: only the
  job's own row carries its request and times;
* an array job is one job per task (``123_4``); a pending array record ``123_[5-9%2]``
  stands for its tasks, which have not started;
* heterogeneous jobs (``123+0``) are left out, counted in the notes with the line of the
  first: their components start together, which a one-allocation job cannot express;
* a requeued job (``--duplicates`` lists each attempt) is counted once: submitted at its
  first submission, with the times of its last attempt and ``attempts`` set;
* jobs that never started (``Start`` ``Unknown``/``None``) or had not ended (``End``
  ``Unknown``) have no run time to replay; they are left out and counted in the notes;
* times are whole seconds from the earliest submission; ``Eligible`` (when later than
  ``Submit``) is when the job could first start, so the replay submits it then;
* GPUs come from ``AllocTRES`` (what the job got) or else ``ReqTRES`` (``gres/gpu=N``
  or ``gres/gpu:TYPE=N``), CPUs and memory likewise; a job without GPUs is kept as
  ``cpu_only``, like the Helios logs' CPU jobs;
* a GPU type the job asked for (``ReqTRES`` ``gres/gpu:TYPE=N``, from ``--gres=gpu:TYPE:N``)
  is its ``gpu_types`` constraint, so the replay places it only on nodes of that type as
  Slurm did; ``AllocTRES`` names the type the job got even when it asked for none, so it
  is no constraint;
* the recorded ``Start``/``End``, ``State``, ``Timelimit`` (seconds; blank when
  ``UNLIMITED``/``Partition_Limit``), ``QOS`` and ``Priority`` stay beside each job.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import tzinfo
from functools import lru_cache
from pathlib import Path

from shapeshift.errors import InputError
from shapeshift.workloads.readers.sacct_fast import read_columns
from shapeshift.workloads.readers.sacct_fields import (
    Tres,
    base_state,
    parse_duration,
    parse_job_id,
    parse_limit,
    parse_time,
    parse_tres,
)
from shapeshift.workloads.readers.table import MAX_SECONDS, open_text
from shapeshift.workloads.workload import Workload

#: Fields every sacct history needs (the detector looks for them in a ``|`` header).
SACCT_COLUMNS = ("JobID", "Submit", "Start", "End", "State")
_TIMES = ("Submit", "Eligible", "Start", "End")


@dataclass
class SacctNotes:
    """What the reader did besides reading: jobs it left out and why, attempts folded."""

    never_started: int = 0
    not_ended: int = 0
    steps_folded: int = 0
    requeued: int = 0
    array_tasks: int = 0
    #: Heterogeneous jobs left out: job id -> the line of its first row.
    heterogeneous: dict[str, int] = field(default_factory=dict)
    #: The wall-clock time (Unix seconds) of time 0, the earliest submission.
    origin: float = 0.0
    examples: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = []
        if self.never_started:
            out.append(f"{self.never_started} job(s) never started (Start Unknown/None): left out")
        if self.not_ended:
            out.append(f"{self.not_ended} job(s) had not ended (End Unknown): left out")
        if self.heterogeneous:
            first = next(iter(self.heterogeneous.items()))
            out.append(
                f"{len(self.heterogeneous)} heterogeneous job(s) left out (their components start together, which "
                f"one allocation cannot express): job {first[0]} at line {first[1]} first"
            )
        if self.requeued:
            out.append(f"{self.requeued} requeued job(s) counted once with their attempts")
        return out


#: Columns of one job, in the reader's column lists (``_Columns``).
_OUT = (
    "job_id", "submit_time", "num_gpus", "duration", "name", "user", "vc", "tenant", "num_cpus", "mem_gb",
    "cpu_only", "state", "start_time", "end_time", "time_limit", "qos", "attempts", "priority", "gpu_types",
)  # fmt: skip


#: The values of a job whose attempt could not be read (its problem is kept instead).
_NONE = (None,) * len(_OUT)


class _Fields:
    """One row's fields by name (``""`` for a field the header lacks), and its line."""

    __slots__ = ("at", "fields", "line")

    def __init__(self, at: dict[str, int], fields: list[str], line: int):
        self.at, self.fields, self.line = at, fields, line

    def get(self, column: str) -> str:
        i = self.at.get(column)
        return "" if i is None else self.fields[i]


def _header(path: Path, number: int, text: str) -> tuple[list[str], bool]:
    header = [h.strip() for h in text.rstrip("\r\n").split("|")]
    trailing = header[-1] == ""  # --parsable ends every line with '|'
    if trailing:
        header = header[:-1]
    missing = [c for c in SACCT_COLUMNS if c not in header]
    if missing:
        raise InputError(
            f"missing sacct field(s) {', '.join(missing)}; found: {', '.join(header)}. "
            "Export with sacct --parsable2 --format=JobID,Submit,Start,End,State,...",
            path=str(path),
            line=number,
            field=missing[0],
        )
    return header, trailing


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The file's non-blank lines with their numbers, read as they are used (a history of
    millions of rows is never held whole)."""
    if not path.exists():
        raise InputError("sacct file not found", path=str(path))
    try:
        with open_text(path) as handle:
            for number, text in enumerate(handle, start=1):
                if text and not text.isspace():
                    yield number, text
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from None


def read_sacct(path: str | Path, zone: tzinfo | None = None) -> Workload:
    """Read an ``sacct --parsable2`` history (see the module docstring for the rules)."""
    return read_sacct_notes(path, zone)[0]


def read_sacct_notes(path: str | Path, zone: tzinfo | None = None) -> tuple[Workload, SacctNotes]:
    """``read_sacct`` plus what it left out and folded (for a report).

    A history of plain jobs and their steps is read column by column (``sacct_fast``);
    any other is read here, one row at a time: a step row is counted and dropped, a job row becomes its
    job's values in column lists at once (a later attempt of the same job overwrites
    them), so memory grows with the jobs, not with the rows and their text."""
    import pandas as pd

    path = Path(path)
    lines = _lines(path)
    first = next(lines, None)
    if first is None:
        raise InputError("file is empty", path=str(path))
    header, trailing = _header(path, *first)
    lines.close()
    notes = SacctNotes()
    columns = read_columns(path, header, trailing, zone)
    if columns is not None:  # the common history, read column by column (``sacct_fast``)
        frame, notes.origin, counts = columns
        for name, count in counts.items():
            setattr(notes, name, count)
        return Workload.from_frame(path.stem, pd.DataFrame(frame)), notes
    lines = _lines(path)
    next(lines)
    at = {name: i for i, name in enumerate(header)}
    width = len(header)
    job_at = at["JobID"]
    jobs = _Jobs(path, header, zone)
    for number, text in lines:
        fields = text.rstrip("\r\n").split("|")
        if trailing and fields and fields[-1] == "":
            fields = fields[:-1]
        if len(fields) != width:
            raise InputError(f"expected {width} '|'-separated fields, got {len(fields)}", path=str(path), line=number)
        job_text = fields[job_at].strip()
        head, dot, _ = job_text.partition(".")
        if dot and head.isdigit():  # a step of a plain job: the common case, read no further
            notes.steps_folded += 1
            continue
        if job_text.isdigit():  # a plain job's own row, the other common case
            jobs.add(job_text, _Fields(at, [f.strip() for f in fields], number))
            continue
        try:
            jid = parse_job_id(job_text)
        except ValueError as exc:
            raise InputError(str(exc), path=str(path), line=number, field="JobID") from None
        if jid.het:  # left out, each job once (its components and their steps share its id)
            het_job = jid.job.partition("+")[0]
            if het_job not in notes.heterogeneous:
                notes.heterogeneous[het_job] = number
            continue
        if jid.step:
            notes.steps_folded += 1
            continue
        row = _Fields(at, [f.strip() for f in fields], number)
        keys = [f"{jid.job}_{t}" for t in jid.array_tasks] if jid.array_tasks else [jid.job]
        notes.array_tasks += len(jid.array_tasks)
        for key in keys:
            jobs.add(key, row)
    frame, origin = jobs.frame(notes)
    notes.origin = origin
    return Workload.from_frame(path.stem, pd.DataFrame(frame)), notes


class _Jobs:
    """Each job's values as it is read: column lists (``_OUT``), one position per job in
    order of first appearance; an attempt overwrites its job's earlier one, keeping the
    earliest submission. A problem in an attempt a later one replaces is no problem (only
    the last attempt counts), so the last attempt's is raised at the end."""

    def __init__(self, path: Path, header: list[str], zone: tzinfo | None):
        self.path, self.zone = path, zone
        self.has_elapsed = "Elapsed" in header
        self.slot: dict[str, int] = {}
        self.columns: dict[str, list] = {c: [] for c in _OUT}
        self.lists = list(self.columns.values())  # the same lists, in ``_OUT`` order
        self.count: list[int] = []
        self.submit: list[float] = []
        self.problem: dict[int, InputError] = {}
        self._text: dict[str, str] = {}  # one copy of each repeated name (user, account, ...)

    def _same(self, text: str) -> str:
        return self._text.setdefault(text, text)

    def add(self, key: str, row: _Fields) -> None:
        submit = _time(self.path, row, "Submit", self.zone)
        if submit is None:
            raise InputError("Submit must be a time", path=str(self.path), line=row.line, field="Submit")
        slot = self.slot.get(key)
        if slot is None:  # a job's first attempt (the common case): its values appended
            slot = self.slot[key] = len(self.count)
            self.count.append(1)
            self.submit.append(submit)
            try:
                values = self._values(key, row)
            except InputError as exc:
                self.problem[slot] = exc
                values = _NONE
            for column, value in zip(self.lists, values, strict=True):
                column.append(value)
            return
        self.count[slot] += 1
        self.submit[slot] = min(self.submit[slot], submit)
        self.problem.pop(slot, None)
        try:
            values = self._values(key, row)
        except InputError as exc:
            self.problem[slot] = exc
            return
        for column, value in zip(self.lists, values, strict=True):
            column[slot] = value

    def _values(self, key: str, row: _Fields) -> tuple:
        """The ``_OUT`` values of one attempt (``submit_time``: its ``Eligible``)."""
        path, zone, same = self.path, self.zone, self._same
        try:
            eligible = _time(path, row, "Eligible", zone)
        except InputError as exc:  # read only when the job has one attempt (``frame``)
            eligible = exc
        start = _time(path, row, "Start", zone)
        end = _time(path, row, "End", zone)
        if start is None or end is None:  # left out: nothing else of it is read
            kept = {"submit_time": eligible, "start_time": start, "end_time": end}
            return tuple(kept.get(c) for c in _OUT)
        if end < start:
            raise InputError("End is before Start", path=str(path), line=row.line, field="End")
        alloc = _tres(path, row, "AllocTRES")
        req = _tres(path, row, "ReqTRES")
        limit_text = row.get("Timelimit")
        try:
            limit = parse_limit(limit_text)
        except ValueError as exc:
            raise InputError(
                f"cannot read {limit_text!r}: {exc}", path=str(path), line=row.line, field="Timelimit"
            ) from None
        run = end - start
        if run > MAX_SECONDS:
            raise InputError(
                f"run time {run:g} s is beyond {MAX_SECONDS:g} s", path=str(path), line=row.line, field="End"
            )
        duration = float(_elapsed(path, row, run)) if self.has_elapsed else float(round(run))
        gpus = alloc.gpus if alloc.gpus is not None else (req.gpus or 0)
        priority = row.get("Priority")
        return (
            key,
            eligible,
            int(gpus),
            duration,
            same(row.get("JobName")),
            same(row.get("User")),
            same(row.get("Partition")),
            same(row.get("Account")),
            float(alloc.cpus if alloc.cpus is not None else (req.cpus or 0.0)),
            float(alloc.mem_gb if alloc.mem_gb is not None else (req.mem_gb or 0.0)),
            gpus == 0,
            same(_state(row.get("State"))),
            start,
            end,
            math.nan if limit is None else float(limit),
            same(row.get("QOS")),
            0,
            float(priority) if priority.isdigit() else math.nan,
            same(req.gpu_type),  # asked for: the job's constraint (AllocTRES's is what it got)
        )

    def frame(self, notes: SacctNotes) -> tuple[dict[str, list], float]:
        """The kept jobs' columns (times from the earliest submission) and that time."""
        columns, starts, ends = self.columns, self.columns["start_time"], self.columns["end_time"]
        keep = []
        eligibles = columns["submit_time"]
        for slot, count in enumerate(self.count):
            if count == 1 and isinstance(eligibles[slot], InputError):
                raise eligibles[slot]
            if slot in self.problem:
                raise self.problem[slot]
            if starts[slot] is None:
                notes.never_started += 1
                continue
            if ends[slot] is None:
                notes.not_ended += 1
                continue
            if count > 1:
                notes.requeued += 1
            keep.append(slot)
        if not keep:
            raise InputError("no job in the file started and ended; nothing to replay", path=str(self.path))
        submits, ready = self.submit, []
        for slot in keep:
            submit, eligible = submits[slot], eligibles[slot] if self.count[slot] == 1 else None
            at = max(submit, eligible) if eligible is not None else submit
            # Slurm records a start before eligibility only for clock skew; the replay
            # cannot start a job before it exists.
            ready.append(min(at, starts[slot]))
        origin = min(ready)
        every = len(keep) == len(self.count)  # the lists themselves, not copies, when all are kept
        out = {c: columns[c] if every else [columns[c][s] for s in keep] for c in _OUT}
        self.columns = {}
        out["submit_time"] = [float(round(t - origin)) for t in ready]
        out["start_time"] = [float(round(t - origin)) for t in out["start_time"]]
        out["end_time"] = [float(round(t - origin)) for t in out["end_time"]]
        out["queue"] = [s - t for s, t in zip(out["start_time"], out["submit_time"], strict=True)]
        out["attempts"] = [self.count[s] for s in keep]
        if not any(out["gpu_types"]):  # no typed request: the column is left out (as ``sacct_fast``)
            del out["gpu_types"]
        return out, origin


#: The last time read: its text, zone and value. A job row's Submit, Eligible and Start
#: are often the same text, read once (one tuple, replaced whole: safe across threads).
_LAST_TIME: tuple[str | None, tzinfo | None, float | None] = (None, None, None)


def _time(path: Path, row: _Fields, column: str, zone: tzinfo | None) -> float | None:
    global _LAST_TIME
    text = row.get(column)
    last = _LAST_TIME
    if text == last[0] and zone is last[1]:
        return last[2]
    try:
        value = parse_time(text, zone)
        _LAST_TIME = (text, zone, value)
        return value
    except ValueError:
        raise InputError(
            f"cannot read time {text!r}; expected YYYY-MM-DDTHH:MM:SS, Unknown or None",
            path=str(path),
            line=row.line,
            field=column,
        ) from None


def _tres(path: Path, row: _Fields, column: str) -> Tres:
    text = row.get(column)
    if not text:
        return _NO_TRES
    try:
        return parse_tres(text)
    except ValueError as exc:
        raise InputError(f"cannot read TRES {text!r}: {exc}", path=str(path), line=row.line, field=column) from None


_NO_TRES = Tres()


@lru_cache(maxsize=256)
def _state(text: str) -> str:
    return base_state(text)


def _elapsed(path: Path, row: _Fields, run: float) -> int:
    text = row.get("Elapsed")
    if not text:
        return round(run)
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise InputError(f"cannot read {text!r}: {exc}", path=str(path), line=row.line, field="Elapsed") from None
