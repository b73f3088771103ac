"""A training step as one log line (what ``shapeshift logs`` shows), e.g.::

    step 12/30 loss 0.0833 iter 0.101 s 9.9 it/s 317 samples/s

Printed about twenty times per run (every step for short runs) and always at the last
step, so a log shows progress without drowning in it; flushed at once because ranks
write to files, where Python would otherwise buffer until exit.
"""

from __future__ import annotations

import sys
from typing import TextIO


def should_log(step: int, total: int) -> bool:
    return step == total or step % max(1, total // 20) == 0


def log_step(
    step: int,
    total: int,
    loss: float | None,
    iter_time: float,
    samples: int | None = None,
    out: TextIO | None = None,
) -> None:
    parts = [f"step {step}/{total}"]
    if loss is not None:
        parts.append(f"loss {loss:.4f}")
    parts.append(f"iter {iter_time:.3f} s")
    if iter_time > 0:
        parts.append(f"{1 / iter_time:.1f} it/s")
        if samples:
            parts.append(f"{samples / iter_time:.0f} samples/s")
    print(" ".join(parts), file=out or sys.stdout, flush=True)
