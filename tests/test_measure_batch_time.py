"""``scripts/measure_batch_time.py``: the batches tried, the left-out fit of Pollux's
linear compute model on hand-made step times, and refused input."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.fixture()
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # the script imports its sibling measure_colocation
    return importlib.import_module("measure_batch_time")


def test_batches_are_eighth_to_eight_times_the_usual(script):
    assert script.batches_of(64) == [8, 16, 32, 64, 128, 256, 512]
    # 16 / 8 = 2: every multiple is a whole batch already.
    assert script.batches_of(16) == [2, 4, 8, 16, 32, 64, 128]
    # 4 / 8 rounds to 0 and 4 / 4 to 1: both become 1, tried once.
    assert script.batches_of(4) == [1, 2, 4, 8, 16, 32]


def test_exactly_linear_times_are_predicted_when_left_out(script):
    # T(b) = 10 ms + 0.5 ms * b: every batch left out lies on the line through the others,
    # so its predicted time is its measured one.
    times = {b: 0.010 + 0.0005 * b for b in (8, 16, 32, 64, 128)}
    errors = script.left_out_errors(times)
    assert set(errors) == set(times)
    assert max(abs(e) for e in errors.values()) < 0.01
    p = script.fit_linear(times)
    assert p.alpha_c == pytest.approx(0.010, rel=0.02) and p.beta_c == pytest.approx(0.0005, rel=0.02)


def test_a_flat_region_shows_as_left_out_error(script):
    # Flat at 10 ms up to batch 32, then 10 ms per 32 samples more (a GPU that is
    # underused by small batches). Left out, batch 32 is predicted from a line through
    # the flat 8 and 16 and the steep 64 and 128: too high, as a straight line cannot bend.
    times = {8: 0.010, 16: 0.010, 32: 0.010, 64: 0.020, 128: 0.040}
    assert script.left_out_errors(times)[32] > 0.1


def test_bad_rows_are_refused_with_their_line(script, tmp_path):
    (tmp_path / "batch.csv").write_text("model,batch,pass,step_s\nncf,128,1,0.002\nncf,256,1,nan\n")
    with pytest.raises(ValueError, match=r"batch.csv, line 3: .*finite"):
        script.read(tmp_path)
    (tmp_path / "batch.csv").write_text("model,batch,pass,step_s\nncf,x,1,0.002\n")
    with pytest.raises(ValueError, match="line 2: needs an integer batch"):
        script.read(tmp_path)
    (tmp_path / "batch.csv").write_text("model,batch,pass,step_s\n")
    with pytest.raises(ValueError, match="no measurements"):
        script.read(tmp_path)
    (tmp_path / "batch.csv").write_text("name,batch,pass,step_s\nncf,128,1,0.002\n")
    with pytest.raises(ValueError, match="no column model"):
        script.read(tmp_path)
    (tmp_path / "batch.csv").write_text("model,batch,pass,step_s\n,128,1,0.002\n")
    with pytest.raises(ValueError, match="line 2: the model is empty"):
        script.read(tmp_path)


def test_compare_table(script):
    # Exactly linear times give the line itself (10 ms + 0.5 ms per sample) and no error;
    # a model with two batches would leave one point to fit a line to, so its row says so.
    table = script.compare({"resnet18": {b: 0.010 + 0.0005 * b for b in (8, 16, 32)}, "ncf": {128: 0.002, 256: 0.002}})
    lines = table.splitlines()
    assert lines[2].startswith("| resnet18 | 8-32 | 10.00 | 0.5000 | 8: +0%, 16: +0%, 32: +0% | +0% |")
    assert lines[3] == "| ncf | 128, 256 | - | - | too few batches to leave one out | - |"


@pytest.mark.slow
def test_harness_on_cpu(script, tmp_path):
    pytest.importorskip("torch")
    script.measure(tmp_path, "cpu", steps=2, models=["ncf"])
    measured = script.read(tmp_path)
    # ncf's batches are 1/8 to 8 times 1,024; both passes ran each.
    assert list(measured) == ["ncf"] and sorted(measured["ncf"]) == [128, 256, 512, 1024, 2048, 4096, 8192]
    assert "command: python scripts/measure_batch_time.py" in (tmp_path / "env.txt").read_text()


BAD = [["measure", "--out", "X", "--steps", "0"], ["measure", "--out", "X", "--models", "bert"], ["compare", "NOPE"]]


@pytest.mark.parametrize("args", BAD)
def test_bad_input_exits_2(tmp_path, args):
    args = [str(tmp_path / a) if a in ("X", "NOPE") else a for a in args]
    done = subprocess.run([sys.executable, str(SCRIPTS / "measure_batch_time.py"), *args],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "error:" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "X").exists()
