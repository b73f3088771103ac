"""Tiny experiment files for the experiment tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

TINY = """
name: tiny
workloads:
  - {name: poisson, generator: poisson, jobs: 30, rate: 6}
clusters: [2x4]
policies:
  - fifo
  - {name: fifo-backfill, policy: fifo, params: {backfill: true}}
seeds: [0, 1]
sweep:
  workload.rate: [4, 8]
"""


def write(tmp_path: Path, text: str, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write(tmp_path, TINY)
