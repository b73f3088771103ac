"""Lucid's two learned models: job duration (orchestrator) and cluster load (forecaster).

Both are Primo PrAM regressors (``shapeshift.predict.primo``), as in Hu's thesis
(chapter 4, "throughput predict model" and "workload estimate model") and the Lucid
artifact (``simulation/estimator/estimator_lucid.ipynb``,
``simulation/predictor/predictor.ipynb``). They learn **only from the past**: the
duration model from jobs that have finished, the forecaster from submissions already
seen. ``tests/policies/lucid/test_lucid.py`` poisons a future job to prove it.

Duration model features: user, VC, name bucket (nominal codes), GPUs, submit hour and
weekday, and the profiled GPU utilisation, memory-bandwidth use and GPU memory. The
target is the recorded duration. A negative prediction becomes 1,000 s (the artifact's
``CombinedEstimator``). A job whose user the model has never seen gets the mean duration
of finished jobs with its GPU count (thesis chapter 4). Traces without users (Philly)
leave the user feature empty for every job, which counts as known. With
``monotone_gpus`` (the thesis's rule; the artifact's notebook lacks it, so it is off by
default) the fitted model is made non-decreasing in the GPU count by pool-adjacent
violators on that feature's shape function (``PrimoModel.monotonize``), so a job never
gets a shorter estimate for asking more GPUs.

Forecaster: GPU jobs submitted per 10-minute bin (the artifact's
``cluster_throughput.csv`` granularity). Features per bin: hour, weekday, the counts 1 h,
3 h and 1 day earlier, and the mean, median and standard deviation of the hour that
ended 1 h earlier (``predictor.ipynb``'s shift and rolling features). Every lag is at
least 6 bins, so the next 5 bins (the artifact averages ``head()``, 5 rows) are
predicted from observed counts only.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from shapeshift.model import JobSpec
from shapeshift.perf.colocation import SharingProfile

DURATION_FEATURES = ("user", "vc", "name", "gpus", "hour", "weekday", "gpu_util", "mem_bw", "gpu_mem")
GPUS = DURATION_FEATURES.index("gpus")
FORECAST_FEATURES = ("hour", "weekday", "lag_1h", "lag_3h", "lag_1d", "mean_1h", "median_1h", "std_1h")
#: Seconds per forecaster bin, and the bins averaged for the sharing switch.
BIN_SECONDS = 600.0
HORIZON_BINS = 5
_LAGS = (6, 18, 144)
NEGATIVE_PREDICTION = 1000.0


def name_bucket(name: str) -> str:
    """A job name without digits and separators (``resnet50_lr0.1_run3`` -> ``resnet``):
    the artifact groups near-identical names the same way (difflib matching)."""
    return re.sub(r"[^a-z]+", " ", name.lower()).strip().split(" ")[0] if name else ""


@dataclass
class Codes:
    """Stable integer codes for nominal values, in order of first appearance."""

    codes: dict[str, int] = field(default_factory=dict)

    def of(self, value: str) -> int:
        code = self.codes.get(value)
        if code is None:
            code = self.codes[value] = len(self.codes)
        return code


class RowEvaluator:
    """A fitted PrAM regressor's prediction for one row at a time, in plain Python.

    ``predict`` re-validates its input with scikit-learn and bins column by column with
    numpy, about 2 ms for one row of 29 terms; the scheduler asks for one row per
    arriving job, 80,000 times on Philly. This reads the same fitted form
    (``AdditiveForm``: bins, terms, score tables, intercept) with ``bisect``, following its
    binning rule; ``test_lucid`` checks that both give the same numbers.
    """

    def __init__(self, model):  # type: ignore[no-untyped-def]
        from shapeshift.predict.primo.additive import _category_key

        form = model.form_
        self._key = _category_key
        self.intercept = float(form.intercept[0])
        # Each feature is binned once per binning level a term uses (mains level 0, pairs
        # level 1), not once per term; score tables as nested lists (the same float64s).
        slot_of: dict[tuple[int, int], int] = {}
        self.binnings: list[tuple[int, Any]] = []
        self.terms: list[tuple[tuple[int, ...], Any]] = []
        for t, features in enumerate(form.terms):
            level = len(features) - 1
            slots = []
            for f in features:
                if (f, level) not in slot_of:
                    slot_of[(f, level)] = len(self.binnings)
                    self.binnings.append((f, self._binning(form.bins[f], level)))
                slots.append(slot_of[(f, level)])
            self.terms.append((tuple(slots), form.scores[t].tolist()))

    @staticmethod
    def _binning(levels: list, level: int):  # type: ignore[no-untyped-def]
        binning = levels[min(level, len(levels) - 1)]
        return binning if isinstance(binning, dict) else [float(c) for c in binning]

    def _bin(self, binning, value: float) -> int:  # type: ignore[no-untyped-def]
        if value != value:  # NaN: interpret's "missing" bin
            return 0
        if isinstance(binning, dict):
            return binning.get(self._key(value), len(binning) + 1)
        return bisect.bisect_right(binning, value) + 1

    def __call__(self, row: Sequence[float]) -> float:
        bins = [self._bin(binning, row[f]) for f, binning in self.binnings]
        total = self.intercept
        for slots, table in self.terms:  # in term order: the same sum as ``predict``'s
            for slot in slots:
                table = table[bins[slot]]
            total += table
        return total


@dataclass(frozen=True)
class PrAMSettings:
    """EBM settings of both models. Defaults: the artifact's. Its notebook
    (``estimator_lucid.ipynb``) sets learning rate 0.01, 20 interactions and uniform
    binning and leaves the rest to interpret-core 0.2.7, the release of its time
    (``ebm.py``: 8 outer bags, at most 5,000 rounds, early stopping after 50 rounds
    below a 1e-4 gain, at most 3 leaves and 2 samples a leaf, every round cyclic).
    ``release="installed"`` leaves those to the installed interpret instead (greedy and
    smoothing rounds, quantile bins) and PrAM's defaults (early stopping 100)."""

    learning_rate: float = 0.01
    interactions: int = 20
    max_rounds: int = 5000
    outer_bags: int = 8
    release: str = "0.2.7"


#: interpret-core 0.2.7's defaults where later releases differ, and the notebook's binning.
INTERPRET_027 = {
    "early_stopping_rounds": 50,
    "early_stopping_tolerance": 1e-4,
    "max_leaves": 3,
    "min_samples_leaf": 2,
    "boosting": "cyclic",
    "binning": "uniform",
}


def _pram(seed: int, settings: PrAMSettings, nominal: int, total: int):  # type: ignore[no-untyped-def]
    from shapeshift.predict.primo import PrAMRegressor

    return PrAMRegressor(
        learning_rate=settings.learning_rate,
        interactions=settings.interactions,
        max_rounds=settings.max_rounds,
        outer_bags=settings.outer_bags,
        feature_types=["nominal"] * nominal + ["continuous"] * (total - nominal),
        random_state=seed,
        **(INTERPRET_027 if settings.release == "0.2.7" else {}),
    )


class DurationModel:
    """PrAM over finished jobs; see the module docstring."""

    def __init__(
        self, seed: int = 0, settings: PrAMSettings = PrAMSettings(), window: int = 10_000, monotone_gpus: bool = False
    ):
        self.seed = seed
        self.monotone_gpus = monotone_gpus
        self.settings = settings
        self.window = window
        self.users, self.vcs, self.names = Codes(), Codes(), Codes()
        self.rows: list[list[float]] = []
        self.targets: list[float] = []
        self.known_users: set[str] = set()
        self.by_gpus: dict[int, list[float]] = {}
        self.model = None
        self._fill: np.ndarray | None = None

    def row(self, spec: JobSpec, profile: SharingProfile | None) -> list[float]:
        day = spec.submit_time / 86400.0
        util, bw, mem = (profile.gpu_util, profile.mem_bw, profile.gpu_mem_gb) if profile else (math.nan,) * 3
        return [
            float(self.users.of(spec.user)),
            float(self.vcs.of(spec.vc)),
            float(self.names.of(name_bucket(spec.name))),
            float(spec.num_gpus),
            float(int((day % 1.0) * 24)),
            float(int(day) % 7),
            util,
            bw,
            mem,
        ]

    def observe(self, spec: JobSpec, profile: SharingProfile | None, duration: float) -> None:
        """A finished job (never call this with a job that has not finished)."""
        self.rows.append(self.row(spec, profile))
        self.targets.append(duration)
        self.known_users.add(spec.user)
        self.by_gpus.setdefault(spec.num_gpus, []).append(duration)

    @property
    def observed(self) -> int:
        return len(self.targets)

    def fit(self, rows: int | None = None) -> None:
        """Fit on the first ``rows`` finished jobs (all by default), the last ``window`` of them."""
        rows = self.observed if rows is None else rows
        x = np.array(self.rows[max(rows - self.window, 0) : rows], dtype=float)
        y = np.array(self.targets[max(rows - self.window, 0) : rows], dtype=float)
        # Jobs measured only while running (larger than the profiler takes) may lack
        # profiled features; they take the column median (Primo refuses missing values).
        fill = np.nanmedian(np.where(np.isfinite(x), x, np.nan), axis=0)
        self._fill = np.where(np.isfinite(fill), fill, 0.0)
        x = np.where(np.isfinite(x), x, self._fill)
        self.model = _pram(self.seed, self.settings, 3, len(DURATION_FEATURES))
        self.model.fit(x, y)
        if self.monotone_gpus and len(np.unique(x[:, GPUS])) > 1:
            self.model.monotonize(GPUS, increasing=True)
        self.evaluate = RowEvaluator(self.model)

    def predict(self, specs: Sequence[JobSpec], profiles: Sequence[SharingProfile | None]) -> list[float]:
        """Predicted durations (s); the mean of all finished jobs before the first fit."""
        if not specs:
            return []
        if self.model is None or self._fill is None:
            mean = float(np.mean(self.targets)) if self.targets else 1.0
            return [mean] * len(specs)
        fill = self._fill
        out = []
        for spec, profile in zip(specs, profiles, strict=True):
            row = [v if math.isfinite(v) else float(fill[i]) for i, v in enumerate(self.row(spec, profile))]
            value = self.evaluate(row)
            out.append(value if value > 0 else NEGATIVE_PREDICTION)
        for i, spec in enumerate(specs):
            if spec.user not in self.known_users:
                same = self.by_gpus.get(spec.num_gpus)
                out[i] = float(np.mean(same)) if same else float(np.mean(self.targets))
        return out


class SubmissionForecaster:
    """PrAM over 10-minute submission counts; see the module docstring."""

    def __init__(self, seed: int = 0, settings: PrAMSettings = PrAMSettings(), window_days: float = 28.0):
        self.seed = seed
        self.settings = settings
        self.window_bins = int(window_days * 86400 / BIN_SECONDS)
        self.counts: dict[int, int] = {}
        self.model = None
        self._cached: tuple[int, float] | None = None

    def observe_submit(self, submit_time: float) -> None:
        b = int(submit_time // BIN_SECONDS)
        self.counts[b] = self.counts.get(b, 0) + 1

    def _series(self, first: int, last: int) -> np.ndarray:
        return np.array([self.counts.get(b, 0) for b in range(first, last + 1)], dtype=float)

    @staticmethod
    def _features(series: np.ndarray, first: int, b: int) -> list[float]:
        i = b - first
        hour = ((b * BIN_SECONDS) % 86400) // 3600
        weekday = (b * BIN_SECONDS // 86400) % 7
        past = series[max(i - 11, 0) : max(i - 5, 0)]
        lags = [series[i - lag] if i - lag >= 0 else 0.0 for lag in _LAGS]
        stats = [past.mean(), float(np.median(past)), past.std()] if past.size else [0.0, 0.0, 0.0]
        return [float(hour), float(weekday), *lags, *map(float, stats)]

    @classmethod
    def _feature_rows(cls, series: np.ndarray, first: int, bins: range) -> np.ndarray:
        """``_features`` of every bin in ``bins`` as one matrix, computed column-wise (the
        same floating-point operations; a test checks the equality). Needs every bin's
        full history (``bin - first >= max(_LAGS)``), as fitting and forecasting have."""
        b = np.arange(bins.start, bins.stop, dtype=np.int64)
        i = b - first
        if len(b) == 0 or int(i.min()) < max(_LAGS):
            return np.array([cls._features(series, first, int(k)) for k in bins], dtype=float).reshape(len(b), -1)
        seconds = b * BIN_SECONDS
        past = sliding_window_view(series, 6)[i - 11]  # bins i-11 .. i-6, as _features
        columns = [
            (seconds % 86400) // 3600,
            (seconds // 86400) % 7,
            *(series[i - lag] for lag in _LAGS),
            past.mean(axis=1),
            np.median(past, axis=1),
            past.std(axis=1),
        ]
        return np.column_stack(columns)

    @staticmethod
    def ready(now: float) -> bool:
        """Whether two days of complete bins exist before ``now``."""
        return int(now // BIN_SECONDS) - 1 >= 2 * max(_LAGS)

    def fit(self, now: float) -> bool:
        """Fit on the complete bins before ``now``; False when under two days are known."""
        last = int(now // BIN_SECONDS) - 1
        if not self.ready(now):
            return False
        start = max(max(_LAGS), last - self.window_bins)
        first = start - max(_LAGS)
        series = self._series(first, last)
        x = self._feature_rows(series, first, range(start, last + 1))
        y = series[start - first :]
        self.model = _pram(self.seed, self.settings, 0, len(FORECAST_FEATURES))
        self.model.fit(x, y)
        self.evaluate = RowEvaluator(self.model)
        self._cached = None
        return True

    def forecast(self, now: float) -> float | None:
        """Mean predicted submissions over the next ``HORIZON_BINS`` bins (None before a
        fit). Only complete bins feed the features, so the answer changes once per bin."""
        if self.model is None:
            return None
        current = int(now // BIN_SECONDS)
        if self._cached is not None and self._cached[0] == current:
            return self._cached[1]
        first = current - max(_LAGS) - HORIZON_BINS
        # The bins to predict lie after ``current``; their own counts are never read.
        series = np.concatenate([self._series(first, current - 1), np.zeros(HORIZON_BINS + 1)])
        rows = self._feature_rows(series, first, range(current + 1, current + HORIZON_BINS + 1)).tolist()
        value = float(np.mean([self.evaluate(row) for row in rows]))
        self._cached = (current, value)
        return value
