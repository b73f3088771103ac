"""The QOS table: ``sacctmgr show qos -P`` output.

``sacctmgr -P`` prints ``|``-separated fields with a header; the replay reads ``Name``
and ``Priority`` (the QOS factor of the multifactor priority is a QOS's priority over the
largest one: ``priority_multifactor.c``, ``_get_priority_internal``,
https://slurm.schedmd.com/priority_multifactor.html), the preemption fields ``Preempt``,
``PreemptMode``, ``PreemptExemptTime`` and ``GraceTime`` (``policies/slurm/preempt.py``)
and the limits ``MaxTRESPU``, ``MaxJobsPU``, ``GrpTRES`` and ``GrpJobs``
(``policies/slurm/qos_limits.py``), ``MaxSubmitPU``, ``MaxSubmitPA`` and ``GrpSubmit``
(``policies/slurm/submit_limits.py``) where the dump has those columns. Of a TRES list only
``gres/gpu`` is read (the replay's jobs are whole-GPU requests).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shapeshift.errors import InputError
from shapeshift.slurm.parsable import read_parsable, require_fields
from shapeshift.slurm.values import time_seconds

_PREEMPT_MODES = {"cluster", "off", "cancel", "requeue", "suspend", "gang", "within", "priority"}


@dataclass(frozen=True)
class Qos:
    name: str
    priority: int
    preempt: tuple[str, ...] = ()  # the QOS this one may preempt
    preempt_mode: str = "cluster"  # "cluster" = the slurm.conf PreemptMode
    #: ``PreemptMode`` flags beside the mode (``within``, ``priority``).
    preempt_flags: tuple[str, ...] = ()
    #: Seconds a job must have run before it may be preempted (``None``: not set here).
    preempt_exempt_time: int | None = None
    grace_time: int = 0
    # Limits (``None``: no limit): GPUs and running jobs per user, jobs submitted per
    # user, GPUs and running jobs of the whole QOS.
    max_gpus_per_user: int | None = None
    max_jobs_per_user: int | None = None
    max_submit_per_user: int | None = None
    grp_gpus: int | None = None
    grp_jobs: int | None = None
    #: Jobs submitted and not ended (pending or running) of the whole QOS, and per
    #: account (``GrpSubmit``, ``MaxSubmitPA``): over them a submission is refused.
    grp_submit: int | None = None
    max_submit_per_account: int | None = None


def tres_gpus(text: str) -> int | None:
    """The ``gres/gpu`` count of a TRES list (``cpu=4,gres/gpu=2``; typed counts such as
    ``gres/gpu:a100=2`` add up); ``None`` when it names no GPU."""
    total: int | None = None
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition("=")
        if name.strip().lower().split(":")[0] != "gres/gpu":
            continue
        if not sep or not value.strip().isdigit():
            raise ValueError(f"bad TRES item {item!r}; expected gres/gpu=N")
        total = (total or 0) + int(value)
    return total


def _field(row: dict[str, str], names: tuple[str, ...]) -> tuple[str, str]:
    for name in names:
        if name in row:
            return name, row[name]
    return names[0], ""


def read_qos(path: str | Path) -> tuple[Qos, ...]:
    header, rows = read_parsable(path, "QOS file")
    require_fields(header, ("name", "priority"), path, "export with sacctmgr show qos -P")
    result: list[Qos] = []
    for number, row in rows:

        def fail(message: str, column: str) -> InputError:
            return InputError(message, path=str(path), line=number, field=column)  # noqa: B023

        if not row["name"]:
            raise fail("Name is empty", "Name")
        text = row["priority"] or "0"
        if not text.isdigit():
            raise fail(f"bad priority {text!r}; expected a whole number", "Priority")
        preempt = tuple(p for p in row.get("preempt", "").split(",") if p)
        modes = [m.strip() for m in (row.get("preemptmode", "") or "cluster").lower().split(",") if m.strip()]
        if not set(modes) <= _PREEMPT_MODES:
            raise fail(f"bad PreemptMode {row['preemptmode']!r}", "PreemptMode")
        flags = tuple(m for m in modes if m in ("within", "priority", "gang"))
        mode = next((m for m in modes if m not in flags), "cluster")
        times: dict[str, int | None] = {}
        for column in ("preemptexempttime", "gracetime"):
            value = row.get(column, "")
            try:
                times[column] = time_seconds(value, bare_unit=1) if value else None
            except ValueError as exc:
                raise fail(f"bad {column} {value!r}: {exc}", column) from None
        counts: dict[str, int | None] = {}
        for key, names in (
            ("max_jobs_per_user", ("maxjobspu", "maxjobsperuser")),
            ("max_submit_per_user", ("maxsubmitpu", "maxsubmitjobsperuser")),
            ("grp_jobs", ("grpjobs",)),
            ("grp_submit", ("grpsubmit", "grpsubmitjobs")),
            ("max_submit_per_account", ("maxsubmitpa", "maxsubmitjobsperaccount")),
        ):
            column, value = _field(row, names)
            if value and not value.isdigit():
                raise fail(f"bad {column} {value!r}; expected a whole number", column)
            counts[key] = int(value) if value else None
        gpus: dict[str, int | None] = {}
        for key, names in (("max_gpus_per_user", ("maxtrespu", "maxtresperuser")), ("grp_gpus", ("grptres",))):
            column, value = _field(row, names)
            try:
                gpus[key] = tres_gpus(value)
            except ValueError as exc:
                raise fail(str(exc), column) from None
        result.append(
            Qos(
                row["name"],
                int(text),
                preempt,
                mode,
                flags,
                times["preemptexempttime"],
                times["gracetime"] or 0,
                gpus["max_gpus_per_user"],
                counts["max_jobs_per_user"],
                counts["max_submit_per_user"],
                gpus["grp_gpus"],
                counts["grp_jobs"],
                counts["grp_submit"],
                counts["max_submit_per_account"],
            )
        )
    return tuple(result)
