"""Small helpers for the sentences Shapeshift shows users (reasons, errors)."""

from __future__ import annotations


def count(n: int | float, noun: str) -> str:
    """``count(1, "GPU")`` -> ``"1 GPU"``, ``count(4, "GPU")`` -> ``"4 GPUs"``."""
    return f"{n:g} {noun}" if n == 1 else f"{n:g} {noun}s"
