"""CES's ``primo`` forecaster: PrAM on the LightGBM forecaster's features, same no-look-ahead rule."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("interpret")

from shapeshift.energy.forecast import evaluate, smape
from shapeshift.energy.primo_forecast import PrimoNodeForecaster
from tests.energy.test_forecast import TINY, series


class FastPrimo(PrimoNodeForecaster):
    """One bag and two pairs: the same model, fitted faster for a test."""

    def __init__(self, config=None):
        super().__init__(config, outer_bags=1, interactions=2)


def test_primo_forecast_scores_held_out_bins_and_learns_the_daily_pattern():
    times, values = series(days=10)
    ev = evaluate(times, values, test_bins=48, config=TINY, forecaster=FastPrimo)
    assert ev.model == "primo" and "smape_primo_pct" in ev.summary()
    assert ev.smape_lightgbm == pytest.approx(smape(ev.prediction[-48:], values[-48:]))
    # A sine of amplitude 30 around 100 with noise sd 2: the hour of day explains it; within 15 %.
    assert 0 < ev.smape_lightgbm < 15


def test_primo_forecast_never_looks_ahead_and_is_deterministic():
    times, values = series(days=8)
    model = FastPrimo(TINY).fit(times, values, np.arange(values.size) < 150)
    clean = model.predict(times, values)
    poisoned = values.copy()
    t = 170
    poisoned[t - TINY.horizon_bins + 1 :] = 1e6  # every value the forecast of bin t may not see
    assert model.predict(times, poisoned)[t] == clean[t]
    again = FastPrimo(TINY).fit(times, values, np.arange(values.size) < 150)
    assert np.array_equal(again.predict(times, values), clean)
