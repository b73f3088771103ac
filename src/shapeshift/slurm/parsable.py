"""Slurm's ``--parsable2`` tables (``sacctmgr show ... -P``): ``|``-separated fields
under a header line, field names case-insensitive. One reader for every such dump, so
each gives the same one-line errors naming file, line and field."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from shapeshift.errors import InputError


def read_parsable(path: str | Path, what: str) -> tuple[list[str], Iterator[tuple[int, dict[str, str]]]]:
    """The lower-cased header and the rows as ``(line number, {field: value})``, checked
    as they are read, so a caller refuses a header lacking its fields (``require_fields``)
    before any row. ``what`` names the file in the not-found message ("association file")."""
    path = Path(path)
    try:
        lines = [line.rstrip("\r\n") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except FileNotFoundError:
        raise InputError(f"{what} not found", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from None
    if not lines:
        raise InputError("file is empty", path=str(path))
    header = [h.strip().lower() for h in lines[0].split("|")]

    def rows() -> Iterator[tuple[int, dict[str, str]]]:
        for number, line in enumerate(lines[1:], start=2):
            fields = [f.strip() for f in line.split("|")]
            # sacctmgr -p (not -P) ends every line with a separator.
            if fields and fields[-1] == "" and len(fields) == len(header) + 1:
                fields = fields[:-1]
            if len(fields) != len(header):
                raise InputError(f"expected {len(header)} fields, got {len(fields)}", path=str(path), line=number)
            yield number, dict(zip(header, fields, strict=True))

    return header, rows()


def require_fields(header: list[str], needed: Iterable[str], path: str | Path, hint: str) -> None:
    """Refuse a header lacking one of ``needed``, naming it and how to export the dump."""
    for field in needed:
        if field not in header:
            raise InputError(f"missing field {field!r}; {hint}", path=str(path), line=1, field=field)
