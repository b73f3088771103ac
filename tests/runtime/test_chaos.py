"""The bounded chaos test: 12 jobs submitted while the controller is SIGKILLed
and restarted 3 times. Whatever the timing, no acknowledged job is lost, none runs to
the end twice, none is stuck, and every job ends completed (the demo's injected failures
are retried within max_retries). The long form is benchmarks/bench_runtime_chaos.py."""

from __future__ import annotations

from shapeshift.runtime.chaos import run_chaos
from tests.runtime.conftest import kill_processes_under


def test_random_controller_kills_lose_nothing_duplicate_nothing_and_leave_nothing_stuck(tmp_path):
    try:
        result = run_chaos(tmp_path / "chaos", jobs=12, kills=3, seed=1, kill_every=1.5, settle=60)
    finally:
        kill_processes_under(tmp_path)
    assert result.kills == 3, result.line()
    assert result.submitted == 12, result.line()
    assert (result.lost, result.duplicated, result.stuck) == (0, 0, 0), result.line()
    assert result.completed == 12, result.line()
