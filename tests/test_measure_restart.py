"""``scripts/measure_restart.py``: the restart's phases from the two processes' time marks
(hand-derived), and the harness end to end on the CPU's tiny stand-ins."""

from __future__ import annotations

import csv
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.fixture()
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # the script imports its sibling measure_colocation
    return importlib.import_module("measure_restart")


def test_phases_by_hand(script):
    # First life: its last step ends at 50.0 and the checkpoint is on disk at 50.5: save 0.5 s.
    first = {"marks": {"saved": 50.5}, "step_ends": [49.0, 50.0]}
    # Second life, launched at 100: torch imported at 104 (4 s), CUDA ready at 104.5,
    # model built at 106 (1.5 s), checkpoint loaded at 106.25. 25 steps: the first ends at
    # 107 (0.75 s), then 24 more, 0.1 s apart, so the last ends at 107 + 2.4 = 109.4.
    ends = [107.0 + 0.1 * k for k in range(25)]
    second = {
        "marks": {"launched": 100.0, "imported": 104.0, "cuda": 104.5, "built": 106.0, "loaded": 106.25},
        "step_ends": ends,
    }
    got = script.phases(first, second, steps=25)
    # Steady step: the median of the last 20 gaps, all 0.1 s. Pause: 9.4 s from launch to
    # the last step, less 25 steady steps (2.5 s) = 6.9 s of lost progress.
    expected = {"save_s": 0.5, "import_s": 4.0, "cuda_s": 0.5, "build_s": 1.5, "load_s": 0.25,
                "first_step_s": 0.75, "steady_step_s": 0.1, "launch_to_last_step_s": 9.4, "pause_s": 6.9}
    assert got == pytest.approx(expected)


def test_bad_options_are_refused_before_anything_runs(script, tmp_path):
    with pytest.raises(ValueError, match="more than 20"):
        script.measure(tmp_path, "cpu", steps=20, repeats=1, models=["ncf"])
    with pytest.raises(ValueError, match="--repeats must be at least 1"):
        script.measure(tmp_path, "cpu", steps=30, repeats=0, models=["ncf"])
    with pytest.raises(ValueError, match="unknown bert;"):
        script.measure(tmp_path, "cpu", steps=30, repeats=1, models=["bert"])
    assert not (tmp_path / "restart.csv").exists()


def test_compare_without_measurements(script, tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        script.compare(tmp_path)
    (tmp_path / "restart.csv").write_text(",".join(script.FIELDS) + "\n")
    with pytest.raises(ValueError, match="no measurements"):
        script.compare(tmp_path)
    done = subprocess.run([sys.executable, str(SCRIPTS / "measure_restart.py"), "compare", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "no measurements" in done.stderr and "Traceback" not in done.stderr


def test_bad_option_exits_2(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "measure_restart.py"), "measure", "--out", str(tmp_path), "--steps", "5"],
        capture_output=True, text=True,
    )
    assert done.returncode == 2
    assert "--steps must be more than 20" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_harness_on_cpu(script, tmp_path):
    pytest.importorskip("torch")
    script.measure(tmp_path, "cpu", steps=22, repeats=1, models=["ncf"])
    with open(tmp_path / "restart.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    assert [r["model"] for r in rows] == ["ncf"]
    row = {k: float(v) for k, v in rows[0].items() if k not in ("model", "repeat")}
    # The second process had to import torch before its first step: a positive import
    # time, and a run from launch to last step longer than the phases before the steps.
    assert row["import_s"] > 0 and row["checkpoint_mb"] > 0
    before_steps = row["import_s"] + row["cuda_s"] + row["build_s"] + row["load_s"] + row["first_step_s"]
    assert row["launch_to_last_step_s"] > before_steps
    # The pause is, by definition, the launch-to-last-step time less 22 steady steps.
    assert row["pause_s"] == pytest.approx(row["launch_to_last_step_s"] - 22 * row["steady_step_s"], abs=1e-3)
    assert "| ncf |" in script.compare(tmp_path)


@pytest.mark.slow
def test_a_failing_job_process_is_reported(script, tmp_path):
    pytest.importorskip("torch")
    # A device torch does not know: the job process fails on its first CUDA call.
    with pytest.raises(script.ChildFailed, match="ncf: the job process exited with status 1"):
        script.measure(tmp_path, "no-such-device", steps=22, repeats=1, models=["ncf"])
