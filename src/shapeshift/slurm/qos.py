"""The QOS table: ``sacctmgr show qos -P`` output.

``sacctmgr -P`` prints ``|``-separated fields with a header; the replay reads ``Name``
and ``Priority`` (the QOS factor of the multifactor priority is a QOS's priority over the
largest one: ``priority_multifactor.c``, ``_get_priority_internal``,
https://slurm.schedmd.com/priority_multifactor.html) and keeps ``Preempt`` and
``PreemptMode`` beside them (``preempt/qos`` is not replayed; see docs/slurm.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shapeshift.errors import InputError


@dataclass(frozen=True)
class Qos:
    name: str
    priority: int
    preempt: tuple[str, ...] = ()  # the QOS this one may preempt
    preempt_mode: str = "cluster"  # "cluster" = the slurm.conf PreemptMode


def read_qos(path: str | Path) -> tuple[Qos, ...]:
    path = Path(path)
    try:
        lines = [line.rstrip("\r\n") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except FileNotFoundError:
        raise InputError("QOS file not found", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from None
    if not lines:
        raise InputError("file is empty", path=str(path))
    header = [h.strip().lower() for h in lines[0].split("|")]
    for needed in ("name", "priority"):
        if needed not in header:
            raise InputError(
                f"missing field {needed!r}; export with sacctmgr show qos -P", path=str(path), line=1, field=needed
            )
    result: list[Qos] = []
    for number, line in enumerate(lines[1:], start=2):
        fields = [f.strip() for f in line.split("|")]
        if fields and fields[-1] == "" and len(fields) == len(header) + 1:
            fields = fields[:-1]
        if len(fields) != len(header):
            raise InputError(f"expected {len(header)} fields, got {len(fields)}", path=str(path), line=number)
        row = dict(zip(header, fields, strict=True))
        if not row["name"]:
            raise InputError("Name is empty", path=str(path), line=number, field="Name")
        text = row["priority"] or "0"
        if not text.isdigit():
            raise InputError(
                f"bad priority {text!r}; expected a whole number", path=str(path), line=number, field="Priority"
            )
        preempt = tuple(p for p in row.get("preempt", "").split(",") if p)
        mode = (row.get("preemptmode", "") or "cluster").lower()
        result.append(Qos(row["name"], int(text), preempt, mode))
    return tuple(result)
