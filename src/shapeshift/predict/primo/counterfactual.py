"""Nearest counterfactuals: the closest training example that the model sees differently.

Primo (Hu's thesis, ch. 5, post-processing) answers "what would change this prediction?"
with real examples rather than synthetic points: among the training rows whose *model
prediction* is on the other side of a threshold (or in another class), the nearest one in
standardised feature space, found with a ball tree (scikit-learn ``BallTree``). Using the
model's prediction, not the recorded label, makes the answer about the model, and a real
row is a plausible job by construction.

``Counterfactual.changes`` lists the features that differ, from the query's value to the
example's, so the answer reads "with 8 GPUs instead of 1, the predicted duration would be
above 1 h".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from shapeshift.predict.primo.base import PrimoModel


@dataclass(frozen=True)
class Counterfactual:
    """A training row near the query whose prediction crosses the threshold."""

    index: int
    distance: float
    prediction: float | str
    #: ``(feature, query value, counterfactual value)`` for every feature that differs.
    changes: tuple[tuple[str, float, float], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "distance": self.distance,
            "prediction": self.prediction,
            "changes": [{"feature": f, "from": a, "to": b} for f, a, b in self.changes],
        }


class CounterfactualFinder:
    """Ball tree over the training rows, split by which side of ``threshold`` the model puts them.

    For a regressor, ``threshold`` is required: a query predicted at or above it looks for
    the nearest row predicted below, and the other way round. For a classifier the
    nearest row of a different predicted class is returned (``threshold`` unused)."""

    def __init__(self, model: PrimoModel, x_train: Any, threshold: float | None = None):
        from sklearn.neighbors import BallTree

        if not model.is_classifier and threshold is None:
            raise ValueError("counterfactuals of a regressor need a threshold")
        self.model = model
        self.threshold = threshold
        self.x = np.asarray(x_train, dtype=np.float64)
        self._columns = getattr(x_train, "columns", None)
        self.scale = np.where(self.x.std(axis=0) > 0, self.x.std(axis=0), 1.0)
        self.center = self.x.mean(axis=0)
        self.side = self._side(self.x)
        self._trees: dict[Any, tuple[Any, np.ndarray]] = {}
        for value in np.unique(self.side):
            rows = np.flatnonzero(self.side == value)
            self._trees[value.item() if hasattr(value, "item") else value] = (BallTree(self._z(self.x[rows])), rows)

    def _z(self, x: np.ndarray) -> np.ndarray:
        return (x - self.center) / self.scale

    def _predict(self, x: np.ndarray) -> np.ndarray:
        if self._columns is not None:
            import pandas as pd

            return self.model.predict(pd.DataFrame(x, columns=self._columns))
        return self.model.predict(x)

    def _side(self, x: np.ndarray) -> np.ndarray:
        predicted = self._predict(x)
        if self.model.is_classifier:
            return predicted
        return predicted >= float(self.threshold)  # type: ignore[arg-type]

    def nearest(self, query: Any, k: int = 1) -> list[list[Counterfactual]]:
        """Up to ``k`` counterfactuals per query row (fewer when the other side has fewer rows)."""
        q = np.atleast_2d(np.asarray(query, dtype=np.float64))
        sides = self._side(q)
        names = list(self.model.feature_names_)
        out: list[list[Counterfactual]] = []
        for row, side in zip(q, sides, strict=True):
            found: list[Counterfactual] = []
            candidates = []
            for value, (tree, rows) in self._trees.items():
                if value == (side.item() if hasattr(side, "item") else side):
                    continue
                dist, idx = tree.query(self._z(row[None, :]), k=min(k, len(rows)))
                candidates += [(float(d), int(rows[i])) for d, i in zip(dist[0], idx[0], strict=True)]
            for distance, index in sorted(candidates)[:k]:
                example = self.x[index]
                prediction = self._predict(example[None, :])[0]
                changes = tuple(
                    (names[f], float(row[f]), float(example[f])) for f in range(len(names)) if row[f] != example[f]
                )
                value: float | str = float(prediction) if not self.model.is_classifier else str(prediction)
                found.append(Counterfactual(index, distance, value, changes))
            out.append(found)
        return out
