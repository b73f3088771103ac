"""A built-in synthetic corpus and a plan-independent data order.

The corpus is generated from a tiny seeded grammar (so it has structure to learn and needs
no download). The data order is a pure function of (seed, step): the global batch of step
``s`` is the same whatever the plan, and each rank / accumulation micro-step takes a fixed
slice of it. Checkpointing the step therefore checkpoints the data order exactly, which
is what makes DP=2 and DP=1,GA=2 see the same samples.
"""

from __future__ import annotations

import random

SUBJECTS = ("the cat", "a dog", "my friend", "the old man", "a small bird", "the teacher", "our robot")
VERBS = ("sees", "likes", "follows", "paints", "finds", "carries", "remembers")
OBJECTS = ("the river", "a red ball", "the garden", "an apple", "the moon", "a long letter", "the city")
ENDINGS = (".", " today.", " again.", " at night.", " slowly.")


def corpus(chars: int = 40_000, seed: int = 1234) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < chars:
        sentence = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}{rng.choice(ENDINGS)} "
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts)[:chars]


def batch_starts(seed: int, step: int, global_batch: int, limit: int) -> list[int]:
    """Start offsets of the ``global_batch`` sequences of ``step`` (plan-independent)."""
    rng = random.Random(seed * 1_000_003 + step)
    return [rng.randrange(limit) for _ in range(global_batch)]
