"""``--min-iter-time`` paces the reference trainer: each step takes at least that long
(the tiny model alone steps in milliseconds, too fast for a scheduler to see progress
reports before the job ends), and a value that is not a finite number >= 0 is refused."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

ENV = {k: v for k, v in os.environ.items() if not k.startswith("SHAPESHIFT_")} | {"OMP_NUM_THREADS": "1"}


def _train(tmp_path, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "shapeshift.train", "--checkpoint-dir", str(tmp_path), *flags]
    return subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=120)


def test_every_step_takes_at_least_the_paced_time(tmp_path):
    done = _train(tmp_path, "--iterations", "3", "--global-batch", "8", "--min-iter-time", "0.25")
    assert done.returncode == 0, done.stderr[-2000:]
    # One log line per step here (3 steps), each "iter S s": the step's measured time,
    # which includes the sleep up to the pace, so never under 0.25 s.
    times = [float(t) for t in re.findall(r"iter ([0-9.]+) s", done.stdout)]
    assert len(times) == 3, done.stdout
    assert min(times) >= 0.25, times


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_a_pace_that_is_not_a_finite_non_negative_number_is_refused(tmp_path, value):
    done = _train(tmp_path, "--iterations", "1", "--min-iter-time", value)
    assert done.returncode == 2
    assert "--min-iter-time" in done.stderr and "Traceback" not in done.stderr
