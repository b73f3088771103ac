"""PrAM's fitted form: bins and score tables, evaluated without the library that fitted it.

An Explainable Boosting Machine (interpret-core) is a sum of per-feature and pairwise
lookup tables over binned features. After fitting, PrAM copies the tables out into this
plain form so that prediction, explanation, the monotone post-processing and saving to
JSON depend only on numpy, and a saved model loads without running any code from the file.

Binning follows interpret's own rule (checked against ``eval_terms`` in the tests): a
continuous value ``x`` falls in bin ``searchsorted(cuts, x, side="right") + 1``; bin 0 is
"missing" and the last bin "unknown"; a nominal value maps through its category table,
unseen categories to the unknown bin. A term over several features uses each feature's
binning at that term's level (main effects at level 0, pairs at level 1 when present).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

Binning = np.ndarray | dict[str, int]


def _category_key(value: float) -> str:
    """interpret's string for a numeric category code (integers print without ``.0``)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass
class AdditiveForm:
    """Intercept plus lookup tables; scores carry a trailing class axis for multiclass."""

    feature_names: list[str]
    #: Per feature, per level: an array of cuts (continuous) or a category -> bin table.
    bins: list[list[Binning]]
    terms: list[tuple[int, ...]]
    scores: list[np.ndarray]
    #: Sample weight per bin (main effects), used to weigh the monotone fit.
    weights: list[np.ndarray]
    intercept: np.ndarray
    link: str

    @classmethod
    def from_ebm(cls, ebm: Any, feature_names: list[str]) -> AdditiveForm:
        return cls(
            feature_names=list(feature_names),
            bins=[
                [b if isinstance(b, dict) else np.asarray(b, dtype=np.float64) for b in levels] for levels in ebm.bins_
            ],
            terms=[tuple(int(f) for f in t) for t in ebm.term_features_],
            scores=[np.array(s, dtype=np.float64) for s in ebm.term_scores_],
            weights=[np.array(w, dtype=np.float64) for w in ebm.bin_weights_],
            intercept=np.atleast_1d(np.asarray(ebm.intercept_, dtype=np.float64)),
            link=str(ebm.link_),
        )

    def term_name(self, t: int) -> str:
        return " x ".join(self.feature_names[f] for f in self.terms[t])

    def bin_index(self, feature: int, level: int, column: np.ndarray) -> np.ndarray:
        levels = self.bins[feature]
        binning = levels[min(level, len(levels) - 1)]
        if isinstance(binning, dict):
            unknown = len(binning) + 1
            index = np.array([binning.get(_category_key(v), unknown) for v in column], dtype=np.int64)
        else:
            index = np.searchsorted(binning, column, side="right") + 1
        index[np.isnan(column)] = 0
        return index

    def term_values(self, x: np.ndarray) -> np.ndarray:
        """Per row and term its score: shape (rows, terms) or (rows, terms, classes)."""
        columns = []
        for t, features in enumerate(self.terms):
            level = len(features) - 1
            index = tuple(self.bin_index(f, level, x[:, f]) for f in features)
            columns.append(self.scores[t][index])
        if not columns:
            return np.zeros((x.shape[0], 0, *self.intercept.shape[1:]))
        return np.stack(columns, axis=1)

    def raw(self, x: np.ndarray) -> np.ndarray:
        """The additive score before the link: (rows,) or (rows, classes)."""
        values = self.term_values(x).sum(axis=1)
        out = values + (self.intercept if self.intercept.size > 1 else self.intercept[0])
        return out

    def main_term(self, feature: int) -> int | None:
        for t, features in enumerate(self.terms):
            if features == (feature,):
                return t
        return None

    def monotonize(self, feature: int, increasing: bool = True) -> None:
        """Pool-adjacent-violators on ``feature``'s shape function, weighted by bin counts.

        Only the ordered bins are fitted (missing and unknown keep their scores). PAV keeps
        the weighted mean, so the intercept does not move. Pairwise terms containing the
        feature are dropped so that the prediction, not only the main effect, is monotone in
        the feature (interpret's ``monotonize`` leaves pairs alone and documents the gap)."""
        from sklearn.isotonic import isotonic_regression

        if isinstance(self.bins[feature][0], dict):
            raise ValueError(f"feature {self.feature_names[feature]!r} is nominal: no order to be monotone in")
        t = self.main_term(feature)
        if t is None:
            raise ValueError(f"feature {self.feature_names[feature]!r} has no main effect in this model")
        scores = self.scores[t]
        if scores.ndim != 1:
            raise ValueError("monotone constraints need a regressor or a binary classifier")
        inner = slice(1, len(scores) - 1)
        weights = np.maximum(self.weights[t][inner], 1e-12)
        scores[inner] = isotonic_regression(scores[inner], sample_weight=weights, increasing=increasing)
        keep = [i for i, f in enumerate(self.terms) if len(f) == 1 or feature not in f]
        self.terms = [self.terms[i] for i in keep]
        self.scores = [self.scores[i] for i in keep]
        self.weights = [self.weights[i] for i in keep]

    def shape_labels(self, feature: int) -> tuple[list[str], list[float]]:
        """Labels of the ordered bins of a main effect (and their left edges)."""
        binning = self.bins[feature][0]
        if isinstance(binning, dict):
            return [str(k) for k in sorted(binning, key=binning.__getitem__)], []
        edges = [-np.inf, *binning.tolist(), np.inf]
        labels = [f"[{lo:.4g}, {hi:.4g})" for lo, hi in itertools.pairwise(edges)]
        return labels, edges[:-1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "feature_names": self.feature_names,
            "bins": [
                [{"categories": b} if isinstance(b, dict) else {"cuts": b.tolist()} for b in levels]
                for levels in self.bins
            ],
            "terms": [list(t) for t in self.terms],
            "scores": [s.tolist() for s in self.scores],
            "weights": [w.tolist() for w in self.weights],
            "intercept": self.intercept.tolist(),
            "link": self.link,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AdditiveForm:
        bins: list[list[Binning]] = []
        for levels in data["bins"]:
            bins.append(
                [
                    {str(k): int(v) for k, v in b["categories"].items()}
                    if "categories" in b
                    else np.asarray(b["cuts"], dtype=np.float64)
                    for b in levels
                ]
            )
        return cls(
            feature_names=[str(n) for n in data["feature_names"]],
            bins=bins,
            terms=[tuple(int(f) for f in t) for t in data["terms"]],
            scores=[np.asarray(s, dtype=np.float64) for s in data["scores"]],
            weights=[np.asarray(w, dtype=np.float64) for w in data["weights"]],
            intercept=np.asarray(data["intercept"], dtype=np.float64),
            link=str(data["link"]),
        )
