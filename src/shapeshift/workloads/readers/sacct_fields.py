"""Parsing the fields of ``sacct --parsable2`` output, one value at a time.

Each function raises ``ValueError`` with a short reason; the reader adds the file, line
and column. Formats follow what ``sacct`` prints (Slurm's ``sacct`` man page and
``src/common/parse_time.c`` / ``slurmdb_defs.c`` for the TRES strings): durations as
``[DD-][HH:]MM:SS``, time limits as the same or ``UNLIMITED``/``Partition_Limit``, times
as ISO ``YYYY-MM-DDTHH:MM:SS`` in the site's zone (or with an offset when
``SLURM_TIME_FORMAT`` adds one), ``Unknown``/``None`` for a time that did not happen.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from functools import lru_cache

#: Time values ``sacct`` prints for an event that has not happened (yet).
NO_TIME = frozenset({"", "unknown", "none", "n/a"})
#: Time limits that mean "no limit of the job's own".
NO_LIMIT = frozenset({"unlimited", "partition_limit", "infinite", ""})
#: Slurm's memory suffixes are binary (``src/common/proc_args.c``: ``str_to_mbytes``), in MiB.
_MEM_UNITS = {"k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0**2, "p": 1024.0**3}


def mib_to_gb(mib: float) -> float:
    """MiB (Slurm's memory unit) -> GB (10^9 bytes, ours). ``slurm.conf``'s ``RealMemory``
    goes through the same function, so a job asking for a whole node's memory fits it."""
    return mib * 1048576 / 1e9


@lru_cache(maxsize=65536)  # a history repeats its run times and limits
def parse_duration(text: str) -> int:
    """``[DD-][HH:]MM:SS[.mmm]`` (``Elapsed``, ``Timelimit``) -> whole seconds."""
    text = text.strip()
    days = 0
    if "-" in text:
        day_text, text = text.split("-", 1)
        if not day_text.isdigit():
            raise ValueError(f"bad day count {day_text!r}")
        days = int(day_text)
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not all(p.replace(".", "", 1).isdigit() for p in parts):
        raise ValueError("expected [DD-][HH:]MM:SS")
    if len(parts) == 1:
        # A bare number is minutes, as sbatch --time and slurm.conf limits read it.
        return days * 86400 + int(float(parts[0])) * 60
    numbers = [float(p) for p in parts]
    while len(numbers) < 3:
        numbers.insert(0, 0.0)
    hours, minutes, seconds = numbers
    return days * 86400 + int(hours) * 3600 + int(minutes) * 60 + int(seconds)


def parse_limit(text: str) -> int | None:
    """A ``Timelimit`` in seconds; ``None`` for ``UNLIMITED``/``Partition_Limit``."""
    if text.strip().lower() in NO_LIMIT:
        return None
    return parse_duration(text)


def parse_time(text: str, zone: tzinfo | None) -> float | None:
    """A ``sacct`` time as POSIX seconds; ``None`` for ``Unknown``/``None``.

    A time without an offset is on the site's clock: ``zone`` when given (so a daylight
    saving change is honoured), else read as UTC (one consistent clock; only the
    differences between times matter to a replay). The plain UTC form sacct prints,
    ``YYYY-MM-DDTHH:MM:SS``, is read as its day's start (parsed once per day) plus whole
    seconds: the same number, without a ``datetime`` per value."""
    if zone is None and len(text) == 19 and text.isascii() and text[10] == "T" and text[13] == ":" and text[16] == ":":
        day = _day_start(text[:10])
        hh, mm, ss = text[11:13], text[14:16], text[17:19]
        if day is not None and hh.isdigit() and mm.isdigit() and ss.isdigit():
            h, m, sec = int(hh), int(mm), int(ss)
            if h < 24 and m < 60 and sec < 60:
                return day + (h * 3600 + m * 60 + sec)
    return _parse_time(text, zone)


@lru_cache(maxsize=4096)
def _day_start(text: str) -> float | None:
    """POSIX seconds of ``YYYY-MM-DD``'s midnight UTC; ``None`` if not such a date."""
    if len(text) != 10 or text[4] != "-" or text[7] != "-" or not (text[:4] + text[5:7] + text[8:]).isdigit():
        return None
    try:
        return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


@lru_cache(maxsize=256)  # a row repeats its times (Submit, Eligible, Start), and rows their neighbours'
def _parse_time(text: str, zone: tzinfo | None) -> float | None:
    if text.strip().lower() in NO_TIME:
        return None
    stamp = datetime.fromisoformat(text.strip())
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=zone or UTC)
    return stamp.timestamp()


@dataclass(frozen=True, slots=True)
class Tres:
    """The parts of a TRES string (``cpu=8,mem=64G,node=1,billing=8,gres/gpu=2``) a
    replay needs; absent parts are ``None``."""

    cpus: float | None = None
    mem_gb: float | None = None
    nodes: int | None = None
    gpus: int | None = None
    gpu_type: str = ""


def parse_mem(text: str) -> float:
    """``64G``, ``500M``, ``1.5T`` (or a bare number of MiB, Slurm's unit) -> GB."""
    text = text.strip()
    unit = text[-1:].lower()
    if unit in _MEM_UNITS:
        number, scale = float(text[:-1]), _MEM_UNITS[unit]
    else:
        number, scale = float(text), _MEM_UNITS["m"]
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"bad memory size {text!r}")
    return mib_to_gb(number * scale)


@lru_cache(maxsize=4096)  # a history holds few distinct TRES strings; the answer is frozen
def parse_tres(text: str) -> Tres:
    """Read a ``ReqTRES``/``AllocTRES`` string. GPUs come from ``gres/gpu=N`` or, when
    only typed counts are given, the sum of ``gres/gpu:TYPE=N``; ``gpu_type`` is the one
    type named (``""`` for none or several), in the case written."""
    values: dict[str, str] = {}
    typed: dict[str, int] = {}  # GPUs by type, the type as written (the site's gres names)
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"bad TRES item {item!r}; expected name=value")
        key = key.strip()
        values[key.lower()] = value.strip()
        if key.lower().startswith("gres/gpu:"):
            typed[key.split(":", 1)[1]] = int(value)
    cpus = float(values["cpu"]) if "cpu" in values else None
    mem = parse_mem(values["mem"]) if "mem" in values else None
    nodes = int(values["node"]) if "node" in values else None
    gpus: int | None = int(values["gres/gpu"]) if "gres/gpu" in values else None
    if gpus is None and typed:
        gpus = sum(typed.values())
    gpu_type = next(iter(typed)) if len(typed) == 1 else ""
    for name, number in (("cpu", cpus), ("mem", mem)):
        if number is not None and not (math.isfinite(number) and number >= 0):
            raise ValueError(f"{name} must be finite and >= 0")
    if (nodes is not None and nodes < 0) or (gpus is not None and gpus < 0):
        raise ValueError("counts must be >= 0")
    return Tres(cpus, mem, nodes, gpus, gpu_type)


_ARRAY = re.compile(r"^(\d+)_(\d+)$")
#: A heterogeneous job's component: ``123+0`` (an array task's too, ``123_4+0``).
_HET = re.compile(r"^\d+(_\d+)?\+\d+$")
_ARRAY_PENDING = re.compile(r"^(\d+)_\[(.+)\]$")


@dataclass(frozen=True, slots=True)
class JobId:
    """A ``JobID`` split into its job (``123`` or array task ``123_4``) and step
    (``batch``, ``extern``, ``0``; empty for the job's own record)."""

    job: str
    step: str
    het: bool
    array_tasks: tuple[int, ...] = ()  # for a pending array record ``123_[1-5%2]``


def parse_job_id(text: str) -> JobId:
    text = text.strip()
    job, _, step = text.partition(".")
    if _HET.match(job):
        return JobId(job, step, het=True)
    if job.isdigit() or _ARRAY.match(job):
        return JobId(job, step, het=False)
    pending = _ARRAY_PENDING.match(job)
    if pending:
        return JobId(pending.group(1), step, het=False, array_tasks=expand_ranges(pending.group(2)))
    raise ValueError(f"cannot read job id {text!r}")


def expand_ranges(text: str) -> tuple[int, ...]:
    """``1-3,7,10-14:2%4`` (an array spec; ``%N`` is a concurrency cap, ``:S`` a step) -> the
    task numbers."""
    text = text.split("%", 1)[0]
    tasks: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        span, _, step_text = part.partition(":")
        low, dash, high = span.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or (step_text and not step_text.isdigit()):
            raise ValueError(f"bad array range {part!r}")
        step = int(step_text or 1)
        if step < 1:
            raise ValueError(f"bad array step in {part!r}")
        tasks.extend(range(int(low), int(high if dash else low) + 1, step))
    if not tasks:
        raise ValueError(f"empty array range {text!r}")
    return tuple(tasks)


def base_state(text: str) -> str:
    """``CANCELLED by 1234`` -> ``CANCELLED``; ``COMPLETED`` unchanged."""
    return text.strip().split(" ", 1)[0].upper()
