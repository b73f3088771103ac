"""Forecasting the number of active nodes per time bin, for CES.

CES powers nodes down only when demand is forecast to stay low. Following Helios
(Hu et al., SC'21, Sec. 5.1), a gradient-boosted model (LightGBM) predicts active nodes
per 10-minute bin from calendar features (hour, minute, weekday, day of month, day of
year), lags and rolling mean/std of the series. It is judged by SMAPE on held-out days
against the seasonal-naive baseline (the same bin one day earlier).

No look-ahead: every lag and rolling window ends at least ``horizon_bins`` bins before
the bin it predicts, so the forecast of any bin up to ``horizon_bins`` ahead uses only
data observed at decision time (the Helios artifact let some features peek at the
last hour; we do not). The control loop's lookahead must therefore not exceed
``horizon_bins``. Training is deterministic: fixed seed, ``deterministic=True``, one
thread, no bagging.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class ForecastConfig:
    """Parameters of the active-node forecaster (defaults stated)."""

    #: Every feature lags the target by at least this many bins. Default 18 (3 h of 10-min bins).
    horizon_bins: int = 18
    #: Bins per day, the seasonal period of the naive baseline. Default 144 (10-min bins).
    season_bins: int = 144
    #: Rolling windows of the mean/std features (bins). Default 1 h, 6 h, 1 day.
    windows: tuple[int, ...] = (6, 36, 144)
    #: Boosting rounds. Default 200.
    num_trees: int = 200
    learning_rate: float = 0.05
    num_leaves: int = 31
    min_data_in_leaf: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        if self.horizon_bins < 1 or self.season_bins < 1 or self.num_trees < 1:
            raise ValueError("forecast: horizon_bins, season_bins and num_trees must be >= 1")
        if any(w < 2 for w in self.windows):
            raise ValueError("forecast: rolling windows must be >= 2 bins")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def smape(prediction: np.ndarray, actual: np.ndarray) -> float:
    """Symmetric mean absolute percentage error (%, 0-200) over finite pairs.

    ``2 |p - a| / (|p| + |a|)``; a pair where both are 0 is a perfect forecast (0).
    """
    p = np.asarray(prediction, dtype=float)
    a = np.asarray(actual, dtype=float)
    ok = np.isfinite(p) & np.isfinite(a)
    p, a = p[ok], a[ok]
    if p.size == 0:
        return float("nan")
    denom = np.abs(p) + np.abs(a)
    ratio = np.divide(2.0 * np.abs(p - a), denom, out=np.zeros_like(denom), where=denom > 0)
    return float(100.0 * ratio.mean())


def seasonal_naive(values: np.ndarray, season: int) -> np.ndarray:
    """The value of the same bin one season earlier (NaN for the first season)."""
    values = np.asarray(values, dtype=float)
    out = np.full(values.shape, np.nan)
    if values.size > season:
        out[season:] = values[:-season]
    return out


def features(times: pd.DatetimeIndex, values: np.ndarray, config: ForecastConfig) -> pd.DataFrame:
    """Calendar features of each bin plus lags and rolling statistics ending
    ``horizon_bins`` bins earlier (NaN where the history is too short)."""
    h = config.horizon_bins
    s = pd.Series(np.asarray(values, dtype=float))
    lagged = s.shift(h)
    frame = pd.DataFrame(
        {
            "hour": times.hour.to_numpy(),
            "minute": times.minute.to_numpy(),
            "weekday": times.day_of_week.to_numpy(),
            "day": times.day.to_numpy(),
            "dayofyear": times.day_of_year.to_numpy(),
            f"lag_{h}": lagged.to_numpy(),
            f"lag_{h + 1}": s.shift(h + 1).to_numpy(),
            f"lag_{h + 6}": s.shift(h + 6).to_numpy(),
        }
    )
    for lag in (config.season_bins, 7 * config.season_bins):
        if lag > h + 6:
            frame[f"lag_{lag}"] = s.shift(lag).to_numpy()
    for w in config.windows:
        rolling = lagged.rolling(w, min_periods=max(2, w // 2))
        frame[f"mean_{w}"] = rolling.mean().to_numpy()
        frame[f"std_{w}"] = rolling.std().to_numpy()
    return frame


def training_rows(
    times: pd.DatetimeIndex, values: np.ndarray, train: np.ndarray | None, config: ForecastConfig
) -> tuple[pd.DataFrame, np.ndarray]:
    """Features and targets of the training bins: selected by ``train`` (all by default),
    with a value, and late enough that the newest lag exists."""
    values = np.asarray(values, dtype=float)
    x = features(times, values, config)
    mask = np.isfinite(values) & (np.ones(values.size, bool) if train is None else np.asarray(train, bool))
    mask &= x[f"lag_{config.horizon_bins}"].notna().to_numpy()
    if mask.sum() < 10:
        raise ValueError(f"forecast: only {int(mask.sum())} training bins; need at least 10")
    return x[mask], values[mask]


class NodeForecaster:
    """LightGBM regressor of active nodes per bin (see the module docstring)."""

    name = "lightgbm"

    def __init__(self, config: ForecastConfig | None = None):
        self.config = config or ForecastConfig()
        self._booster: Any = None

    def _params(self) -> dict[str, Any]:
        c = self.config
        return {
            "objective": "regression",
            "learning_rate": c.learning_rate,
            "num_leaves": c.num_leaves,
            "min_data_in_leaf": c.min_data_in_leaf,
            "seed": c.seed,
            "deterministic": True,
            "force_row_wise": True,
            "num_threads": 1,
            "verbose": -1,
        }

    def fit(self, times: pd.DatetimeIndex, values: np.ndarray, train: np.ndarray | None = None) -> NodeForecaster:
        """Train on the bins selected by ``train`` (all bins with a value by default)."""
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        import lightgbm as lgb

        x, y = training_rows(times, values, train, self.config)
        data = lgb.Dataset(x, label=y, free_raw_data=True)
        self._booster = lgb.train(self._params(), data, num_boost_round=self.config.num_trees)
        return self

    def predict(self, times: pd.DatetimeIndex, values: np.ndarray) -> np.ndarray:
        """Forecast of every bin from data at least ``horizon_bins`` bins older (clipped at 0)."""
        if self._booster is None:
            raise RuntimeError("forecast: fit() first")
        x = features(times, np.asarray(values, dtype=float), self.config)
        return np.maximum(self._booster.predict(x, num_threads=1), 0.0)


@dataclass(frozen=True)
class ForecastEvaluation:
    """Held-out accuracy of the model and of the seasonal-naive baseline, plus forecasts."""

    test_start: int
    train_bins: int
    test_bins: int
    smape_lightgbm: float
    smape_seasonal_naive: float
    prediction: np.ndarray
    naive: np.ndarray
    #: Which forecaster ``smape_lightgbm`` scores (``lightgbm`` or ``primo``).
    model: str = "lightgbm"

    def summary(self) -> dict[str, Any]:
        return {
            "train_bins": self.train_bins,
            "test_bins": self.test_bins,
            f"smape_{self.model}_pct": self.smape_lightgbm,
            "smape_seasonal_naive_pct": self.smape_seasonal_naive,
        }


def evaluate(
    times: pd.DatetimeIndex,
    values: np.ndarray,
    test_bins: int,
    config: ForecastConfig | None = None,
    forecaster: type[NodeForecaster] = NodeForecaster,
) -> ForecastEvaluation:
    """Train on every bin before the last ``test_bins`` and score both forecasters there.

    ``prediction`` and ``naive`` cover the whole series (the model's forecasts of the
    training bins are in-sample); scores use the held-out bins only. ``forecaster`` is the
    model class (``PrimoNodeForecaster`` for PrAM); its SMAPE is ``smape_lightgbm``.
    """
    config = config or ForecastConfig()
    values = np.asarray(values, dtype=float)
    n = values.size
    if not 0 < test_bins < n:
        raise ValueError(f"forecast: test_bins must be in 1..{n - 1}, got {test_bins}")
    start = n - test_bins
    train = np.arange(n) < start
    model = forecaster(config).fit(times, values, train)
    prediction = model.predict(times, values)
    naive = seasonal_naive(values, config.season_bins)
    return ForecastEvaluation(
        test_start=start,
        train_bins=int(start),
        test_bins=int(test_bins),
        smape_lightgbm=smape(prediction[start:], values[start:]),
        smape_seasonal_naive=smape(naive[start:], values[start:]),
        prediction=prediction,
        naive=naive,
        model=forecaster.name,
    )
