"""PrAM: Primo's additive model with pairwise interactions (GA^2M), regressor and classifier.

Hu's thesis (ch. 5, "PrAM") fits a generalised additive model with a few pairwise
interactions, ``g(E[y]) = b + sum_i f_i(x_i) + sum_(i,j) f_ij(x_i, x_j)``, by cyclic
gradient boosting over binned features: the Explainable Boosting Machine of
interpret-core (``ExplainableBoostingRegressor`` / ``...Classifier``), which is what the
thesis uses. Every shape function is a lookup table, so the model reads as one plot per
feature; the fitted tables are copied into ``AdditiveForm`` (see ``additive.py``).

Parameters (scikit-learn style; defaults are interpret's except where noted):

* ``interactions`` (10): pairwise terms, chosen by interpret's FAST ranking; part of the
  complexity (interpret's default is ``"5x"`` the feature count, ours a fixed count so the
  size budget is predictable);
* ``max_bins`` (256): bins per continuous feature (interpret: 1024); the other factor of
  the complexity;
* ``max_interaction_bins`` (32), ``learning_rate`` (0.04), ``max_rounds`` (5000; interpret
  50000, early stopping ends far sooner on scheduler traces), ``early_stopping_rounds``
  (100), ``min_samples_leaf`` (4), ``validation_size`` (0.15);
* ``outer_bags`` (8; interpret 14) and ``inner_bags`` (0): bagging for smoother shapes;
  tests use 1;
* ``early_stopping_tolerance``, ``max_leaves`` (``None``: interpret's own);
* ``boosting``: ``"interpret"`` (the installed release's rounds: greedy rounds between
  cyclic ones, then smoothing rounds) or ``"cyclic"`` (every round cyclic, no smoothing:
  how interpret 0.2.7 boosted, the release Lucid's artifact used);
* ``binning``: ``"quantile"`` (interpret's) or ``"uniform"`` (equal-width bins for the
  continuous features, what interpret 0.2.7 took as ``binning="uniform"``);
* ``feature_types``: ``None`` (all continuous) or one of ``"continuous"``/``"nominal"``
  per feature (nominal features take integer codes);
* ``monotone``: ``{feature: +1 | -1}`` applied after fitting by PAV (``monotonize``);
* ``random_state`` (0): interpret's seed; one thread, so a fit is reproducible.

A fit runs on interpret's AVX2 kernels (``portable_kernels``): by default interpret
picks AVX-512 where the CPU has it, and the two sum in different orders, so the same
data gave a different model, and a different Lucid run, on another machine.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from shapeshift.predict.primo.additive import AdditiveForm
from shapeshift.predict.primo.base import PrimoClassifierMixin, PrimoModel, require_explain_extra, softmax_rows
from shapeshift.predict.primo.explanation import GlobalExplanation, LocalExplanation, ShapeFunction, ranked

#: interpret-core's ``AccelerationFlags_AVX2`` (``interpret.utils._native.Native``).
_AVX2 = 0x2
#: interpret's option is global: fits in threads take turns (one saves, sets and puts
#: back the option at a time), so none runs on another's setting.
_KERNELS = threading.RLock()


@contextmanager
def portable_kernels() -> Iterator[None]:
    """interpret's boosting held to its AVX2 kernels while a fit runs (the option is
    global in interpret, so it is put back after): every x86-64 machine of the last
    decade has them, so a fit gives the same model on any of them. Without AVX2 (other
    architectures) interpret falls back to its portable code, whose sums may differ."""
    from interpret import develop

    with _KERNELS:
        before = develop.get_option("acceleration")
        develop.set_option("acceleration", _AVX2)
        try:
            yield
        finally:
            develop.set_option("acceleration", before)


class PrAMBase(PrimoModel):
    """Shared PrAM logic; use ``PrAMRegressor`` or ``PrAMClassifier``."""

    allow_nan: ClassVar[bool] = True

    def __init__(
        self,
        *,
        interactions: int = 10,
        max_bins: int = 256,
        max_interaction_bins: int = 32,
        learning_rate: float = 0.04,
        max_rounds: int = 5000,
        early_stopping_rounds: int = 100,
        min_samples_leaf: int = 4,
        validation_size: float = 0.15,
        outer_bags: int = 8,
        inner_bags: int = 0,
        early_stopping_tolerance: float | None = None,
        max_leaves: int | None = None,
        boosting: str = "interpret",
        binning: str = "quantile",
        feature_types: Sequence[str] | None = None,
        monotone: dict[str | int, int] | None = None,
        random_state: int = 0,
    ):
        self.interactions = interactions
        self.max_bins = max_bins
        self.max_interaction_bins = max_interaction_bins
        self.learning_rate = learning_rate
        self.max_rounds = max_rounds
        self.early_stopping_rounds = early_stopping_rounds
        self.min_samples_leaf = min_samples_leaf
        self.validation_size = validation_size
        self.outer_bags = outer_bags
        self.inner_bags = inner_bags
        self.early_stopping_tolerance = early_stopping_tolerance
        self.max_leaves = max_leaves
        self.boosting = boosting
        self.binning = binning
        self.feature_types = feature_types
        self.monotone = monotone
        self.random_state = random_state

    def _ebm_params(self, n_features: int) -> dict[str, Any]:
        types = list(self.feature_types) if self.feature_types is not None else ["continuous"] * n_features
        if len(types) != n_features or any(t not in ("continuous", "nominal") for t in types):
            raise ValueError(f"feature_types: need {n_features} of 'continuous' or 'nominal', got {types}")
        if self.binning not in ("quantile", "uniform") or self.boosting not in ("interpret", "cyclic"):
            raise ValueError(
                f"binning must be quantile or uniform and boosting interpret or cyclic, got "
                f"{self.binning!r} and {self.boosting!r}"
            )
        if self.binning == "uniform":
            types = ["uniform" if t == "continuous" else t for t in types]
        return {
            **self._release_params(),
            "feature_names": list(self.feature_names_),
            "feature_types": types,
            "interactions": int(self.interactions) if n_features > 1 and self._pairs_allowed() else 0,
            "max_bins": int(self.max_bins),
            "max_interaction_bins": int(self.max_interaction_bins),
            "learning_rate": float(self.learning_rate),
            "max_rounds": int(self.max_rounds),
            "early_stopping_rounds": int(self.early_stopping_rounds),
            "min_samples_leaf": int(self.min_samples_leaf),
            "validation_size": float(self.validation_size),
            "outer_bags": int(self.outer_bags),
            "inner_bags": int(self.inner_bags),
            "n_jobs": 1,
            "random_state": int(self.random_state),
        }

    def _release_params(self) -> dict[str, Any]:
        """The settings left to interpret unless given (``None``), and cyclic boosting."""
        params: dict[str, Any] = {}
        if self.early_stopping_tolerance is not None:
            params["early_stopping_tolerance"] = float(self.early_stopping_tolerance)
        if self.max_leaves is not None:
            params["max_leaves"] = int(self.max_leaves)
        if self.boosting == "cyclic":
            params.update(greedy_ratio=0.0, cyclic_progress=True, smoothing_rounds=0, interaction_smoothing_rounds=0)
        return params

    def _ebm_class(self) -> Any:
        raise NotImplementedError

    def _pairs_allowed(self) -> bool:
        """interpret fits no pairwise terms for more than two classes."""
        return not self.is_classifier or len(self.classes_) <= 2

    def _fit_form(self, x: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None) -> None:
        require_explain_extra("interpret")
        if sample_weight is not None:
            if (sample_weight < 0).any():
                raise ValueError("sample_weight must be >= 0")
            if not sample_weight.any():
                raise ValueError("sample weights are all zero: nothing to fit")
            # interpret refuses zero weights; a zero-weight row is the same as no row.
            kept = sample_weight > 0
            x, y, sample_weight = x[kept], y[kept], sample_weight[kept]
        if x.shape[0] < 2:
            raise ValueError(f"PrAM needs at least 2 samples with weight > 0, got n_samples = {x.shape[0]}")
        if self.is_classifier and len(np.unique(y)) < 2:
            raise ValueError("PrAM needs at least two classes among the rows with weight > 0")
        params = self._ebm_params(x.shape[1])
        if x.shape[0] * float(self.validation_size) < 1:
            params["validation_size"] = 0  # too few rows to hold any out: no early stopping
        ebm = self._ebm_class()(**params)
        with portable_kernels():
            ebm.fit(x, y, sample_weight=sample_weight)
        self.form_ = AdditiveForm.from_ebm(ebm, self.feature_names_)

    def _raw_scores(self, x: np.ndarray) -> np.ndarray:
        return self.form_.raw(x)

    def complexity(self) -> float:
        """Pairwise terms x bins (Primo's PrAM size), at least 1 pair's worth.

        ``bins`` is the largest number of bins any main effect actually uses, so a model
        whose features need few bins is simpler than its ``max_bins`` says."""
        pairs = sum(1 for t in self.form_.terms if len(t) > 1)
        bins = max(
            (len(s) - 2 for t, s in zip(self.form_.terms, self.form_.scores, strict=True) if len(t) == 1), default=1
        )
        return float(max(1, pairs) * max(1, bins))

    def _monotonize_form(self, feature: int, increasing: bool) -> None:
        self.form_.monotonize(feature, increasing)

    def _term_matrix(self, x: np.ndarray) -> np.ndarray:
        """Per row and term the score in the explained output (the positive class's logit)."""
        values = self.form_.term_values(x)
        if values.ndim == 3:  # multiclass: explain the predicted class
            chosen = np.argmax(self.form_.raw(x), axis=1)
            values = values[np.arange(len(x)), :, chosen]
        return values

    def _base(self, x: np.ndarray) -> np.ndarray:
        intercept = self.form_.intercept
        if intercept.size > 1:
            return intercept[np.argmax(self.form_.raw(x), axis=1)]
        return np.full(len(x), intercept[0])

    def _local(self, x: np.ndarray) -> list[LocalExplanation]:
        values = self._term_matrix(x)
        base = self._base(x)
        names = [self.form_.term_name(t) for t in range(len(self.form_.terms))]
        return [
            LocalExplanation(float(base[i] + values[i].sum()), float(base[i]), ranked(names, values[i].tolist()))
            for i in range(len(x))
        ]

    def _importances(self) -> list[float]:
        """Mean absolute score of each term over the training bins (interpret's importance)."""
        out = []
        for scores, weights in zip(self.form_.scores, self.form_.weights, strict=True):
            magnitude = np.abs(scores) if scores.ndim == len(weights.shape) else np.abs(scores).mean(axis=-1)
            total = weights.sum()
            out.append(float((magnitude * weights).sum() / total) if total > 0 else 0.0)
        return out

    def _global(self) -> GlobalExplanation:
        importance = self._importances()
        shapes, pairs = [], []
        per_feature = dict.fromkeys(self.feature_names_, 0.0)
        for t, features in enumerate(self.form_.terms):
            name = self.form_.term_name(t)
            for f in features:
                per_feature[self.feature_names_[f]] += importance[t]
            if len(features) > 1:
                pairs.append((name, importance[t]))
                continue
            labels, lefts = self.form_.shape_labels(features[0])
            scores = self.form_.scores[t]
            if scores.ndim > 1:
                scores = scores.mean(axis=-1)
            shapes.append(
                ShapeFunction(
                    name, tuple(labels), tuple(scores[1 : 1 + len(labels)].tolist()), tuple(lefts), importance[t]
                )
            )
        intercept = float(self.form_.intercept.mean())
        return GlobalExplanation("pram", self.complexity(), intercept, tuple(shapes), tuple(pairs), None, per_feature)

    def _form_dict(self) -> dict[str, Any]:
        return self.form_.to_dict()

    def _load_form(self, data: dict[str, Any]) -> None:
        self.form_ = AdditiveForm.from_dict(data)


class PrAMRegressor(RegressorMixin, PrAMBase):
    """PrAM for a numeric target (identity link, RMSE boosting)."""

    kind: ClassVar[str] = "pram-regressor"

    def _ebm_class(self) -> Any:
        from interpret.glassbox import ExplainableBoostingRegressor

        return ExplainableBoostingRegressor

    def _raw(self, x: np.ndarray) -> np.ndarray:
        return self._raw_scores(x)


class PrAMClassifier(PrimoClassifierMixin, ClassifierMixin, PrAMBase):
    """PrAM for classes (logit link; softmax over per-class tables when more than two)."""

    kind: ClassVar[str] = "pram-classifier"
    is_classifier: ClassVar[bool] = True

    def _ebm_class(self) -> Any:
        from interpret.glassbox import ExplainableBoostingClassifier

        return ExplainableBoostingClassifier

    def _fit_form(self, x: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None) -> None:
        if len(self.classes_) == 1:
            self.form_ = AdditiveForm(list(self.feature_names_), [], [], [], [], np.zeros(1), "constant")
            return
        # Fit on class positions so interpret's class order is ours (classes_ sorted).
        super()._fit_form(x, np.searchsorted(self.classes_, y), sample_weight)

    def _raw(self, x: np.ndarray) -> np.ndarray:
        if self.form_.link == "constant":
            return np.zeros((len(x), 1))
        raw = self._raw_scores(x)
        if raw.ndim == 1:
            return np.column_stack([np.zeros_like(raw), raw])
        return raw

    def _proba(self, raw: np.ndarray) -> np.ndarray:
        return softmax_rows(raw)
