"""Primo: interpretable predictors (Hu's thesis, ch. 5) behind one estimator contract.

* ``PrAMRegressor`` / ``PrAMClassifier`` (``pram.py``): additive models with pairwise
  interactions (interpret-core's Explainable Boosting Machine);
* ``PrDTRegressor`` / ``PrDTClassifier`` (``prdt.py``): CART trees with cost-complexity
  pruning (scikit-learn);
* the contract (``base.py``): scikit-learn's ``fit`` / ``predict`` / ``get_params`` plus
  ``explain``, ``complexity``, ``monotonize`` and ``to_dict``;
* ``persist.py``: save and load as JSON (never pickle).

Needs the ``explain`` extra (interpret-core, scikit-learn, optuna).
"""

from shapeshift.predict.primo.explanation import Contribution, GlobalExplanation, LocalExplanation, ShapeFunction
from shapeshift.predict.primo.pram import PrAMClassifier, PrAMRegressor
from shapeshift.predict.primo.prdt import PrDTClassifier, PrDTRegressor

__all__ = [
    "Contribution",
    "GlobalExplanation",
    "LocalExplanation",
    "PrAMClassifier",
    "PrAMRegressor",
    "PrDTClassifier",
    "PrDTRegressor",
    "ShapeFunction",
]
