"""What a Primo model says about itself: global shapes and per-prediction contributions.

Both model kinds explain a prediction as ``base + sum(contributions)`` exactly (an
additive model's term scores, or a tree's value changes along the decision path), so a
reader can check the arithmetic. Values are in the model's output space: the regression
target (for the duration estimator, ``log1p`` seconds) or the log-odds of the class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Contribution:
    """One term's share of a prediction (a feature, ``a x b`` for a pair, or a tree split)."""

    term: str
    value: float


@dataclass(frozen=True)
class LocalExplanation:
    """One prediction: ``prediction == base + sum(c.value for c in contributions)``."""

    prediction: float
    base: float
    #: Largest magnitude first; terms contributing exactly zero are left out.
    contributions: tuple[Contribution, ...]

    def top(self, k: int = 3) -> tuple[Contribution, ...]:
        return self.contributions[:k]

    def to_dict(self) -> dict[str, Any]:
        return {
            "prediction": self.prediction,
            "base": self.base,
            "contributions": [{"term": c.term, "value": c.value} for c in self.contributions],
        }


@dataclass(frozen=True)
class ShapeFunction:
    """A main effect of an additive model: ``scores[i]`` holds on bin ``labels[i]``."""

    term: str
    #: Bin labels: ``"[lo, hi)"`` intervals for continuous features, category values otherwise.
    labels: tuple[str, ...]
    scores: tuple[float, ...]
    #: The left edge of each bin (continuous features) for plotting; empty for categories.
    lefts: tuple[float, ...] = ()
    importance: float = 0.0


@dataclass(frozen=True)
class GlobalExplanation:
    """The whole model: its kind, complexity and either shape functions or the tree."""

    kind: str
    complexity: float
    intercept: float
    shapes: tuple[ShapeFunction, ...] = ()
    #: Pairwise terms by name with their importance (their tables are in the model JSON).
    interactions: tuple[tuple[str, float], ...] = ()
    #: The tree as nested ``{"split": ..., "left": ..., "right": ...}`` / ``{"leaf": value}``.
    tree: dict[str, Any] | None = None
    feature_importance: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "complexity": self.complexity, "intercept": self.intercept}
        if self.shapes:
            out["shapes"] = [
                {
                    "term": s.term,
                    "importance": s.importance,
                    "bins": [{"bin": lab, "score": sc} for lab, sc in zip(s.labels, s.scores, strict=True)],
                }
                for s in self.shapes
            ]
            out["interactions"] = [{"term": t, "importance": imp} for t, imp in self.interactions]
        if self.tree is not None:
            out["tree"] = self.tree
        out["feature_importance"] = self.feature_importance
        return out


def ranked(names: list[str], values: list[float]) -> tuple[Contribution, ...]:
    """Non-zero contributions, largest magnitude first (ties by name, so output is stable)."""
    pairs = [(n, float(v)) for n, v in zip(names, values, strict=True) if v != 0.0]
    pairs.sort(key=lambda p: (-abs(p[1]), p[0]))
    return tuple(Contribution(n, v) for n, v in pairs)
