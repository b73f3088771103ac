"""PrDT: Primo's pruned decision tree (CART with minimal cost-complexity pruning).

Hu's thesis (ch. 5, "PrDT") uses a single CART tree, pruned by minimal cost-complexity
(Breiman et al. 1984, ch. 3; scikit-learn's ``ccp_alpha``) so the tree a person reads is
as small as the accuracy allows. scikit-learn's ``DecisionTreeRegressor`` /
``DecisionTreeClassifier`` fit it; the fitted arrays are copied into ``TreeForm`` so that
prediction, explanation, the monotone post-processing and JSON saving need only numpy.

* A row goes left when ``x[feature] <= threshold`` (scikit-learn's rule).
* Local explanation: the change of the node value along the row's path, credited to the
  split's feature (the "Saabas" decomposition): ``prediction = root value + sum``.
* Monotone post-processing: the leaves are clipped to bounds passed down the tree; at a
  split on the constrained feature the left side is capped and the right side floored at
  a midpoint (the mean of the two children, moved into the gap when the children already
  agree, so a tree that is monotone stays unchanged). Any two leaves whose order the
  constraint speaks about first part at a split on that feature, so the clipped tree is
  monotone; this is scikit-learn's ``monotonic_cst`` bound rule applied after fitting.

Parameters: ``ccp_alpha`` (0.0: unpruned), ``max_depth`` (None), ``min_samples_leaf``
(1), ``max_leaf_nodes`` (None), ``monotone`` (``{feature: +1 | -1}``), ``random_state``
(0: scikit-learn breaks ties between equally good splits at random; seeded here).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from shapeshift.predict.primo.base import PrimoClassifierMixin, PrimoModel
from shapeshift.predict.primo.explanation import GlobalExplanation, LocalExplanation, ranked
from shapeshift.predict.primo.treeform import TreeForm


class PrDTBase(PrimoModel):
    """Shared PrDT logic; use ``PrDTRegressor`` or ``PrDTClassifier``."""

    def __init__(
        self,
        *,
        ccp_alpha: float = 0.0,
        max_depth: int | None = None,
        min_samples_leaf: int = 1,
        max_leaf_nodes: int | None = None,
        monotone: dict[str | int, int] | None = None,
        random_state: int = 0,
    ):
        self.ccp_alpha = ccp_alpha
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.max_leaf_nodes = max_leaf_nodes
        self.monotone = monotone
        self.random_state = random_state

    def _tree_class(self) -> Any:
        raise NotImplementedError

    def _fit_form(self, x: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None) -> None:
        tree = self._tree_class()(
            ccp_alpha=float(self.ccp_alpha),
            max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf,
            max_leaf_nodes=self.max_leaf_nodes,
            random_state=self.random_state,
        )
        tree.fit(x, y, sample_weight=sample_weight)
        self.form_ = TreeForm.from_sklearn(tree.tree_, is_classifier=self.is_classifier)

    def _raw(self, x: np.ndarray) -> np.ndarray:
        values = self.form_.value[self.form_.leaves(x)]
        return values if self.is_classifier else values[:, 0]

    def complexity(self) -> float:
        """Leaves x depth (Primo's PrDT size); a single leaf counts as depth 1."""
        return float(self.form_.n_leaves() * max(1, self.form_.depth()))

    def _explained_column(self, x: np.ndarray) -> np.ndarray:
        """Which output column each row's explanation follows (the predicted class)."""
        if not self.is_classifier:
            return np.zeros(len(x), dtype=np.int64)
        if len(self.classes_) == 2:
            return np.ones(len(x), dtype=np.int64)
        return np.argmax(self._raw(x), axis=1)

    def _local(self, x: np.ndarray) -> list[LocalExplanation]:
        columns = self._explained_column(x)
        out = []
        for i, column in enumerate(columns):
            base, per_feature = self.form_.path_contributions(x[i], int(column))
            values = [per_feature.get(f, 0.0) for f in range(len(self.feature_names_))]
            out.append(LocalExplanation(base + sum(values), base, ranked(self.feature_names_, values)))
        return out

    def _global(self) -> GlobalExplanation:
        column = 1 if self.is_classifier and len(self.classes_) == 2 else 0
        importance = self.form_.importance(len(self.feature_names_))
        return GlobalExplanation(
            "prdt",
            self.complexity(),
            float(self.form_.value[0, column]),
            tree=self.form_.nested(self.feature_names_, column),
            feature_importance={n: float(v) for n, v in zip(self.feature_names_, importance, strict=True)},
        )

    def _monotonize_form(self, feature: int, increasing: bool) -> None:
        if self.is_classifier and len(self.classes_) > 2:
            raise ValueError("monotone constraints need a regressor or a binary classifier")
        self.form_.monotonize(feature, increasing, column=1 if self.is_classifier else 0)

    def _form_dict(self) -> dict[str, Any]:
        return self.form_.to_dict()

    def _load_form(self, data: dict[str, Any]) -> None:
        self.form_ = TreeForm.from_dict(data)


class PrDTRegressor(RegressorMixin, PrDTBase):
    """PrDT for a numeric target (squared-error CART)."""

    kind: ClassVar[str] = "prdt-regressor"

    def _tree_class(self) -> Any:
        from sklearn.tree import DecisionTreeRegressor

        return DecisionTreeRegressor


class PrDTClassifier(PrimoClassifierMixin, ClassifierMixin, PrDTBase):
    """PrDT for classes (Gini CART); leaves hold class probabilities."""

    kind: ClassVar[str] = "prdt-classifier"
    is_classifier: ClassVar[bool] = True

    def _tree_class(self) -> Any:
        from sklearn.tree import DecisionTreeClassifier

        return DecisionTreeClassifier

    def _fit_form(self, x: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None) -> None:
        super()._fit_form(x, np.searchsorted(self.classes_, y), sample_weight)

    def _proba(self, raw: np.ndarray) -> np.ndarray:
        return raw
