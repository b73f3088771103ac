"""Telling a trace's format from its header, and reading it with the matching reader.

When no format matches, the error names the closest one and the columns it lacks, since
the usual cause is a single misspelt or missing column.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from shapeshift.errors import InputError
from shapeshift.workloads.readers.generic import read_generic
from shapeshift.workloads.readers.helios import HELIOS_COLUMNS, read_helios
from shapeshift.workloads.readers.kubectl import looks_like_kubectl, read_kubectl
from shapeshift.workloads.readers.openb import OPENB_POD_COLUMNS, read_openb
from shapeshift.workloads.readers.philly import PHILLY_COLUMNS, read_philly
from shapeshift.workloads.readers.pollux import POLLUX_COLUMNS, read_pollux
from shapeshift.workloads.readers.rubick import RUBICK_COLUMNS, read_rubick
from shapeshift.workloads.readers.sacct import SACCT_COLUMNS, read_sacct
from shapeshift.workloads.readers.synergy import SYNERGY_COLUMNS, read_synergy
from shapeshift.workloads.readers.table import is_parquet, open_text
from shapeshift.workloads.workload import REQUIRED, Workload

READERS: dict[str, Callable[[str | Path], Workload]] = {
    "generic": read_generic,
    "philly": read_philly,
    "helios": read_helios,
    "rubick": read_rubick,
    "pollux": read_pollux,
    "synergy": read_synergy,
    "sacct": read_sacct,
    "openb": read_openb,
    "kubectl": read_kubectl,
}


def _header(path: Path) -> list[str]:
    if is_parquet(path):
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    with open_text(path) as handle:
        first = handle.readline()
    # sacct --parsable2 separates its fields with '|', never with ','.
    separator = "|" if "|" in first and "," not in first else ","
    return [c.strip() for c in first.strip().split(separator)]


_SIGNATURES: dict[str, tuple[str, ...]] = {
    "generic": REQUIRED,
    "philly": PHILLY_COLUMNS,
    "helios": HELIOS_COLUMNS,
    "rubick": RUBICK_COLUMNS,
    "pollux": POLLUX_COLUMNS,
    "synergy": SYNERGY_COLUMNS,
    "sacct": SACCT_COLUMNS,
    "openb": OPENB_POD_COLUMNS,
}


#: Other headers a format is recognised by: a Kubernetes job table in the generic format
#: gives ``gpus_per_pod`` (and ``pods``) instead of ``num_gpus``.
_ALTERNATIVES: dict[str, tuple[tuple[str, ...], ...]] = {
    "generic": (("job_id", "submit_time", "gpus_per_pod", "duration"),),
}


def detect_format(path: str | Path) -> str:
    """Pick a reader from the file's header; when several signatures match, the most
    specific (most columns) wins. Without a match, name the closest format and what it
    lacks. A JSON file (``kubectl get ... -o json``) is told by its content."""
    path = Path(path)
    if not path.exists():
        raise InputError("workload file not found", path=str(path))
    if not is_parquet(path) and looks_like_kubectl(path):
        return "kubectl"
    try:
        header = set(_header(path))
    except (OSError, UnicodeDecodeError, ValueError, EOFError) as exc:
        raise InputError(f"cannot read the file header: {exc}", path=str(path)) from None
    signatures = [*_SIGNATURES.items(), *((f, c) for f, alts in _ALTERNATIVES.items() for c in alts)]
    matches = [(fmt, columns) for fmt, columns in signatures if set(columns) <= header]
    if matches:
        return max(matches, key=lambda match: len(match[1]))[0]
    closest = max(_SIGNATURES, key=lambda fmt: (len(set(_SIGNATURES[fmt]) & header), -len(_SIGNATURES[fmt])))
    missing = [c for c in _SIGNATURES[closest] if c not in header]
    if not set(_SIGNATURES[closest]) & header:
        tried = "; ".join(f"{fmt} ({', '.join(cols)})" for fmt, cols in _SIGNATURES.items())
        raise InputError(
            f"cannot tell the trace format from its header; tried {tried}. Pass --format to choose one",
            path=str(path),
            line=1,
        )
    raise InputError(
        f"missing column(s) {', '.join(missing)}: the header is closest to the {closest} format "
        f"({', '.join(_SIGNATURES[closest])}); pass --format to choose another",
        path=str(path),
        line=1,
        field=missing[0],
    )


def read_workload(path: str | Path, fmt: str | None = None) -> Workload:
    """Read a trace with the named reader, or the one its header matches. ``path`` may be
    a bundled workload's name (``philly``, ``rubick-base``); an existing path wins. A trace
    with a header and no rows is refused: every use of a trace (simulate, describe,
    analyze, transform) would otherwise report on nothing, as if it had worked."""
    from shapeshift.datasets import locate, lookup

    found = lookup(path)
    if found is not None:
        dataset, located = found
        if dataset.kind != "workload":
            raise InputError(f"data set {dataset.name!r} is a {dataset.kind}, not a workload", field="workload")
        workload = read_workload(located, fmt or dataset.format)
        return Workload(dataset.name, workload.frame)
    locate(path)  # a word that is neither a file nor a data set name: one line listing the names
    fmt = fmt or detect_format(path)
    if fmt not in READERS:
        raise InputError(f"unknown workload format {fmt!r}; known: {', '.join(sorted(READERS))}")
    workload = READERS[fmt](path)
    if len(workload) == 0:
        raise InputError("the trace has a header but no jobs", path=str(path))
    return workload
