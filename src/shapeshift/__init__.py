"""Shapeshift: schedule deep-learning training jobs on shared GPU clusters.

The library behind the ``shapeshift`` command. In a notebook::

    import shapeshift as ss

    r = ss.simulate("trace.csv", cluster="4x8", policy="tiresias")
    r.summary["avg_jct"], r.jobs.head()
    ss.compare(["fifo", "sjf", "las"], workload="trace.csv", cluster="4x8").table()
    ss.policies()
    ss.datasets.names()  # the bundled reference data: traces, clusters, measured tables

``simulate`` and ``compare`` build a ``RunSpec`` and call ``run``, exactly as the
command line does. Names are imported on first use, so ``import shapeshift`` stays cheap
for the command line and for training scripts that only need the client library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shapeshift import datasets
    from shapeshift.errors import InputError
    from shapeshift.gpushare.api import fill
    from shapeshift.runs import Comparison, EnergySpec, RunResult, RunSpec, ThroughputSpec, run
    from shapeshift.runs.facade import compare, policies, simulate

__all__ = [
    "Comparison",
    "EnergySpec",
    "InputError",
    "RunResult",
    "RunSpec",
    "ThroughputSpec",
    "compare",
    "datasets",
    "fill",
    "policies",
    "run",
    "simulate",
]

_HOMES = {
    "InputError": "shapeshift.errors",
    "Comparison": "shapeshift.runs",
    "EnergySpec": "shapeshift.runs",
    "RunResult": "shapeshift.runs",
    "RunSpec": "shapeshift.runs",
    "ThroughputSpec": "shapeshift.runs",
    "run": "shapeshift.runs",
    "compare": "shapeshift.runs.facade",
    "fill": "shapeshift.gpushare.api",
    "policies": "shapeshift.runs.facade",
    "simulate": "shapeshift.runs.facade",
    "whatif": "shapeshift.slurm.whatif",
}


def __getattr__(name: str) -> Any:
    if name == "datasets":
        value = importlib.import_module("shapeshift.datasets")
        globals()[name] = value
        return value
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'shapeshift' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
