"""Reading Slurm's ``Key=Value`` configuration files (``slurm.conf``, ``gres.conf``) line
by line: comments and continuation lines, the pairs of a line, each value checked where
it is read, so that a wrong one is reported with its file, line and key as written."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shapeshift.errors import InputError
from shapeshift.slurm.values import count


def logical_lines(path: Path) -> list[tuple[int, str]]:
    """The file's lines without comments, a line ending in ``\\`` joined to the next, each
    with the number of its first line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from None
    lines: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        body = re.sub(r"(?<!\\)#.*$", "", raw).rstrip()
        if not pending:
            start = number
        if body.endswith("\\"):
            pending += body[:-1] + " "
            continue
        body = (pending + body).strip()
        pending = ""
        if body:
            lines.append((start, body))
    return lines


class Reader:
    """One file's reading state: the line being read, the keys left out (``ignored``) and
    each key as the file writes it (Slurm's keys are case-insensitive, so they are looked
    up in lower case and reported, and listed as ignored, as written)."""

    def __init__(self, path: Path):
        self.path = path
        self.line = 0
        self.ignored: set[str] = set()
        self.written: dict[str, str] = {}

    def pairs(self, number: int, body: str) -> list[tuple[str, str]]:
        """A line's ``Key=Value`` pairs, keys in lower case."""
        try:
            tokens = shlex.split(body, posix=True)
        except ValueError as exc:
            raise InputError(f"cannot split the line: {exc}", path=str(self.path), line=number) from None
        pairs = []
        for token in tokens:
            key, sep, value = token.partition("=")
            if not sep:
                raise InputError(f"expected Key=Value, got {token!r}", path=str(self.path), line=number, field=token)
            key = key.strip()
            self.written.setdefault(key.lower(), key)
            pairs.append((key.lower(), value.strip()))
        return pairs

    def name(self, key: str) -> str:
        """``key`` as the file writes it (each part of ``Head.key``); as given where the
        file does not have it (a default)."""
        head, dot, tail = key.partition(".")
        if dot:
            return f"{self.written.get(head.lower(), head)}.{self.written.get(tail.lower(), tail)}"
        return self.written.get(key.lower(), key)

    def ignore(self, *keys: str) -> None:
        """Keys the replay does not model, listed as the file writes them."""
        self.ignored.update(self.name(k) for k in keys)

    def value(self, key: str, text: str, parse: Callable[[str], Any]) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise InputError(
                f"bad value {text!r}: {exc}", path=str(self.path), line=self.line, field=self.name(key)
            ) from None

    def gres_gpus(self, key: str, text: str) -> tuple[int, tuple[str, ...]]:
        """``gpu:a100:8,gpu:v100:2(S:0-1),nic:1`` -> (10, ("a100", "v100"))."""
        total, types = 0, []
        for item in filter(None, (p.strip() for p in text.split(","))):
            parts = re.sub(r"\(.*?\)", "", item).split(":")
            if parts[0].lower() != "gpu":
                continue
            number = parts[-1] if len(parts) > 1 else "1"
            gpus = self.value(key, number, lambda t: count(re.sub(r"[kK]$", "000", t)))
            if len(parts) == 3 and parts[1] not in types:
                types.append(parts[1])
            total += gpus
        return total, tuple(types)
