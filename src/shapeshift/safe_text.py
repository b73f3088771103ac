"""Text from users shown on a terminal: what must never reach it raw.

A job name is chosen by whoever submits it and printed by everyone who lists the queue.
Raw, an escape sequence in it would recolour, move the cursor or retitle the reader's
terminal, a newline would forge table rows, and a bidirectional override would show text
in another order than it is stored (the "Trojan Source" trick, CVE-2021-42574). Such
characters are refused where a name enters (``has_control``) and escaped where one is
shown (``visible``), for names stored before the refusal existed.
"""

from __future__ import annotations

import unicodedata

#: Bidirectional embeddings, overrides, isolates and marks (Unicode UAX #9).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: Control, surrogate, line and paragraph separator categories.
_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def is_control(char: str) -> bool:
    return char in _BIDI or unicodedata.category(char) in _CATEGORIES


def has_control(text: str) -> str | None:
    """The first character of ``text`` a terminal would act on, escaped; ``None`` if none."""
    for char in text:
        if is_control(char):
            return _escape(char)
    return None


def visible(text: str) -> str:
    """``text`` with every such character written as a Python-style escape (``\\x1b``)."""
    return "".join(_escape(c) if is_control(c) else c for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
