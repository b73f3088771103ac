"""``gbdt``: P_M, Helios' learned duration model (LightGBM).

Hu et al. (SC 2021, §5) train a gradient-boosted tree model on job attributes known at
submission: user, VC, job name, GPU and CPU demand, and the submission time's month,
weekday, hour and minute (users' habits follow the calendar). Here:

* features: integer codes (first-seen order, categorical for LightGBM) of the user, the
  VC and the *name bucket* (the digit-free name stem, ``similarity.name_stem``), then
  GPUs, CPUs, and month, weekday, hour, minute of ``epoch + submit_time`` (UTC; the
  readers keep submit times as seconds from the trace start, so by default the calendar
  is counted from the trace's first second);
* target: ``log1p(duration)`` (durations span seconds to weeks; the model predicts the
  geometric scale and the estimate is ``expm1`` of the prediction, at least 1 s);
* training: on the finished jobs observed so far, the most recent ``window`` of them,
  first once ``min_train`` have finished and then again every ``retrain_every`` further
  finished jobs. ``observe`` is only ever fed jobs that already finished, so the model
  never sees the future. A fresh model is fitted each time (``rounds`` trees of
  ``leaves`` leaves, one thread, deterministic, seeded), which keeps a retrain to tens of
  milliseconds on a 10k-job window;
* before the first model exists, the estimate comes from ``fallback`` (P_R by default).

Estimates are fixed the first time a job is asked about (its submission), like P_R.
LightGBM is imported only when the first model is trained; without it, building the
estimator fails with one line naming the ``ml`` extra.
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections import deque
from typing import TYPE_CHECKING, Any, ClassVar

from shapeshift.engine.state import JobStatus
from shapeshift.errors import InputError
from shapeshift.predict.rolling import RollingEstimator, finished_duration
from shapeshift.predict.similarity import name_stem

if TYPE_CHECKING:
    import numpy as np

FEATURES = ("user", "vc", "name_bucket", "gpus", "cpus", "month", "weekday", "hour", "minute")
CATEGORICAL = (0, 1, 2)


def require_lightgbm() -> None:
    """Fail with one line when LightGBM is not installed."""
    if importlib.util.find_spec("lightgbm") is None:
        raise InputError("the gbdt estimator needs LightGBM: pip install 'shapeshift[ml]'", field="estimator")


class GbdtEstimator:
    """P_M: LightGBM on submission-time attributes, retrained as jobs finish."""

    name: ClassVar[str] = "gbdt"
    needs_history: ClassVar[bool] = True
    static: ClassVar[bool] = True

    def __init__(
        self,
        *,
        retrain_every: int = 1000,
        min_train: int = 100,
        window: int = 10000,
        rounds: int = 50,
        leaves: int = 31,
        learning_rate: float = 0.1,
        seed: int = 0,
        epoch: float = 0.0,
        fallback: RollingEstimator | None = None,
    ):
        self._require()
        if retrain_every < 1 or min_train < 1 or window < min_train or rounds < 1 or leaves < 2:
            raise ValueError("gbdt: need retrain_every, min_train, rounds >= 1, leaves >= 2, window >= min_train")
        self.retrain_every = retrain_every
        self.min_train = min_train
        self.rounds = rounds
        self.leaves = leaves
        self.learning_rate = learning_rate
        self.seed = seed
        self.epoch = epoch
        #: P_R for cold start; fed here only when this estimator owns it.
        self.fallback = fallback if fallback is not None else RollingEstimator()
        self._owns_fallback = fallback is None
        self._rows: deque[list[float]] = deque(maxlen=window)
        self._targets: deque[float] = deque(maxlen=window)
        self._codes: dict[tuple[str, str], int] = {}
        self._since_train = 0
        self._memo: dict[str, float] = {}
        self.model: Any = None
        self.trainings = 0
        self.train_seconds = 0.0

    def _require(self) -> None:
        """Check the model library is installed (subclasses with another model override)."""
        require_lightgbm()

    def _code(self, kind: str, value: str) -> int:
        key = (kind, value)
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self._codes)
        return code

    def features(self, job: JobStatus) -> list[float]:
        """The feature row of a job (what is known at its submission)."""
        spec = job.spec
        when = time.gmtime(self.epoch + spec.submit_time)
        return [
            float(self._code("user", spec.user)),
            float(self._code("vc", spec.vc)),
            float(self._code("name", name_stem(spec.name))),
            float(spec.num_gpus),
            float(spec.num_cpus),
            float(when.tm_mon),
            float(when.tm_wday),
            float(when.tm_hour),
            float(when.tm_min),
        ]

    def observe(self, job: JobStatus) -> None:
        if self._owns_fallback:
            self.fallback.observe(job)
        self._rows.append(self.features(job))
        self._targets.append(math.log1p(max(finished_duration(job), 0.0)))
        self._since_train += 1
        first = self.model is None and len(self._rows) >= self.min_train
        if first or (self.model is not None and self._since_train >= self.retrain_every):
            self.train()

    def train(self) -> None:
        """Fit a fresh model on the current window of finished jobs."""
        import numpy as np

        started = time.perf_counter()
        self.model = self._fit(np.asarray(self._rows, dtype=np.float64), np.asarray(self._targets, dtype=np.float64))
        self._since_train = 0
        self.trainings += 1
        self.train_seconds += time.perf_counter() - started

    def _fit(self, x: np.ndarray, y: np.ndarray) -> Any:
        """A fresh LightGBM model of ``y`` (log1p durations) on rows ``x``."""
        try:
            import lightgbm as lgb
        except ImportError:  # pragma: no cover - checked at construction
            require_lightgbm()
            raise
        params = {
            "objective": "regression",
            "num_leaves": self.leaves,
            "learning_rate": self.learning_rate,
            "min_data_in_leaf": 5,
            "num_threads": 1,
            "deterministic": True,
            "force_row_wise": True,
            "seed": self.seed,
            "verbose": -1,
        }
        data = lgb.Dataset(x, y, feature_name=list(FEATURES), categorical_feature=list(CATEGORICAL))
        return lgb.train(params, data, num_boost_round=self.rounds)

    def predict_rows(self, rows: np.ndarray) -> np.ndarray:
        import numpy as np

        return np.maximum(np.expm1(self.model.predict(rows, num_threads=1)), 1.0)

    def predict(self, job: JobStatus) -> float:
        """The estimate from the current model (or the fallback), not memoized."""
        if self.model is None:
            return self.fallback.predict(job)
        import numpy as np

        return float(self.predict_rows(np.asarray([self.features(job)], dtype=np.float64))[0])

    def estimate(self, job: JobStatus) -> float:
        found = self._memo.get(job.job_id)
        if found is None:
            found = self._memo[job.job_id] = self.predict(job)
        return found
