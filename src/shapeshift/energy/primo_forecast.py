"""``primo``: CES's active-node forecast from an interpretable additive model (PrAM).

The same features, training bins and no-look-ahead rule as the LightGBM forecaster
(``forecast.py``: calendar features, lags and rolling statistics that end at least
``horizon_bins`` before the bin they predict), fitted by PrAM (Primo's GA^2M,
``shapeshift.predict.primo``) so the forecast reads as one curve per feature: how much the
hour of day, yesterday's value or the last hour's mean add to the predicted node count.
Lags missing at the start of the series fall in PrAM's "missing" bin instead of being
imputed. Deterministic: one thread, ``random_state`` = the forecast seed.

One difference from the LightGBM forecaster, a named parameter: the day-of-month and
day-of-year features are left out (``date_features=False``). Held-out days always have a
day of year the training never saw, and an additive model turns those two features into
a per-date lookup of the level: with them, PrAM's two most important terms were ``day``
and ``dayofyear``, its in-sample SMAPE on the Philly node series 5.0 % and its held-out
SMAPE 21.3 % (19.2 % with the default bags); without them 6.3 % (README, "Interpretable
predictors").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from shapeshift.energy.forecast import ForecastConfig, NodeForecaster, features, training_rows


class PrimoNodeForecaster(NodeForecaster):
    """PrAM regressor of active nodes per bin (see the module docstring)."""

    name = "primo"

    #: Calendar features an additive model can only memorise per date (see the docstring).
    DATE_FEATURES = ("day", "dayofyear")

    def __init__(
        self,
        config: ForecastConfig | None = None,
        *,
        outer_bags: int = 2,
        interactions: int = 10,
        date_features: bool = False,
    ):
        super().__init__(config)
        self.date_features = date_features
        self.outer_bags = outer_bags
        self.interactions = interactions
        self.model: Any = None

    def fit(self, times: pd.DatetimeIndex, values: np.ndarray, train: np.ndarray | None = None) -> NodeForecaster:
        from shapeshift.predict.primo.pram import PrAMRegressor

        x, y = training_rows(times, values, train, self.config)
        x = self._columns(x)
        self.model = PrAMRegressor(
            outer_bags=self.outer_bags, interactions=self.interactions, random_state=self.config.seed
        ).fit(x, y)
        self._booster = self.model
        return self

    def predict(self, times: pd.DatetimeIndex, values: np.ndarray) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("forecast: fit() first")
        x = self._columns(features(times, np.asarray(values, dtype=float), self.config))
        return np.maximum(self.model.predict(x), 0.0)

    def _columns(self, x: pd.DataFrame) -> pd.DataFrame:
        return x if self.date_features else x.drop(columns=list(self.DATE_FEATURES))
