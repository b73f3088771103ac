"""Multi-document Kubernetes YAML, read as ``kubectl apply -f`` takes it.

A platform team keeps its queueing configuration as one file of ``---``-separated
objects. Every problem found later (a flavor that does not exist, a cycle of cohorts)
must point back to the document it came from, so each document keeps its file, its
1-based position in the file, the line it starts on, its kind and its name; ``Doc.error``
builds the one-line ``InputError`` naming all of them and the field.

Quantities follow Kubernetes' ``resource.Quantity`` text form (``9``, ``500m``,
``36Gi``, ``1e3``): binary suffixes Ki..Ei, decimal k..E, milli ``m``; durations follow
Go's ``time.ParseDuration`` form (``1h30m``, ``10m``) plus ``d`` and ``w``, which
KAI-Scheduler's usage window takes (``1w``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from shapeshift.errors import InputError
from shapeshift.yaml_lines import safe_load_all


@dataclass(frozen=True)
class Doc:
    """One object of a multi-document file, with where it came from."""

    path: str
    index: int  # 1-based position among the file's non-empty documents
    line: int  # 1-based line where the document starts
    kind: str
    name: str
    body: Mapping[str, Any]

    def where(self) -> str:
        return f"document {self.index} ({self.kind} {self.name!r})" if self.name else f"document {self.index}"

    def error(self, field: str, message: str) -> InputError:
        return InputError(f"{self.where()}: {message}", path=self.path, line=self.line, field=field)

    def spec(self) -> Mapping[str, Any]:
        spec = self.body.get("spec", {})
        if spec is None:
            return {}
        if not isinstance(spec, Mapping):
            raise self.error("spec", "must be a mapping")
        return spec


def read_documents(path: str | Path) -> list[Doc]:
    """The non-empty documents of ``path``; each must be a mapping with ``kind`` and
    ``metadata.name`` (a ``kind: List`` is expanded into its ``items``)."""
    name = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InputError(f"cannot read configuration: {exc.strerror}", path=name) from None
    return parse_documents(text, name)


def parse_documents(text: str, path: str = "<text>") -> list[Doc]:
    """As ``read_documents`` for text already read (``path`` only names it in errors)."""
    try:
        nodes = list(yaml.compose_all(text))
        bodies = safe_load_all(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"not valid YAML ({getattr(exc, 'problem', None) or exc})", path=path, line=line) from None
    docs: list[Doc] = []
    for node, body in zip(nodes, bodies, strict=True):
        if node is None or body is None:
            continue
        line = node.start_mark.line + 1
        for item in _expand(body, path, len(docs) + 1, line):
            docs.append(_doc(item, path, len(docs) + 1, line))
    return docs


def _expand(body: Any, path: str, index: int, line: int) -> Iterator[Any]:
    if isinstance(body, Mapping) and body.get("kind") == "List":
        items = body.get("items") or []
        if not isinstance(items, list):
            raise InputError(f"document {index}: items of a List must be a list", path=path, line=line, field="items")
        yield from items
    else:
        yield body


def _doc(body: Any, path: str, index: int, line: int) -> Doc:
    if not isinstance(body, Mapping):
        raise InputError(f"document {index}: must be a mapping with kind and metadata", path=path, line=line)
    kind = body.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"document {index}: has no kind", path=path, line=line, field="kind")
    meta = body.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if isinstance(name, int | float) and not isinstance(name, bool):
        message = f"document {index} ({kind}): metadata.name {name!r} was read as a number; quote it"
        raise InputError(message, path=path, line=line, field="metadata.name")
    if not isinstance(name, str) or not name:
        raise InputError(
            f"document {index} ({kind}): has no metadata.name", path=path, line=line, field="metadata.name"
        )
    return Doc(path, index, line, kind, name, body)


_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)
_SUFFIX = {
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}


def parse_quantity(value: Any) -> float | None:
    """A Kubernetes quantity (``9``, ``500m``, ``36Gi``) as a float in base units, or
    ``None`` when ``value`` is not one (for callers that name the place themselves)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str) and (match := _QUANTITY.match(value.strip())):
        number = float(match.group(1) + (match.group(2) or "")) * _SUFFIX.get(match.group(3) or "", 1.0)
    else:
        return None
    return number if math.isfinite(number) else None


def quantity(value: Any, doc: Doc, field: str, *, allow_negative: bool = False) -> float:
    """A Kubernetes quantity (``9``, ``500m``, ``36Gi``) as a float in base units."""
    if isinstance(value, bool):
        raise doc.error(field, f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str) and (match := _QUANTITY.match(value.strip())):
        number = float(match.group(1) + (match.group(2) or "")) * _SUFFIX.get(match.group(3) or "", 1.0)
    else:
        raise doc.error(field, f"{value!r} is not a quantity (like 9, 500m or 36Gi)")
    if not math.isfinite(number):
        raise doc.error(field, f"{value!r} is not a finite quantity")
    if number < 0 and not allow_negative:
        raise doc.error(field, f"{value!r} must not be negative")
    return number


_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h|d|w)")
_DURATION_UNIT = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}


def duration_s(value: Any, doc: Doc, field: str) -> float:
    """A Go duration (``10m``, ``1h30m``, also ``1w``) in seconds; a bare number is seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and value.strip() and _DURATION_PART.sub("", value.strip()) == "":
        seconds = sum(float(n) * _DURATION_UNIT[u] for n, u in _DURATION_PART.findall(value.strip()))
    else:
        raise doc.error(field, f"{value!r} is not a duration (like 10m, 1h30m or 1w)")
    if not math.isfinite(seconds) or seconds < 0:
        raise doc.error(field, f"{value!r} must be a finite, non-negative duration")
    return seconds


def mapping(value: Any, doc: Doc, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise doc.error(field, "must be a mapping")
    return value


def sequence(value: Any, doc: Doc, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise doc.error(field, "must be a list")
    return value


def text(value: Any, doc: Doc, field: str, *, choices: tuple[str, ...] = (), default: str = "") -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise doc.error(field, f"{value!r} must be text")
    if choices and value not in choices:
        raise doc.error(field, f"{value!r} is not one of {', '.join(choices)}")
    return value
