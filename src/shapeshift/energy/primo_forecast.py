"""``primo``: CES's active-node forecast from an interpretable additive model (PrAM).

The same features, training bins and no-look-ahead rule as the LightGBM forecaster
(``forecast.py``: calendar features, lags and rolling statistics that end at least
``horizon_bins`` before the bin they predict), fitted by PrAM (Primo's GA^2M,
``shapeshift.predict.primo``) so the forecast reads as one curve per feature: how much the
hour of day, yesterday's value or the last hour's mean add to the predicted node count.
Lags missing at the start of the series fall in PrAM's "missing" bin instead of being
imputed. Deterministic: one thread, ``random_state`` = the forecast seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from shapeshift.energy.forecast import ForecastConfig, NodeForecaster, features, training_rows


class PrimoNodeForecaster(NodeForecaster):
    """PrAM regressor of active nodes per bin (see the module docstring)."""

    name = "primo"

    def __init__(self, config: ForecastConfig | None = None, *, outer_bags: int = 2, interactions: int = 10):
        super().__init__(config)
        self.outer_bags = outer_bags
        self.interactions = interactions
        self.model: Any = None

    def fit(self, times: pd.DatetimeIndex, values: np.ndarray, train: np.ndarray | None = None) -> NodeForecaster:
        from shapeshift.predict.primo.pram import PrAMRegressor

        x, y = training_rows(times, values, train, self.config)
        self.model = PrAMRegressor(
            outer_bags=self.outer_bags, interactions=self.interactions, random_state=self.config.seed
        ).fit(x, y)
        self._booster = self.model
        return self

    def predict(self, times: pd.DatetimeIndex, values: np.ndarray) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("forecast: fit() first")
        x = features(times, np.asarray(values, dtype=float), self.config)
        return np.maximum(self.model.predict(x), 0.0)
