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
from shapeshift.slurm.parsable import read_parsable, require_fields


@dataclass(frozen=True)
class Qos:
    name: str
    priority: int
    preempt: tuple[str, ...] = ()  # the QOS this one may preempt
    preempt_mode: str = "cluster"  # "cluster" = the slurm.conf PreemptMode


def read_qos(path: str | Path) -> tuple[Qos, ...]:
    header, rows = read_parsable(path, "QOS file")
    require_fields(header, ("name", "priority"), path, "export with sacctmgr show qos -P")
    result: list[Qos] = []
    for number, row in rows:
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
