"""One run description and one runner, shared by every front door.

``RunSpec`` describes a simulation; ``run(spec)`` performs it and returns a
``RunResult``. The command line, experiment files, the paper reproductions, the live
fidelity check and ``import shapeshift`` all go through here. Names are imported on
first use, so the command line can read ``shapeshift.runs.defaults`` cheaply.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shapeshift.runs.execute import run
    from shapeshift.runs.result import COMPARE_KEYS, Comparison, RunResult
    from shapeshift.runs.spec import RECORDINGS, EnergySpec, RunSpec, ThroughputSpec

__all__ = ["COMPARE_KEYS", "RECORDINGS", "Comparison", "EnergySpec", "RunResult", "RunSpec", "ThroughputSpec", "run"]

_HOMES = {
    "run": "shapeshift.runs.execute",
    "COMPARE_KEYS": "shapeshift.runs.result",
    "Comparison": "shapeshift.runs.result",
    "RunResult": "shapeshift.runs.result",
    "RECORDINGS": "shapeshift.runs.spec",
    "EnergySpec": "shapeshift.runs.spec",
    "RunSpec": "shapeshift.runs.spec",
    "ThroughputSpec": "shapeshift.runs.spec",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'shapeshift.runs' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
