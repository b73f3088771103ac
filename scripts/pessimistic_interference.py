"""Run the ``shapeshift`` CLI with shared-GPU speeds below the default formula's.

An ablation of the simulated ground truth only: policies keep believing the formula
(Lucid's packing scores, for instance), while jobs that share a GPU really run
``BIAS`` slower (at least ``FLOOR`` of their speed alone). docs/sharing.md measured the
formula 0.21 above time-sliced pairs on a real GPU, hence the default.

    python scripts/pessimistic_interference.py [--bias 0.21] simulate ARGS...
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import shapeshift.runs.execute as execute
from shapeshift.model import JobSpec
from shapeshift.perf.colocation import UtilisationInterference

FLOOR = 0.05


@dataclass(frozen=True)
class Slower:
    """The default interference model, ``bias`` slower for every shared pair."""

    inner: UtilisationInterference
    bias: float

    def pair_speed(self, job: JobSpec, partner: JobSpec) -> float:
        return max(self.inner.pair_speed(job, partner) - self.bias, FLOOR)


def main(argv: list[str]) -> None:
    bias = 0.21
    if argv[:1] == ["--bias"]:
        bias, argv = float(argv[1]), argv[2:]
    execute.build_interference = lambda table, seed: Slower(UtilisationInterference(seed=seed), bias)
    from shapeshift.cli.main import main as cli

    sys.argv = ["shapeshift", *argv]
    cli()


if __name__ == "__main__":
    main(sys.argv[1:])
