"""PrAM and PrDT: the estimator contract, exact explanations, monotone post-processing, JSON.

Data are tiny and PrAM runs with one outer bag and few rounds so the file stays fast."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

pytest.importorskip("interpret")
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from shapeshift.errors import InputError
from shapeshift.predict.primo import PrAMClassifier, PrAMRegressor, PrDTClassifier, PrDTRegressor
from shapeshift.predict.primo.additive import AdditiveForm
from shapeshift.predict.primo.persist import load, model_from_dict, model_to_json, save

FAST = {"outer_bags": 1, "max_rounds": 200, "interactions": 2}
# interpret bins and splits off validation rows by row count, not by weight, so a row of
# weight 2 is not the same fit as two rows: the one check PrAM cannot pass by design.
PRAM_EXPECTED = {"check_sample_weight_equivalence_on_dense_data": "EBM binning counts rows, not weights"}


def data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    return x, 2.0 * x[:, 0] + np.sin(2 * x[:, 1]) + 0.1 * rng.normal(size=n)


def _expected(est):
    return PRAM_EXPECTED if isinstance(est, (PrAMRegressor, PrAMClassifier)) else {}


@parametrize_with_checks(
    [
        PrDTRegressor(),
        PrDTClassifier(),
        PrAMRegressor(outer_bags=1, max_rounds=30, interactions=0),
        PrAMClassifier(outer_bags=1, max_rounds=30, interactions=0),
    ],
    expected_failed_checks=_expected,
)
def test_sklearn_contract(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


@pytest.mark.parametrize("model", [PrAMRegressor(**FAST), PrDTRegressor(ccp_alpha=0.01)])
def test_local_contributions_add_up_to_the_prediction(model):
    x, y = data()
    model.fit(x, y)
    predicted = model.predict(x[:20])
    for row, local in zip(predicted, model.explain(x[:20]), strict=True):
        assert local.prediction == pytest.approx(row, abs=1e-9)
        assert local.base + sum(c.value for c in local.contributions) == pytest.approx(row, abs=1e-9)
    # x0 carries most of the signal (slope 2 against a sine of amplitude 1), so it leads on
    # average: the mean |contribution| of x0 beats every other term's.
    mean_abs: dict[str, float] = {}
    for local in model.explain(x):
        for c in local.contributions:
            mean_abs[c.term] = mean_abs.get(c.term, 0.0) + abs(c.value)
    assert max(mean_abs, key=mean_abs.__getitem__) == "x0"


def test_pram_bins_follow_interprets_own_rule():
    from interpret.glassbox import ExplainableBoostingRegressor

    x, y = data()
    ebm = ExplainableBoostingRegressor(outer_bags=1, max_rounds=200, interactions=2, n_jobs=1, random_state=0)
    ebm.fit(x, y)
    form = AdditiveForm.from_ebm(ebm, ["a", "b", "c"])
    probe = np.vstack([x[:10], [[ebm.bins_[0][0][3], 0.0, 0.0]], [[np.nan, 1e9, -1e9]]])  # on a cut; missing
    np.testing.assert_allclose(form.term_values(probe), ebm.eval_terms(probe), atol=1e-12)


def test_pipeline_and_cross_validation():
    x, y = data()
    scores = cross_val_score(make_pipeline(StandardScaler(), PrDTRegressor(max_depth=4)), x, y, cv=3)
    assert len(scores) == 3 and (scores > 0.5).all()  # depth-4 tree on a smooth 2-feature signal


def test_pav_makes_the_shape_function_non_decreasing_at_small_cost():
    # y decreases then increases in x0 (a V); forcing non-decreasing flattens the left arm.
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, size=(400, 2))
    y = x[:, 0] + 0.3 * np.abs(x[:, 0] + 0.8) * (x[:, 0] < -0.6) + 0.05 * rng.normal(size=400)
    model = PrAMRegressor(**FAST).fit(x, y)
    before = np.abs(model.predict(x) - y).mean()
    model.monotonize("x0")
    shape = model.explain().shapes[0]
    assert shape.term == "x0"
    assert all(a <= b + 1e-12 for a, b in zip(shape.scores, shape.scores[1:], strict=False))
    grid = np.column_stack([np.linspace(-1, 1, 200), np.zeros(200)])
    assert (np.diff(model.predict(grid)) >= -1e-12).all()  # pairs with x0 were dropped
    # The non-monotone bump is 0.3 * 0.2 = 0.06 high on 10% of the rows, so MAE moves < 0.05.
    assert np.abs(model.predict(x) - y).mean() - before < 0.05


def test_tree_leaves_become_monotone():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, size=(300, 2))
    y = x[:, 0] - 0.5 * (x[:, 0] > 0.7) + 0.1 * x[:, 1]  # drops by 0.5 at x0 = 0.7
    model = PrDTRegressor(max_depth=4).fit(x, y)
    grid = np.column_stack([np.linspace(0, 1, 101), np.full(101, 0.5)])
    assert (np.diff(model.predict(grid)) < 0).any()
    model.monotonize(0)
    for other in (0.1, 0.5, 0.9):
        grid[:, 1] = other
        assert (np.diff(model.predict(grid)) >= -1e-12).all()


def test_monotone_parameter_applies_at_fit():
    x, y = data()
    model = PrDTRegressor(max_depth=5, monotone={"x1": 1}).fit(x, y)
    grid = np.column_stack([np.zeros(50), np.linspace(-3, 3, 50), np.zeros(50)])
    assert (np.diff(model.predict(grid)) >= -1e-12).all()


@pytest.mark.parametrize(
    "model", [PrAMRegressor(**FAST), PrDTRegressor(max_depth=4), PrAMClassifier(**FAST), PrDTClassifier(max_depth=3)]
)
def test_json_round_trip_predicts_the_same(model, tmp_path):
    x, y = data()
    target = (y > 0).astype(int) if model.is_classifier else y
    model.fit(x, target)
    path = save(model, tmp_path / "m.json", meta={"note": "t"})
    loaded, meta = load(path)
    assert meta == {"note": "t"}
    assert type(loaded) is type(model)
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    assert loaded.explain().to_dict() == model.explain().to_dict()


def test_a_bad_model_file_is_one_clear_error(tmp_path):
    model = PrDTRegressor(max_depth=2).fit(*data(50))
    good = json.loads(model_to_json(model))
    for change, field in (
        ({"kind": "os.system"}, "kind"),
        ({"params": {"evil": 1}}, "params.evil"),
        ({"form": {**good["form"], "left": [5, -1, -1]}}, "form"),
    ):
        with pytest.raises(InputError) as err:
            model_from_dict({**good, **change}, "m.json")
        assert err.value.field == field
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load(tmp_path / "bad.json")


def test_a_monotone_position_survives_the_json_round_trip(tmp_path):
    x, y = data(80)
    model = PrDTRegressor(max_depth=3, monotone={1: 1}).fit(x, y)
    loaded, _ = load(save(model, tmp_path / "m.json"))
    assert loaded.get_params()["monotone"] == {"1": 1}  # JSON keys are strings
    refit = loaded.fit(x, y)  # the string position still names feature x1
    grid = np.column_stack([np.zeros(30), np.linspace(-3, 3, 30), np.zeros(30)])
    assert (np.diff(refit.predict(grid)) >= -1e-12).all()


def test_pram_takes_missing_values_in_their_own_bin():
    x, y = data()
    model = PrAMRegressor(**FAST).fit(x, y)
    row = np.array([[np.nan, 0.0, 0.0]])
    local = model.explain(row)[0]
    assert np.isfinite(model.predict(row)).all() and local.prediction == pytest.approx(model.predict(row)[0])
    with pytest.raises(ValueError):
        model.predict(np.array([[np.inf, 0.0, 0.0]]))  # infinities are refused, NaN is "missing"


def test_pram_fits_on_interprets_avx2_kernels_and_puts_the_option_back(monkeypatch):
    # interpret reads its global "acceleration" option when a fit starts; a fit must see
    # AVX2 only (flag 0x2, interpret's AccelerationFlags_AVX2), whatever the CPU offers,
    # and leave the option as it found it (all flags, 0xFFFFFFFF, by default).
    from interpret import develop
    from interpret.glassbox import ExplainableBoostingRegressor

    seen = []
    fit = ExplainableBoostingRegressor.fit

    def spy(self, *args, **kwargs):
        seen.append(develop.get_option("acceleration"))
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(ExplainableBoostingRegressor, "fit", spy)
    before = develop.get_option("acceleration")
    x = np.arange(40, dtype=float).reshape(20, 2)
    PrAMRegressor(**FAST).fit(x, x[:, 0] * 2.0)
    assert seen == [0x2] and develop.get_option("acceleration") == before == 0xFFFFFFFF


def test_uniform_binning_cuts_the_range_into_equal_widths():
    # x = e^t for t evenly spread over [0, 4]: the values run from 1 to e^4. max_bins=6
    # leaves 4 bins for the values (interpret keeps two for missing and unseen), so
    # uniform bins cut at 1 + k (e^4 - 1) / 4 for k = 1, 2, 3, and quantile bins near
    # the quartiles of t, e^1, e^2, e^3.
    x = np.exp(np.linspace(0.0, 4.0, 401)).reshape(-1, 1)
    y = (x[:, 0] > 20).astype(float)
    fit = {"max_bins": 6, "outer_bags": 1, "max_rounds": 50, "interactions": 0}
    uniform = PrAMRegressor(binning="uniform", **fit).fit(x, y).form_.bins[0][0]
    quantile = PrAMRegressor(**fit).fit(x, y).form_.bins[0][0]
    np.testing.assert_allclose(uniform, 1 + np.arange(1, 4) * (np.e**4 - 1) / 4)
    np.testing.assert_allclose(quantile, np.exp([1.0, 2.0, 3.0]), rtol=0.02)


def test_cyclic_boosting_turns_off_greedy_and_smoothing_rounds():
    # interpret 0.2.7 (Lucid's artifact's release) boosted every term in turn each round
    # and had no greedy or smoothing rounds; recent releases need cyclic_progress on when
    # greedy_ratio is 0, or no round would move the model.
    x, y = data(200)
    unfitted = PrAMRegressor(boosting="cyclic", max_leaves=3, early_stopping_tolerance=1e-4, **FAST)
    unfitted.feature_names_ = ["a", "b", "c"]
    got = unfitted._ebm_params(3)
    assert {
        k: got[k] for k in ("greedy_ratio", "cyclic_progress", "smoothing_rounds", "interaction_smoothing_rounds")
    } == {
        "greedy_ratio": 0.0,
        "cyclic_progress": True,
        "smoothing_rounds": 0,
        "interaction_smoothing_rounds": 0,
    }
    assert (got["max_leaves"], got["early_stopping_tolerance"]) == (3, 1e-4)
    assert "greedy_ratio" not in PrAMRegressor(**FAST)._release_params()
    model = PrAMRegressor(boosting="cyclic", **FAST).fit(x, y)
    assert np.corrcoef(model.predict(x), y)[0, 1] > 0.9


@pytest.mark.parametrize("bad", [{"binning": "log"}, {"boosting": "greedy"}])
def test_unknown_binning_or_boosting_is_refused(bad):
    x, y = data(50)
    with pytest.raises(ValueError, match="binning must be quantile or uniform"):
        PrAMRegressor(**FAST, **bad).fit(x, y)
