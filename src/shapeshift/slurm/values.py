"""Slurm's value syntaxes: host lists (``node[001-004,7]``), times and yes/no.

Each parser raises ``ValueError`` with a short reason; the configuration reader adds the
file, line and key. The rules follow Slurm's ``src/common/hostlist.c`` (ranges keep
their zero padding) and ``src/common/parse_time.c`` (``time_str2mins``/``time_str2secs``).
"""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
#: Time values that mean "no limit".
UNLIMITED = frozenset({"unlimited", "infinite", "-1"})


def expand_hostlist(text: str) -> list[str]:
    """``gpu[01-03,7],cpu1`` -> ``gpu01 gpu02 gpu03 gpu7 cpu1`` (brackets may repeat: ``r[1-2]n[1-2]``)."""
    names: list[str] = []
    for item in _split_top(text):
        names.extend(_expand_one(item))
    return names


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    items, depth, current = [], 0, ""
    for char in text.strip():
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {text!r}")
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    items.append(current)
    if any(not i.strip() for i in items):
        raise ValueError(f"empty name in host list {text!r}")
    return [i.strip() for i in items]


def _expand_one(item: str) -> list[str]:
    start = item.find("[")
    if start < 0:
        return [item]
    end = item.index("]", start)
    prefix, body, rest = item[:start], item[start + 1 : end], item[end + 1 :]
    tails = _expand_one(rest) if rest else [""]
    names = []
    for part in body.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise ValueError(f"bad range {part!r} in host list")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise ValueError(f"range {part!r} runs backwards")
        width = len(low) if low.startswith("0") or len(low) == len(high) else 0
        for number in range(int(low), int(high) + 1):
            names.extend(f"{prefix}{number:0{width}d}{tail}" for tail in tails)
    return names


def time_seconds(text: str, *, bare_unit: int = 60) -> int | None:
    """A Slurm time (``minutes``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``,
    ``D-HH:MM:SS``) in seconds; ``None`` for ``UNLIMITED``/``INFINITE``. A bare number is
    in ``bare_unit`` seconds (minutes for limits, as Slurm reads them)."""
    text = text.strip()
    if text.lower() in UNLIMITED:
        return None
    days = 0
    if "-" in text:
        day_text, text = text.split("-", 1)
        if not day_text.isdigit():
            raise ValueError("expected [D-]HH:MM:SS, minutes or UNLIMITED")
        days = int(day_text)
        parts = text.split(":")
        if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
            raise ValueError("expected D-HH[:MM[:SS]]")
        hours, minutes, seconds = ([int(p) for p in parts] + [0, 0])[:3]
        return days * 86400 + hours * 3600 + minutes * 60 + seconds
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError("expected [D-]HH:MM:SS, minutes or UNLIMITED")
    numbers = [int(p) for p in parts]
    if len(numbers) == 1:
        return numbers[0] * bare_unit
    if len(numbers) == 2:
        return numbers[0] * 60 + numbers[1]
    return numbers[0] * 3600 + numbers[1] * 60 + numbers[2]


def yes_no(text: str) -> bool:
    value = text.strip().lower()
    if value in {"yes", "y", "1", "true"}:
        return True
    if value in {"no", "n", "0", "false"}:
        return False
    raise ValueError("expected YES or NO")


def count(text: str, *, minimum: int = 0) -> int:
    text = text.strip()
    if not text.lstrip("-").isdigit() or int(text) < minimum:
        raise ValueError(f"expected a whole number >= {minimum}")
    return int(text)


def uint16_value(text: str) -> int:
    """A ``uint16`` value as ``s_p_handle_uint16`` reads it (``parse_value.c``): a whole
    number 0..65535, or ``UNLIMITED``/``INFINITE`` (``INFINITE16``, 65535)."""
    if text.strip().lower() in ("unlimited", "infinite"):
        return 0xFFFF
    number = count(text)
    if number > 0xFFFF:
        raise ValueError("expected a whole number from 0 to 65535")
    return number


def billing_weight(key: str, text: str) -> float:
    """A ``TRESBillingWeights`` weight per unit the replay counts (CPUs, GPUs, GB): a
    memory weight's suffix names its unit (``0.25G`` per GB) and a bare one is per MB
    (slurm.conf man page)."""
    scale = {"K": 1e6, "M": 1e3, "G": 1.0, "T": 1e-3}
    unit = text[-1:].upper()
    bare_scale = 1e3 if key == "mem" else 1.0
    number = float(text[:-1]) * scale[unit] if unit in scale else float(text) * bare_scale
    if not (number >= 0 and number < float("inf")):
        raise ValueError("expected a finite weight >= 0")
    return number
