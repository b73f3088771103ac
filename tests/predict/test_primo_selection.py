"""Model choice, counterfactuals, written explanations, and the ``primo`` duration estimator."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("interpret")
pytest.importorskip("optuna")

from shapeshift.predict.primo import PrDTRegressor
from shapeshift.predict.primo.counterfactual import CounterfactualFinder
from shapeshift.predict.primo.report import write_explanations
from shapeshift.predict.primo.select import Budget, select_model
from shapeshift.predict.primo_duration import PrimoEstimator
from tests.predict.test_estimators import _two_kinds, status

FAST_PRAM = {"outer_bags": 1, "max_rounds": 200}


def frame(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = pd.DataFrame(rng.uniform(0, 1, size=(n, 3)), columns=["gpus", "hour", "noise"])
    return x, 3.0 * x["gpus"].to_numpy() + np.sin(6 * x["hour"].to_numpy()) + 0.05 * rng.normal(size=n)


def test_selection_is_deterministic_with_a_seed():
    x, y = frame()
    runs = [select_model(x, y, n_trials=6, seed=3, pram_params=FAST_PRAM) for _ in range(2)]
    a, b = (r.summary() for r in runs)
    a.pop("search_seconds"), b.pop("search_seconds")
    assert a == b
    np.testing.assert_array_equal(runs[0].model.predict(x), runs[1].model.predict(x))


def test_the_chosen_model_respects_the_size_budget():
    x, y = frame()
    chosen = select_model(x, y, n_trials=8, seed=0, pram_params=FAST_PRAM, budget=Budget(max_complexity=12))
    assert chosen.model.complexity() <= 12
    assert all(t.complexity <= 12 for t in chosen.trials if t.feasible)
    # A bigger lambda never picks a bigger model than a smaller one on the same trials:
    # score = error + lambda * complexity^0.5, and at lambda = 1 a complexity of 100 already
    # costs 10, more than any error (normalised MAE of a fitted model is < 1 here).
    small = select_model(x, y, n_trials=8, seed=0, kinds=("prdt",), lam=1.0)
    assert small.complexity < 100


def test_no_feasible_model_is_a_clear_error():
    x, y = frame()
    with pytest.raises(ValueError, match="budget"):
        select_model(x, y, n_trials=2, kinds=("prdt",), budget=Budget(max_complexity=0.5))


def test_a_counterfactual_crosses_the_threshold():
    x, y = frame()
    model = PrDTRegressor(max_depth=4).fit(x, y)
    threshold = float(np.median(model.predict(x)))
    finder = CounterfactualFinder(model, x, threshold=threshold)
    queries = x.iloc[:10].to_numpy()
    for query, found in zip(queries, finder.nearest(queries, k=2), strict=True):
        side = model.predict(pd.DataFrame([query], columns=x.columns))[0] >= threshold
        assert found and all((c.prediction >= threshold) != side for c in found)
        assert found[0].distance <= found[-1].distance
        assert found[0].changes  # a counterfactual differs in at least one feature


@pytest.mark.parametrize("kind", ["pram", "prdt"])
def test_explanations_are_written_and_not_empty(tmp_path, kind):
    x, y = frame()
    model = select_model(x, y, n_trials=1, kinds=(kind,), pram_params=FAST_PRAM).model
    files = write_explanations(model, tmp_path, x.iloc[:3], title="t")
    assert [f.name for f in files] == ["global.json", "global.png", "local.json", "local.png"]
    assert all(f.stat().st_size > 100 for f in files)
    data = json.loads((tmp_path / "global.json").read_text())
    assert data["kind"] == kind and data["feature_importance"]["gpus"] > 0
    local = json.loads((tmp_path / "local.json").read_text())
    assert len(local) == 3 and local[0]["contributions"]


def test_primo_estimator_learns_and_explains_its_estimates():
    est = PrimoEstimator(model="prdt", min_train=30, retrain_every=20)
    assert est.estimate(status("q0", 0, 1, 1.0, user="a")) == est.fallback.prior
    for s in _two_kinds(70):
        est.observe(s)
    assert est.trainings == 3  # at 30, 50 and 70 finished jobs
    short = est.estimate(status("q1", 5000, 1, 1.0, user="a"))
    long_ = est.estimate(status("q2", 5000, 1, 1.0, user="b"))
    assert 50 < short < 200 and 5000 < long_ < 20000  # user a: 100 s, user b: 10,000 s
    estimate, top = est.explanation("q2")
    assert estimate == long_ and top[0].startswith("user=b x")


def test_primo_estimator_auto_records_its_choice():
    est = PrimoEstimator(min_train=30, trials=3, outer_bags=1)
    for s in _two_kinds(30):
        est.observe(s)
    assert est.selection is not None and est.selection["kind"] in ("pram", "prdt")


def test_prdt_search_is_grow_then_prune_by_default():
    # pyprimo 0.1 searches PrDT's prune_factor (ccp_alpha) alone, log-uniform on [1e-8, 1e-1],
    # on a tree grown without depth or leaf limits; ours (prdt_limits) adds both limits.
    x, y = frame()
    source = select_model(x, y, n_trials=4, seed=0, kinds=("prdt",))
    assert all(set(t.params) == {"ccp_alpha"} and 1e-8 <= t.params["ccp_alpha"] <= 1e-1 for t in source.trials)
    ours = select_model(x, y, n_trials=4, seed=0, kinds=("prdt",), prdt_limits=True)
    assert all({"max_depth", "min_samples_leaf", "ccp_alpha"} <= set(t.params) for t in ours.trials)


def test_a_full_tree_is_pruned_along_its_path_to_the_budget():
    # x = 0..7, y = 0,0,1,1,2,2,3,3. The full tree has 4 leaves at depth 2: complexity 8.
    # Weakest links (impurity weighted by n_t/N): each depth-1 node has variance 0.25 on
    # 4 of 8 rows -> alpha 0.125; after pruning both, the root (variance 1.25, children
    # 0.125 + 0.125) -> alpha 1.0. A budget of 4 needs alpha 0.125: 2 leaves at depth 1,
    # complexity 2 (3 leaves would still be at depth 2: 6 > 4).
    from shapeshift.predict.primo.select import _prune_to_budget

    x = np.arange(8, dtype=float).reshape(-1, 1)
    y = np.array([0, 0, 1, 1, 2, 2, 3, 3], dtype=float)

    def refit(params):
        return PrDTRegressor(**params).fit(x, y)

    full = refit({"ccp_alpha": 0.0})
    assert full.complexity() == 8
    pruned, params = _prune_to_budget(full, {"ccp_alpha": 0.0}, 4, refit, x, y, seed=0)
    assert params["ccp_alpha"] == pytest.approx(0.125)
    assert pruned.complexity() == 2
    same, unchanged = _prune_to_budget(full, {"ccp_alpha": 0.0}, 8, refit, x, y, seed=0)
    assert same is full and unchanged == {"ccp_alpha": 0.0}
