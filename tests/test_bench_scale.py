"""The scale benchmark's ``load80`` cluster: sized so the trace's offered load fills 80%
of its GPUs. Hand-derived on tiny traces."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_scale.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_scale", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trace(tmp_path: Path, rows: list[tuple[float, int, float]]) -> Path:
    path = tmp_path / "trace.csv"
    lines = ["job_id,submit_time,num_gpus,duration"]
    lines += [f"j{i},{submit},{gpus},{duration}" for i, (submit, gpus, duration) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_offered_load_counts_only_what_jobs_hold_inside_the_arrival_window(bench, tmp_path):
    # Window: first to last submission, [0, 100]. Held inside it, if each job starts on
    # arrival: 4 GPUs x 50 s (ends at 50) = 200; 8 GPUs x 80 s (from 20, cut at 100 from
    # its 500 s) = 640; the last job submits at 100 and holds nothing inside. 840 / 100 s.
    trace = _trace(tmp_path, [(0.0, 4, 50.0), (20.0, 8, 500.0), (100.0, 2, 10.0)])
    assert bench.offered_gpus(trace) == pytest.approx(8.4)


def test_the_load80_cluster_is_the_offered_load_over_eight_tenths_in_nodes_of_eight(bench, tmp_path):
    # Two jobs of 32 GPUs held over the whole window [0, 10] (each runs past its end):
    # offered 64 GPUs; 64 / 0.8 = 80 GPUs = 10 nodes of 8.
    trace = _trace(tmp_path, [(0.0, 32, 1000.0), (0.0, 32, 1000.0), (10.0, 1, 1.0)])
    assert bench.load80_cluster(trace) == "10x8"
