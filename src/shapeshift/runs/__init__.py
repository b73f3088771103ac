"""One run description and one runner, shared by every front door.

``RunSpec`` describes a simulation; ``run(spec)`` performs it and returns a
``RunResult``. The command line, experiment files, the paper reproductions, the live
fidelity check and ``import shapeshift`` all go through here.
"""

from shapeshift.runs.execute import run
from shapeshift.runs.result import COMPARE_KEYS, Comparison, RunResult
from shapeshift.runs.spec import RECORDINGS, EnergySpec, RunSpec, ThroughputSpec

__all__ = ["COMPARE_KEYS", "RECORDINGS", "Comparison", "EnergySpec", "RunResult", "RunSpec", "ThroughputSpec", "run"]
