"""The slurm policy beside a real slurmctld: 20 short jobs on scripts/real_slurm.sh's Slurm.

Runs only where Slurm's daemons are installed (``scripts/real_slurm.sh install``) and
as root (the daemons and the job users need it); skips with the reason otherwise. The
cluster gets its own directory and ports, so it does not meet one already running.
The floor on agreement is far below what the benchmark measures (all jobs within 5 s
on 30 jobs; two real runs agree for about 85%): it catches a broken replay, not noise.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from tests.slurm.real_cluster import NEEDS_REAL_SLURM, started_slurm

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_slurm_real.py"
PORTS = {"CTLD_PORT": "6917", "DBD_PORT": "6919", "DBPORT": "3317", "NODE_PORT": "17100"}

pytestmark = NEEDS_REAL_SLURM


@pytest.fixture
def real_slurm():
    with started_slurm("ss-slurm-test-", {**os.environ, **PORTS}) as work:
        yield work


def test_twenty_jobs_agree_with_the_real_slurm(real_slurm, tmp_path):
    spec = importlib.util.spec_from_file_location("bench_slurm_real", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    out = tmp_path / "out"
    args = ["--jobs", "20", "--seed", "3", "--min-run", "3", "--max-run", "12", "--mean-gap", "2"]
    assert bench.main([*args, "--conf", str(real_slurm / "slurm.conf"), "--out", str(out)]) == 0
    import json

    result = json.loads((out / "bench.json").read_text())
    assert result["jobs_compared"] == 20
    assert result["within_5s"] >= 0.5
