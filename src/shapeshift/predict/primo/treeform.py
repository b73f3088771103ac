"""PrDT's fitted form: a binary tree as flat arrays, evaluated with numpy only.

Node ``i`` is a leaf when ``left[i] == -1``; otherwise rows with
``x[feature[i]] <= threshold[i]`` go to ``left[i]``, the others to ``right[i]``.
``value[i]`` is the node's mean target (regression, one column) or its class
probabilities (classification, one column per class); ``weight[i]`` the training weight
that reached it. See ``prdt.py`` for what the monotone rule guarantees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class TreeForm:
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    weight: np.ndarray

    @classmethod
    def from_sklearn(cls, tree: Any, *, is_classifier: bool) -> TreeForm:
        value = np.array(tree.value[:, 0, :], dtype=np.float64)
        if is_classifier:  # fractions already in recent scikit-learn; normalise to be sure
            value = value / np.maximum(value.sum(axis=1, keepdims=True), 1e-300)
        return cls(
            left=np.array(tree.children_left, dtype=np.int64),
            right=np.array(tree.children_right, dtype=np.int64),
            feature=np.array(tree.feature, dtype=np.int64),
            threshold=np.array(tree.threshold, dtype=np.float64),
            value=value,
            weight=np.array(tree.weighted_n_node_samples, dtype=np.float64),
        )

    def is_leaf(self, node: int) -> bool:
        return bool(self.left[node] == -1)

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """The leaf each row lands in (one vectorised step per level)."""
        node = np.zeros(len(x), dtype=np.int64)
        rows = np.arange(len(x))
        while True:
            inner = self.left[node] != -1
            if not inner.any():
                return node
            r, n = rows[inner], node[inner]
            go_left = x[r, self.feature[n]] <= self.threshold[n]
            node[r] = np.where(go_left, self.left[n], self.right[n])

    def n_leaves(self) -> int:
        return int((self.left == -1).sum())

    def depth(self) -> int:
        deepest, stack = 0, [(0, 0)]
        while stack:
            node, d = stack.pop()
            deepest = max(deepest, d)
            if not self.is_leaf(node):
                stack += [(int(self.left[node]), d + 1), (int(self.right[node]), d + 1)]
        return deepest

    def path_contributions(self, row: np.ndarray, column: int) -> tuple[float, dict[int, float]]:
        """Root value and, per feature, the value change along the row's path."""
        node = 0
        base = float(self.value[0, column])
        out: dict[int, float] = {}
        while not self.is_leaf(node):
            f = int(self.feature[node])
            child = int(self.left[node] if row[f] <= self.threshold[node] else self.right[node])
            out[f] = out.get(f, 0.0) + float(self.value[child, column] - self.value[node, column])
            node = child
        return base, out

    def importance(self, n_features: int) -> np.ndarray:
        """Weighted squared-value improvement per feature, normalised to sum 1."""
        total = np.zeros(n_features)
        for node in range(len(self.left)):
            if self.is_leaf(node):
                continue
            lo, hi = int(self.left[node]), int(self.right[node])
            spread = self.weight[lo] * np.sum((self.value[lo] - self.value[node]) ** 2)
            spread += self.weight[hi] * np.sum((self.value[hi] - self.value[node]) ** 2)
            total[self.feature[node]] += spread
        s = total.sum()
        return total / s if s > 0 else total

    def nested(self, names: list[str], column: int, node: int = 0) -> dict[str, Any]:
        """The tree as nested dicts (for JSON and for reading)."""
        value = float(self.value[node, column])
        weight = float(self.weight[node])
        if self.is_leaf(node):
            return {"leaf": value, "samples": weight}
        return {
            "split": f"{names[self.feature[node]]} <= {self.threshold[node]:.6g}",
            "value": value,
            "samples": weight,
            "left": self.nested(names, column, int(self.left[node])),
            "right": self.nested(names, column, int(self.right[node])),
        }

    def _extremes(self, node: int, column: int) -> tuple[float, float]:
        if self.is_leaf(node):
            v = float(self.value[node, column])
            return v, v
        a = self._extremes(int(self.left[node]), column)
        b = self._extremes(int(self.right[node]), column)
        return min(a[0], b[0]), max(a[1], b[1])

    def monotonize(self, feature: int, increasing: bool, column: int = 0) -> None:
        """Clip leaves to bounds passed down from splits on ``feature`` (see ``prdt.py``)."""
        two_class = self.value.shape[1] == 2 and column == 1
        stack = [(0, -np.inf, np.inf)]
        while stack:
            node, lo, hi = stack.pop()
            if self.is_leaf(node):
                self.value[node, column] = min(max(self.value[node, column], lo), hi)
                if two_class:
                    self.value[node, 0] = 1.0 - self.value[node, 1]
                continue
            a, b = int(self.left[node]), int(self.right[node])
            if self.feature[node] != feature:
                stack += [(a, lo, hi), (b, lo, hi)]
                continue
            # "low" side is the left child when increasing, the right one when decreasing.
            low, high = (a, b) if increasing else (b, a)
            low_max = self._extremes(low, column)[1]
            high_min = self._extremes(high, column)[0]
            mid = 0.5 * (self.value[a, column] + self.value[b, column])
            if low_max <= high_min:
                mid = min(max(mid, low_max), high_min)
            mid = min(max(mid, lo), hi)
            stack += [(low, lo, mid), (high, mid, hi)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "left": self.left.tolist(),
            "right": self.right.tolist(),
            "feature": self.feature.tolist(),
            "threshold": self.threshold.tolist(),
            "value": self.value.tolist(),
            "weight": self.weight.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TreeForm:
        form = cls(
            left=np.asarray(data["left"], dtype=np.int64),
            right=np.asarray(data["right"], dtype=np.int64),
            feature=np.asarray(data["feature"], dtype=np.int64),
            threshold=np.asarray(data["threshold"], dtype=np.float64),
            value=np.asarray(data["value"], dtype=np.float64).reshape(len(data["left"]), -1),
            weight=np.asarray(data["weight"], dtype=np.float64),
        )
        form.validate()
        return form

    def validate(self) -> None:
        """Refuse a structurally broken tree (a loaded file is untrusted input)."""
        n = len(self.left)
        if n == 0 or not (len(self.right) == len(self.feature) == len(self.threshold) == len(self.weight) == n):
            raise ValueError("tree arrays differ in length")
        inner = self.left != -1
        for child in (self.left[inner], self.right[inner]):
            if ((child <= np.flatnonzero(inner)) | (child >= n)).any():
                raise ValueError("tree children must point forward inside the tree")
        if not np.isfinite(self.value).all():
            raise ValueError("tree values must be finite")
