"""Slurm accounting history: ``sacct --parsable2 --allusers --duplicates`` output.

What a replay needs from each job, and how the rows become one job each:

* the header names the fields, in any order (``--format`` picks them); ``JobID``,
  ``Submit``, ``Start``, ``End`` and ``State`` are required, the rest optional;
* job steps (``123.batch``, ``123.extern``, ``123.0``) fold into their job: only the
  job's own row carries its request and times;
* an array job is one job per task (``123_4``); a pending array record ``123_[5-9%2]``
  stands for its tasks, which have not started;
* heterogeneous jobs (``123+0``) are refused with the line: their components start
  together, which a one-allocation job cannot express;
* a requeued job (``--duplicates`` lists each attempt) is counted once: submitted at its
  first submission, with the times of its last attempt and ``attempts`` set;
* jobs that never started (``Start`` ``Unknown``/``None``) or had not ended (``End``
  ``Unknown``) have no run time to replay; they are left out and counted in the notes;
* times are whole seconds from the earliest submission; ``Eligible`` (when later than
  ``Submit``) is when the job could first start, so the replay submits it then;
* GPUs come from ``AllocTRES`` (what the job got) or else ``ReqTRES`` (``gres/gpu=N``
  or ``gres/gpu:TYPE=N``), CPUs and memory likewise; a job without GPUs is kept as
  ``cpu_only``, like the Helios logs' CPU jobs;
* the recorded ``Start``/``End``, ``State``, ``Timelimit`` (seconds; blank when
  ``UNLIMITED``/``Partition_Limit``), ``QOS`` and ``Priority`` stay beside each job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path

from shapeshift.errors import InputError
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
    #: The wall-clock time (Unix seconds) of time 0, the earliest submission.
    origin: float = 0.0
    examples: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = []
        if self.never_started:
            out.append(f"{self.never_started} job(s) never started (Start Unknown/None): left out")
        if self.not_ended:
            out.append(f"{self.not_ended} job(s) had not ended (End Unknown): left out")
        if self.requeued:
            out.append(f"{self.requeued} requeued job(s) counted once with their attempts")
        return out


@dataclass
class _Row:
    line: int
    values: dict[str, str]
    job: str


def _split(line: str) -> list[str]:
    fields = line.rstrip("\r\n").split("|")
    return fields


def _rows(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    if not path.exists():
        raise InputError("sacct file not found", path=str(path))
    try:
        with open_text(path) as handle:
            lines = [(n, text) for n, text in enumerate(handle, start=1) if text.strip()]
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from None
    if not lines:
        raise InputError("file is empty", path=str(path))
    header = [h.strip() for h in _split(lines[0][1])]
    trailing = header[-1] == ""  # --parsable ends every line with '|'
    if trailing:
        header = header[:-1]
    missing = [c for c in SACCT_COLUMNS if c not in header]
    if missing:
        raise InputError(
            f"missing sacct field(s) {', '.join(missing)}; found: {', '.join(header)}. "
            "Export with sacct --parsable2 --format=JobID,Submit,Start,End,State,...",
            path=str(path),
            line=lines[0][0],
            field=missing[0],
        )
    rows = []
    for number, text in lines[1:]:
        fields = _split(text)
        if trailing and fields and fields[-1] == "":
            fields = fields[:-1]
        if len(fields) != len(header):
            raise InputError(
                f"expected {len(header)} '|'-separated fields, got {len(fields)}", path=str(path), line=number
            )
        rows.append((number, [f.strip() for f in fields]))
    return header, rows


def read_sacct(path: str | Path, zone: tzinfo | None = None) -> Workload:
    """Read an ``sacct --parsable2`` history (see the module docstring for the rules)."""
    return read_sacct_notes(path, zone)[0]


def read_sacct_notes(path: str | Path, zone: tzinfo | None = None) -> tuple[Workload, SacctNotes]:
    """``read_sacct`` plus what it left out and folded (for a report)."""
    import pandas as pd

    path = Path(path)
    header, raw = _rows(path)
    notes = SacctNotes()
    attempts: dict[str, list[_Row]] = {}
    for number, fields in raw:
        values = dict(zip(header, fields, strict=True))
        try:
            jid = parse_job_id(values["JobID"])
        except ValueError as exc:
            raise InputError(str(exc), path=str(path), line=number, field="JobID") from None
        if jid.het:
            raise InputError(
                f"heterogeneous job {values['JobID']} is not supported (its components start together); "
                "leave its lines out",
                path=str(path),
                line=number,
                field="JobID",
            )
        if jid.step:
            notes.steps_folded += 1
            continue
        keys = [f"{jid.job}_{t}" for t in jid.array_tasks] if jid.array_tasks else [jid.job]
        notes.array_tasks += len(jid.array_tasks)
        for key in keys:
            attempts.setdefault(key, []).append(_Row(number, values, key))
    records = []
    for key, rows in attempts.items():
        record = _job(path, key, rows, zone, notes)
        if record is not None:
            records.append(record)
    if not records:
        raise InputError("no job in the file started and ended; nothing to replay", path=str(path))
    origin = min(r["submit_time"] for r in records)
    notes.origin = origin
    for r in records:
        for column in ("submit_time", "start_time", "end_time"):
            r[column] = float(round(r[column] - origin))
        r["queue"] = r["start_time"] - r["submit_time"]
    frame = pd.DataFrame(records)
    return Workload.from_frame(path.stem, frame), notes


def _time(path: Path, row: _Row, column: str, zone: tzinfo | None) -> float | None:
    text = row.values.get(column, "")
    try:
        return parse_time(text, zone)
    except ValueError:
        raise InputError(
            f"cannot read time {text!r}; expected YYYY-MM-DDTHH:MM:SS, Unknown or None",
            path=str(path),
            line=row.line,
            field=column,
        ) from None


def _tres(path: Path, row: _Row, column: str) -> Tres:
    text = row.values.get(column, "")
    try:
        return parse_tres(text)
    except ValueError as exc:
        raise InputError(f"cannot read TRES {text!r}: {exc}", path=str(path), line=row.line, field=column) from None


def _job(path: Path, key: str, rows: list[_Row], zone: tzinfo | None, notes: SacctNotes) -> dict | None:
    """One job from its attempts (one row unless requeued)."""
    submits = [(_time(path, r, "Submit", zone), r) for r in rows]
    for value, r in submits:
        if value is None:
            raise InputError("Submit must be a time", path=str(path), line=r.line, field="Submit")
    last = rows[-1]
    submit = min(v for v, _ in submits if v is not None)
    eligible = _time(path, last, "Eligible", zone) if len(rows) == 1 else None
    start = _time(path, last, "Start", zone)
    end = _time(path, last, "End", zone)
    if start is None:
        notes.never_started += 1
        return None
    if end is None:
        notes.not_ended += 1
        return None
    if len(rows) > 1:
        notes.requeued += 1
    if end < start:
        raise InputError("End is before Start", path=str(path), line=last.line, field="End")
    ready = max(submit, eligible) if eligible is not None else submit
    if start < ready:
        # Slurm records a start before eligibility only for clock skew; the replay cannot
        # start a job before it exists.
        ready = start
    alloc = _tres(path, last, "AllocTRES") if last.values.get("AllocTRES") else Tres()
    req = _tres(path, last, "ReqTRES") if last.values.get("ReqTRES") else Tres()
    limit_text = last.values.get("Timelimit", "")
    try:
        limit = parse_limit(limit_text)
    except ValueError as exc:
        raise InputError(
            f"cannot read {limit_text!r}: {exc}", path=str(path), line=last.line, field="Timelimit"
        ) from None
    run = end - start
    if run > MAX_SECONDS:
        raise InputError(f"run time {run:g} s is beyond {MAX_SECONDS:g} s", path=str(path), line=last.line, field="End")
    gpus = alloc.gpus if alloc.gpus is not None else (req.gpus or 0)
    priority = last.values.get("Priority", "")
    return {
        "job_id": key,
        "submit_time": ready,
        "num_gpus": int(gpus),
        "duration": float(round(run)) if "Elapsed" not in last.values else float(_elapsed(path, last, run)),
        "name": last.values.get("JobName", ""),
        "user": last.values.get("User", ""),
        "vc": last.values.get("Partition", ""),
        "tenant": last.values.get("Account", ""),
        "num_cpus": float(alloc.cpus if alloc.cpus is not None else (req.cpus or 0.0)),
        "mem_gb": float(alloc.mem_gb if alloc.mem_gb is not None else (req.mem_gb or 0.0)),
        "cpu_only": gpus == 0,
        "state": base_state(last.values.get("State", "")),
        "start_time": start,
        "end_time": end,
        "time_limit": float("nan") if limit is None else float(limit),
        "qos": last.values.get("QOS", ""),
        "attempts": len(rows),
        "priority": float(priority) if priority.isdigit() else float("nan"),
    }


def _elapsed(path: Path, row: _Row, run: float) -> int:
    text = row.values.get("Elapsed", "")
    if not text:
        return round(run)
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise InputError(f"cannot read {text!r}: {exc}", path=str(path), line=row.line, field="Elapsed") from None
