"""Whether the compiled backfill cycle can run here, asked without importing numba.

``plan.backfill`` asks on every cycle; numba (the ``fast`` extra) takes about half a
second to import, so it is imported only by ``plan_compiled`` when a cycle first runs
compiled, never by commands that do not replay Slurm.
"""

from __future__ import annotations

import functools
import importlib.util
import os


@functools.cache
def _installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def available() -> bool:
    """numba is installed and ``SHAPESHIFT_PURE_PYTHON`` does not switch it off."""
    return _installed() and os.environ.get("SHAPESHIFT_PURE_PYTHON", "") in ("", "0")
