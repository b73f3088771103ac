"""CES replay over a node series: input validation, binning, figures, CLI."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.energy.ces import CESConfig
from shapeshift.energy.forecast import ForecastConfig
from shapeshift.energy.replay import bin_series, read_node_series, replay_ces, run_replay, summarize_replay
from shapeshift.errors import InputError
from tests.conftest import bundled

runner = CliRunner()


def write_series(path, days: float = 6.0, total: int = 40, step_min: int = 10, seed: int = 0) -> None:
    """Busy nodes with a daily cycle (10 at night, 30 by day) plus seeded noise."""
    n = int(days * 24 * 60 / step_min)
    times = pd.date_range("2024-01-01", periods=n, freq=f"{step_min}min")
    rng = np.random.default_rng(seed)
    active = np.clip(np.round(20 - 10 * np.cos(2 * np.pi * times.hour / 24) + rng.normal(0, 1, n)), 0, total)
    pd.DataFrame({"time": times.strftime("%Y-%m-%d %H:%M:%S"), "active": active.astype(int), "total": total}).to_csv(
        path, index=False
    )


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("time,active\n2024-01-01 00:00,1\n2024-01-01 00:01,1\n", 1, "total"),
        ("time,active,total\n2024-01-01 00:00,1,4\n2024-01-01 00:01,-1,4\n", 3, "active"),
        ("time,active,total\n2024-01-01 00:00,1,4\nyesterday,1,4\n", 3, "time"),
        ("time,active,total\n2024-01-01 00:01,1,4\n2024-01-01 00:00,1,4\n", 3, "time"),
        ("time,active,total\n2024-01-01 00:00,1,4\n2024-01-01 00:01,1,\n", 3, "total"),
    ],
)
def test_series_validation_names_file_line_and_column(tmp_path, text, line, field):
    path = tmp_path / "s.csv"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_node_series(path)
    assert err.value.line == line and err.value.field == field and err.value.path == str(path)


def test_missing_or_tiny_series_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_node_series(tmp_path / "none.csv")
    (tmp_path / "one.csv").write_text("time,active,total\n2024-01-01 00:00,1,4\n")
    with pytest.raises(InputError, match="at least 2 rows"):
        read_node_series(tmp_path / "one.csv")


def test_binning_takes_the_peak_and_fills_gaps(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text(
        "time,active,total\n"
        "2024-01-01 00:00,3,10\n2024-01-01 00:05,7,10\n"  # bin 0: peak 7
        "2024-01-01 00:31,2,12\n"  # bins 1 and 2 empty (filled from bin 0), bin 3: 2 of 12
    )
    b = bin_series(read_node_series(path), 600)
    assert b.demand.tolist() == [7, 7, 7, 2] and b.total.tolist() == [10, 10, 10, 12]
    assert b.filled.tolist() == [False, True, True, False]


def test_replay_figures_by_hand():
    cfg = CESConfig(buffer=2, history_bins=1, hold_bins=0, lookahead_bins=1)
    demand = np.array([5, 5, 3, 8])
    total = np.array([10, 10, 10, 10])
    forecast = np.array([5.0, 5.0, 3.0, 8.0])
    traj = replay_ces(demand, total, forecast, cfg)
    # Start at 5 + 2 = 7; bin 2: past drop 2, forecast of bin 3 = 8 > 3 -> no cut; bin 3: 8 > 7 -> wake to 10.
    assert traj["powered"].tolist() == [7, 7, 7, 10]
    assert traj["shortage"].tolist() == [0, 0, 0, 1] and traj["woken"].tolist() == [0, 0, 0, 3]
    s = summarize_replay(demand, total, traj, cfg)
    assert s["avg_sleeping_nodes"] == pytest.approx((3 + 3 + 3 + 0) / 4)
    assert s["energy_node_hours_saved"] == pytest.approx(9 * 600 / 3600)
    assert s["energy_kwh_saved"] == pytest.approx(1.5 * 0.8 * 3)
    assert s["utilization_before"] == pytest.approx(np.mean([0.5, 0.5, 0.3, 0.8]))
    assert s["utilization_after"] == pytest.approx(np.mean([5 / 7, 5 / 7, 3 / 7, 0.8]))
    assert s["wakeups"] == 1 and s["shortage_bins"] == 1 and s["shortage_node_bins"] == 1
    assert s["wakeups_per_day"] == pytest.approx(1 / (4 * 600 / 86400))


def test_run_replay_with_lightgbm_holds_out_the_last_days(tmp_path):
    path = tmp_path / "s.csv"
    write_series(path, days=6)
    fc = ForecastConfig(num_trees=10)
    result = run_replay(read_node_series(path), CESConfig(buffer=2), fc, test_days=1)
    s = result.summary
    assert s["bins"] == 144 and s["forecast"]["model"] == "lightgbm" and s["forecast"]["train_bins"] == 5 * 144
    assert s["forecast"]["smape_lightgbm_pct"] < 30 and s["forecast"]["smape_seasonal_naive_pct"] < 30
    assert (result.powered >= np.minimum(result.demand, result.total)).all()
    assert s["energy_node_hours_saved"] > 0 and s["utilization_after"] > s["utilization_before"]
    again = run_replay(read_node_series(path), CESConfig(buffer=2), fc, test_days=1)
    assert again.summary == s  # deterministic


def test_short_series_falls_back_to_seasonal_naive(tmp_path):
    path = tmp_path / "s.csv"
    write_series(path, days=2)
    result = run_replay(read_node_series(path), test_days=1)
    assert result.summary["forecast"]["model"] == "seasonal-naive"
    assert result.summary["bins"] == 2 * 144 and result.summary["notes"]


def test_lookahead_beyond_the_forecast_horizon_is_refused(tmp_path):
    path = tmp_path / "s.csv"
    write_series(path, days=1)
    with pytest.raises(InputError, match="horizon"):
        run_replay(read_node_series(path), CESConfig(lookahead_bins=30), ForecastConfig(horizon_bins=18))


def test_energy_replay_command(tmp_path):
    path = tmp_path / "s.csv"
    write_series(path, days=5)
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["energy", "replay", str(path), "--out", str(out), "--test-days", "1", "--trees", "5", "--buffer", "2"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads((out / "energy.json").read_text())
    assert data["config"]["buffer"] == 2 and data["energy_kwh_saved"] == pytest.approx(
        data["energy_node_hours_saved"] * 2.4, rel=1e-5
    )
    png = out / "ces_replay.png"
    assert png.stat().st_size > 0 and png.read_bytes()[:4] == b"\x89PNG"
    assert len(pd.read_csv(out / "ces_trajectory.csv")) == data["bins"]
    bad = tmp_path / "bad.csv"
    bad.write_text("time,nodes\n2024-01-01,1\n")
    failed = runner.invoke(app, ["energy", "replay", str(bad), "--out", str(out)])
    assert failed.exit_code == 2 and "active" in failed.output


def test_philly_node_series_replay():
    path = bundled("philly-node-sequence")
    result = run_replay(read_node_series(path), forecast_config=ForecastConfig(num_trees=20))
    s = result.summary
    assert s["days"] == pytest.approx(14.0) and s["avg_total_nodes"] == pytest.approx(420.0)
    assert 0 < s["avg_sleeping_nodes"] < 420 and s["utilization_after"] > s["utilization_before"]
    assert s["energy_kwh_saved"] == pytest.approx(s["energy_node_hours_saved"] * 2.4)
    # A shortage is counted and covered by a wake-up in the same bin: powered >= active after every step.
    assert (result.powered >= result.demand).all()
    assert s["shortage_bins"] == s["wakeups"]
