"""Automatic choice and tuning of a Primo model (Hu's thesis, ch. 5, "model selection";
Primo, ATC'22; the authors' library ``pyprimo`` 0.1, ``primo/model/{primo,prdt,pram}.py``).

Primo picks the model kind and its hyperparameters by Bayesian optimisation of

    score = error + lambda * complexity ** gamma          (lower is better)

over PrAM and PrDT, so that a simpler model wins unless a bigger one is clearly more
accurate. Here:

* ``error`` on a held-out validation part (the *last* ``validation`` fraction of the rows,
  since scheduler data are time-ordered; ``shuffle=True`` draws it at random instead):
  for regression the MAE divided by the MAE of predicting the training median (1 = no
  better than a constant, so the scale of the target does not matter), for
  classification ``1 - accuracy``;
* ``complexity`` from the model itself (``PrimoModel.complexity``): leaves x depth for
  PrDT, interactions x bins for PrAM, as in pyprimo's ``score`` methods;
* PrDT is grown in full and pruned by minimal cost-complexity: the search draws only
  ``ccp_alpha``, log-uniform on [1e-8, 1e-1] (pyprimo's ``DEFAULT_PRDT_SPACE``, its
  ``prune_factor``; ``PrDTRegressor.fit`` sets no depth or leaf limit).
  ``prdt_limits=True`` (ours, off) also draws a depth limit (2-12) and a minimum leaf
  size (1-64) before pruning, with ``ccp_alpha`` relative to the target's variance;
* the search is optuna's TPE sampler, seeded, one trial at a time, so the same data and
  seed give the same choice (``n_trials`` 20, the first 6 random);
* budgets (ours): a PrAM candidate is first shrunk towards ``max_complexity`` (fewer
  bins); a PrDT candidate over it is pruned further, to the smallest ``ccp_alpha`` on its
  cost-complexity path that fits (with ``prdt_limits``, its leaves are capped instead); a
  trial whose model is still over it, over ``max_bytes`` of saved JSON or slower than
  ``max_latency_us`` per predicted row is infeasible (score inf). The latency budget is
  measured, so with it the choice can depend on the machine;
* the winner is refitted on all rows with its parameters.

``gamma`` (0.5) is the source's: pyprimo's regressors score ``mae + penalty_factor *
sqrt(complexity)``. ``lam`` (1e-3) is ours: pyprimo's ``penalty_factor`` defaults to 0
(no preference for small models) and multiplies an unnormalised MAE, so its scale does
not carry over. Ours was fixed before any measurement and not tuned on the traces we
report: with the error normalised to about 1 for a useless model, a model of complexity
2,500 (10 pairs x 250 bins) pays 0.05, i.e. it must cut the error by 5% of a constant
predictor's to beat a model of complexity ~0.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from shapeshift.predict.primo.base import PrimoModel, require_explain_extra
from shapeshift.predict.primo.pram import PrAMClassifier, PrAMRegressor
from shapeshift.predict.primo.prdt import PrDTClassifier, PrDTRegressor

Task = Literal["regression", "classification"]
MODELS: dict[tuple[str, str], type[PrimoModel]] = {
    ("pram", "regression"): PrAMRegressor,
    ("pram", "classification"): PrAMClassifier,
    ("prdt", "regression"): PrDTRegressor,
    ("prdt", "classification"): PrDTClassifier,
}


@dataclass(frozen=True)
class Budget:
    """Limits a chosen model must respect (None: no limit)."""

    max_complexity: float | None = None
    max_bytes: int | None = None
    max_latency_us: float | None = None


@dataclass(frozen=True)
class Trial:
    """One candidate of the search, as recorded in ``Selection.trials``."""

    number: int
    kind: str
    params: dict[str, Any]
    error: float
    complexity: float
    score: float
    feasible: bool


@dataclass(frozen=True)
class Selection:
    """The chosen model (refitted on all rows) and how it was chosen."""

    model: PrimoModel
    kind: str
    params: dict[str, Any]
    error: float
    complexity: float
    score: float
    seconds: float
    trials: tuple[Trial, ...] = field(default_factory=tuple)

    def summary(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "params": self.params,
            "validation_error": self.error,
            "complexity": self.complexity,
            "score": self.score,
            "search_seconds": round(self.seconds, 3),
            "trials": len(self.trials),
            "feasible_trials": sum(t.feasible for t in self.trials),
        }


def validation_error(model: PrimoModel, x: np.ndarray, y: np.ndarray, y_train: np.ndarray, task: Task) -> float:
    """Normalised MAE (regression) or 1 - accuracy (classification); see the module docstring."""
    predicted = model.predict(x)
    if task == "classification":
        return float(np.mean(predicted != y))
    constant = np.mean(np.abs(y - np.median(y_train)))
    return float(np.mean(np.abs(predicted - y)) / max(constant, 1e-12))


#: pyprimo's PrDT search range for ``prune_factor`` (= scikit-learn's ``ccp_alpha``).
PRDT_CCP_RANGE = (1e-8, 1e-1)


def _suggest(trial: Any, kind: str, y: np.ndarray, task: Task, prdt_limits: bool = False) -> dict[str, Any]:
    if kind == "prdt" and not prdt_limits:
        return {"ccp_alpha": trial.suggest_float("prdt_ccp_alpha", *PRDT_CCP_RANGE, log=True)}
    if kind == "prdt":
        spread = float(np.var(y)) if task == "regression" else 0.25
        return {
            "max_depth": trial.suggest_int("prdt_max_depth", 2, 12),
            "min_samples_leaf": trial.suggest_int("prdt_min_samples_leaf", 1, 64, log=True),
            "ccp_alpha": trial.suggest_float("prdt_ccp_fraction", 1e-6, 1e-1, log=True) * spread,
        }
    return {
        "interactions": trial.suggest_int("pram_interactions", 0, 10),
        "max_bins": trial.suggest_categorical("pram_max_bins", [16, 32, 64, 128, 256]),
        "learning_rate": trial.suggest_float("pram_learning_rate", 0.01, 0.2, log=True),
        "min_samples_leaf": trial.suggest_int("pram_min_samples_leaf", 2, 32, log=True),
    }


def _fit_budget(kind: str, params: dict[str, Any], limit: float | None) -> dict[str, Any]:
    """Shrink a candidate so its complexity cannot exceed ``limit`` (leaves <= limit / depth
    for a depth-limited PrDT, bins <= limit / interactions for PrAM), so the search spends
    no trials on models the budget would refuse anyway. A fully grown PrDT is left to
    ``_prune_to_budget``."""
    if limit is None or (kind == "prdt" and params.get("max_depth") is None):
        return params
    if kind == "prdt":
        return {**params, "max_leaf_nodes": max(2, int(limit // params["max_depth"]))}
    return {**params, "max_bins": max(3, min(params["max_bins"], int(limit // max(1, params["interactions"]))))}


def _prune_to_budget(model: PrimoModel, params: dict[str, Any], limit: float,
                     refit: Callable[[dict[str, Any]], PrimoModel], x: np.ndarray, y: np.ndarray,
                     seed: int) -> tuple[PrimoModel, dict[str, Any]]:
    """Prune a fully grown PrDT further, to the smallest ``ccp_alpha`` on its cost-complexity
    path (scikit-learn's ``cost_complexity_pruning_path`` on the training rows) whose tree
    is within ``limit``. Pruning only removes subtrees, so leaves and depth, hence the
    complexity, do not grow with alpha, and a bisection over the path finds it."""
    if model.complexity() <= limit:
        return model, params
    alphas = [float(a) for a in model._tree_class()(random_state=seed).cost_complexity_pruning_path(x, y).ccp_alphas
              if a > params["ccp_alpha"]]
    lo, hi = 0, len(alphas) - 1
    best: tuple[PrimoModel, dict[str, Any]] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = {**params, "ccp_alpha": alphas[mid]}
        fitted = refit(candidate)
        if fitted.complexity() <= limit:
            best, hi = (fitted, candidate), mid - 1
        else:
            lo = mid + 1
    return best if best is not None else (model, params)


def _latency_us(model: PrimoModel, x: np.ndarray) -> float:
    started = time.perf_counter()
    model.predict(x)
    return 1e6 * (time.perf_counter() - started) / max(len(x), 1)


def select_model(
    x: Any,
    y: Any,
    *,
    task: Task = "regression",
    kinds: tuple[str, ...] = ("pram", "prdt"),
    n_trials: int = 20,
    lam: float = 1e-3,
    gamma: float = 0.5,
    budget: Budget | None = None,
    validation: float = 0.2,
    shuffle: bool = False,
    seed: int = 0,
    pram_params: dict[str, Any] | None = None,
    feature_types: list[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    prdt_limits: bool = False,
) -> Selection:
    """Search PrAM and PrDT settings for the lowest ``error + lam * complexity**gamma``.

    ``pram_params`` fixes PrAM settings outside the search (``outer_bags`` 2 and
    ``max_rounds`` 2000 by default, to keep each trial short); ``feature_types`` is
    passed to PrAM; ``progress(done, total)`` is called after each trial;
    ``prdt_limits`` (ours) adds depth and leaf-size limits to the PrDT search. Raises
    ``ValueError`` when no trial meets the budget."""
    require_explain_extra("optuna")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if n_trials < 1 or not 0 < validation < 1 or lam < 0 or gamma <= 0:
        raise ValueError("select: need n_trials >= 1, 0 < validation < 1, lam >= 0, gamma > 0")
    unknown = [k for k in kinds if (k, task) not in MODELS]
    if unknown or not kinds:
        raise ValueError(f"select: unknown model kinds {unknown}; use pram and/or prdt")
    budget = budget or Budget()
    fixed = {"outer_bags": 2, "max_rounds": 2000, **(pram_params or {})}
    if feature_types is not None:
        fixed["feature_types"] = list(feature_types)
    frame_columns = getattr(x, "columns", None)
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y)
    n = len(xa)
    order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
    cut = round(n * (1 - validation))
    if cut < 2 or n - cut < 1:
        raise ValueError(f"select: {n} rows are too few to hold out a validation part")
    train, held = order[:cut], order[cut:]
    records: list[Trial] = []
    started = time.perf_counter()

    def build(kind: str, params: dict[str, Any]) -> PrimoModel:
        extra = fixed if kind == "pram" else {"random_state": seed}
        return MODELS[(kind, task)](**{**extra, **params})

    def objective(trial: Any) -> float:
        kind = trial.suggest_categorical("kind", list(kinds))
        params = _fit_budget(kind, _suggest(trial, kind, ya[train], task, prdt_limits), budget.max_complexity)

        def fit(p: dict[str, Any]) -> PrimoModel:
            return build(kind, p).fit(_frame(xa[train], frame_columns), ya[train])

        model = fit(params)
        if kind == "prdt" and budget.max_complexity is not None and params.get("max_depth") is None:
            model, params = _prune_to_budget(model, params, budget.max_complexity, fit, xa[train], ya[train], seed)
        error = validation_error(model, _frame(xa[held], frame_columns), ya[held], ya[train], task)
        complexity = model.complexity()
        feasible = _within(model, budget, xa[held], frame_columns)
        score = error + lam * complexity**gamma if feasible else float("inf")
        records.append(Trial(trial.number, kind, params, error, complexity, score, feasible))
        if progress is not None:
            progress(len(records), n_trials)
        return score

    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(6, n_trials))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.optimize(objective, n_trials=n_trials, n_jobs=1, show_progress_bar=False)
    best = min(records, key=lambda t: (t.score, t.number))
    if not best.feasible:
        raise ValueError("select: no candidate met the budget; relax it or allow more trials")
    final = build(best.kind, best.params).fit(_frame(xa, frame_columns), ya)
    return Selection(
        model=final,
        kind=best.kind,
        params=best.params,
        error=best.error,
        complexity=best.complexity,
        score=best.score,
        seconds=time.perf_counter() - started,
        trials=tuple(records),
    )


def _frame(x: np.ndarray, columns: Any) -> Any:
    """Keep feature names through the split (a DataFrame in, a DataFrame to each fit)."""
    if columns is None:
        return x
    import pandas as pd

    return pd.DataFrame(x, columns=columns)


def _within(model: PrimoModel, budget: Budget, x: np.ndarray, columns: Any) -> bool:
    if budget.max_complexity is not None and model.complexity() > budget.max_complexity:
        return False
    if budget.max_bytes is not None:
        from shapeshift.predict.primo.persist import model_to_json

        if len(model_to_json(model).encode()) > budget.max_bytes:
            return False
    return budget.max_latency_us is None or _latency_us(model, _frame(x, columns)) <= budget.max_latency_us
