"""The one estimator contract of PrAM and PrDT (Primo, Hu's thesis ch. 5).

Every Primo model is a scikit-learn estimator (``fit``, ``predict``, ``get_params``,
``set_params``; it works in a ``Pipeline``, with ``cross_val_score`` and ``clone``) and
adds the interpretable part of the contract:

* ``explain()`` -> ``GlobalExplanation`` (shape functions or the tree);
  ``explain(X)`` -> one ``LocalExplanation`` per row, whose contributions add up to the
  model's output exactly;
* ``complexity()`` -> the size term of the selection score (leaves x depth for PrDT,
  interactions x bins for PrAM);
* ``monotonize(feature, increasing=True)`` -> the post-processing that makes the
  prediction monotone in one feature (PAV for PrAM, bounded leaves for PrDT);
* ``to_dict()`` / ``shapeshift.predict.primo.persist.save``: JSON, never pickle.

Inputs are numeric matrices (a DataFrame's column names become feature names); missing
or non-finite values are refused, as everywhere in Shapeshift. Subclasses implement
``_fit_form``, ``_raw``, ``_local`` and ``_global``.
"""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from shapeshift.errors import InputError
from shapeshift.predict.primo.explanation import GlobalExplanation, LocalExplanation


def require_explain_extra(module: str = "interpret") -> None:
    """Fail with one line naming the extra when a Primo dependency is missing."""
    if importlib.util.find_spec(module) is None:
        raise InputError(f"Primo models need {module}: pip install 'shapeshift[explain]'", field="estimator")


class PrimoModel(BaseEstimator):
    """Shared fit/predict/explain plumbing; see the module docstring for the contract."""

    #: Stable name in saved JSON ("pram-regressor", "prdt-classifier", ...).
    kind: ClassVar[str] = ""
    is_classifier: ClassVar[bool] = False

    # -- subclass hooks -------------------------------------------------------------
    def _fit_form(self, x: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None) -> None:
        raise NotImplementedError

    def _raw(self, x: np.ndarray) -> np.ndarray:
        """Regression value, or per-class scores (rows, classes) for classifiers."""
        raise NotImplementedError

    def _local(self, x: np.ndarray) -> list[LocalExplanation]:
        raise NotImplementedError

    def _global(self) -> GlobalExplanation:
        raise NotImplementedError

    def complexity(self) -> float:
        raise NotImplementedError

    def _monotonize_form(self, feature: int, increasing: bool) -> None:
        raise NotImplementedError

    def _form_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def _load_form(self, data: dict[str, Any]) -> None:
        raise NotImplementedError

    # -- scikit-learn contract ------------------------------------------------------
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> PrimoModel:
        x, target = validate_data(self, X, y, dtype=np.float64, y_numeric=not self.is_classifier)
        if self.is_classifier:
            check_classification_targets(target)
            self.classes_ = np.unique(target)
        weight = None if sample_weight is None else _check_sample_weight(sample_weight, x, dtype=np.float64)
        self.feature_names_ = self._feature_names(x.shape[1])
        self._fit_form(x, target, weight)
        for feature, direction in (self.monotone or {}).items():
            self._monotonize_form(self.feature_index(feature), direction > 0)
        return self

    def _feature_names(self, count: int) -> list[str]:
        names = getattr(self, "feature_names_in_", None)
        return [str(n) for n in names] if names is not None else [f"x{i}" for i in range(count)]

    def _x(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "feature_names_")
        return validate_data(self, X, dtype=np.float64, reset=False)

    def predict(self, X: Any) -> np.ndarray:
        raw = self._raw(self._x(X))
        if self.is_classifier:
            return self.classes_[np.argmax(raw, axis=1)]
        return raw

    def feature_index(self, feature: str | int) -> int:
        """A feature's column by name or position (what ``monotone`` keys may be)."""
        if isinstance(feature, (int, np.integer)) and not isinstance(feature, bool):
            if 0 <= int(feature) < len(self.feature_names_):
                return int(feature)
        elif feature in self.feature_names_:
            return self.feature_names_.index(str(feature))
        raise ValueError(f"unknown feature {feature!r}; known: {', '.join(self.feature_names_)}")

    # -- interpretable contract ------------------------------------------------------
    def explain(self, X: Any = None) -> GlobalExplanation | list[LocalExplanation]:
        """The global explanation, or one local explanation per row of ``X``."""
        check_is_fitted(self, "feature_names_")
        if X is None:
            return self._global()
        return self._local(self._x(X))

    def monotonize(self, feature: str | int, increasing: bool = True) -> PrimoModel:
        """Make the prediction monotone in ``feature`` (post-processing, no refit)."""
        check_is_fitted(self, "feature_names_")
        self._monotonize_form(self.feature_index(feature), increasing)
        return self

    def to_dict(self) -> dict[str, Any]:
        """Everything needed to predict and explain, as JSON-ready data (no code)."""
        check_is_fitted(self, "feature_names_")
        out: dict[str, Any] = {
            "kind": self.kind,
            "params": self.get_params(deep=False),
            "feature_names": self.feature_names_,
            "form": self._form_dict(),
        }
        if self.is_classifier:
            out["classes"] = self.classes_.tolist()
        return out

    def _restore(self, data: dict[str, Any]) -> None:
        self.feature_names_ = [str(n) for n in data["feature_names"]]
        self.n_features_in_ = len(self.feature_names_)
        if not all(n == f"x{i}" for i, n in enumerate(self.feature_names_)):
            self.feature_names_in_ = np.asarray(self.feature_names_, dtype=object)
        if self.is_classifier:
            self.classes_ = np.asarray(data["classes"])
        self._load_form(data["form"])


class PrimoClassifierMixin:
    """``predict_proba`` for the classifiers (kept off the regressors, as scikit-learn expects)."""

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order."""
        return self._proba(self._raw(self._x(X)))  # type: ignore[attr-defined]


def softmax_rows(raw: np.ndarray) -> np.ndarray:
    shifted = raw - raw.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)
