"""The active-node forecaster: SMAPE, the seasonal-naive baseline, no look-ahead, determinism."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd
import pytest

from shapeshift.energy.forecast import ForecastConfig, NodeForecaster, evaluate, features, seasonal_naive, smape

TINY = ForecastConfig(horizon_bins=3, season_bins=24, windows=(4, 12), num_trees=8, min_data_in_leaf=5)


def series(days: int = 8, season: int = 24, seed: int = 0) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """A daily pattern (hourly bins) with a little seeded noise."""
    rng = np.random.default_rng(seed)
    n = days * season
    t = np.arange(n)
    values = 100 + 30 * np.sin(2 * np.pi * t / season) + rng.normal(0, 2, n)
    return pd.date_range("2024-01-01", periods=n, freq="1h"), np.round(values)


def test_smape_by_hand():
    # Pairs: (1, 1) -> 0; (2, 4) -> 2 * 2 / 6 = 2/3; mean = 1/3 -> 33.33 %.
    assert smape(np.array([1.0, 2.0]), np.array([1.0, 4.0])) == pytest.approx(100 / 3)
    assert smape(np.array([0.0, 5.0]), np.array([0.0, 5.0])) == 0.0  # 0/0 counts as perfect
    assert smape(np.array([np.nan, 3.0]), np.array([1.0, 1.0])) == pytest.approx(100.0)  # NaN pairs skipped


def test_seasonal_naive_is_the_same_bin_one_season_earlier():
    assert seasonal_naive(np.arange(5.0), 2).tolist()[2:] == [0.0, 1.0, 2.0]
    assert np.isnan(seasonal_naive(np.arange(5.0), 2)[:2]).all()


def test_features_never_look_ahead():
    """Poisoning every value after ``t - horizon`` leaves the features of bin ``t`` unchanged."""
    times, values = series()
    t = 150
    clean = features(times, values, TINY).iloc[t]
    poisoned = values.copy()
    poisoned[t - TINY.horizon_bins + 1 :] = 1e9
    assert features(times, poisoned, TINY).iloc[t].equals(clean)
    poisoned[t - TINY.horizon_bins] = 1e9  # the newest value it may use does change them
    assert not features(times, poisoned, TINY).iloc[t].equals(clean)


def test_forecast_is_deterministic_and_beats_nothing_silly():
    times, values = series()
    a = NodeForecaster(TINY).fit(times, values).predict(times, values)
    b = NodeForecaster(TINY).fit(times, values).predict(times, values)
    assert np.array_equal(a, b)
    assert (a >= 0).all()


def test_evaluate_scores_held_out_bins_only():
    times, values = series(days=10)
    ev = evaluate(times, values, test_bins=48, config=TINY)
    assert ev.train_bins == 240 - 48 and ev.test_bins == 48
    assert ev.smape_seasonal_naive == pytest.approx(smape(ev.naive[-48:], values[-48:]))
    assert ev.smape_lightgbm == pytest.approx(smape(ev.prediction[-48:], values[-48:]))
    assert 0 < ev.smape_lightgbm < 15  # a learnable daily pattern
    with pytest.raises(ValueError):
        evaluate(times, values, test_bins=0, config=TINY)
