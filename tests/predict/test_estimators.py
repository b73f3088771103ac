"""Helios predictors: noise model, rolling history (P_R), LightGBM (P_M) and their blend."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import math
import statistics

import pytest

from shapeshift.engine.state import JobState, JobStatus
from shapeshift.errors import InputError
from shapeshift.policies.framework.estimators import ESTIMATORS, make_estimator
from shapeshift.predict import gbdt as gbdt_module
from shapeshift.predict.blend import HeliosEstimator
from shapeshift.predict.gbdt import GbdtEstimator
from shapeshift.predict.noise import HELIOS_ERROR_BANDS, NoiseEstimator, sigma_for_median_ape
from shapeshift.predict.rolling import DecayedMean, RollingEstimator
from shapeshift.predict.similarity import NameClusters, name_stem
from tests.conftest import job


def status(job_id, submit, gpus, duration, *, user="", name="", vc="", end=None, cpus=0.0):
    s = JobStatus(job(job_id, submit, gpus, duration, user=user, name=name, vc=vc, num_cpus=cpus), vc)
    if end is not None:
        s.state, s.end_time, s.run_seconds = JobState.COMPLETED, end, duration
    return s


# ------------------------------------------------------------------ noise


def test_noise_sigma_gives_the_stated_median_absolute_percentage_error():
    sigma = sigma_for_median_ape(0.5)
    # P(|e^{sZ} - 1| <= 0.5) = Phi(ln 1.5 / s) - Phi(ln 0.5 / s) = 1/2 at s ~ 0.8014.
    assert sigma == pytest.approx(0.8014, abs=1e-3)
    est = NoiseEstimator("lognormal", median_ape=0.5, seed=3)
    apes = [abs(est.factor(f"j{i}") - 1.0) for i in range(4000)]
    assert statistics.median(apes) == pytest.approx(0.5, abs=0.04)
    with pytest.raises(InputError):
        sigma_for_median_ape(1.0)


def test_helios_noise_follows_the_measured_error_bands():
    est = NoiseEstimator(seed=5)  # the default distribution is Helios'
    assert est.distribution == "helios"
    factors = [est.factor(f"j{i}") for i in range(20000)]
    errors = [max(f, 1.0 / f) - 1.0 for f in factors]  # relative error e, whichever the side
    cumulative = 0.0
    for share, _low, high in HELIOS_ERROR_BANDS:
        cumulative += share
        within = sum(e <= high for e in errors) / len(errors)
        assert within == pytest.approx(cumulative, abs=0.015), high
    assert statistics.median(errors) == pytest.approx(0.5, abs=0.03)
    over = sum(f > 1.0 for f in factors) / len(factors)
    assert over == pytest.approx(0.5, abs=0.015)  # as many over- as under-estimates
    assert min(factors) >= 1.0 / 101.0 and max(factors) <= 101.0  # positive, bounded by the last band


def test_unknown_noise_distribution_is_an_input_error():
    with pytest.raises(InputError, match="helios or lognormal"):
        NoiseEstimator("gaussian")  # type: ignore[arg-type]


def test_noise_is_deterministic_per_job_and_never_negative():
    jobs = [status(f"j{i}", i, 1, float(i * 10)) for i in range(50)]
    a, b = NoiseEstimator(seed=7), NoiseEstimator(seed=7)
    forward = [a.estimate(s) for s in jobs]
    backward = [b.estimate(s) for s in reversed(jobs)][::-1]
    assert forward == backward  # independent of evaluation order
    assert all(e >= 0 for e in forward) and forward[0] == 0.0  # zero duration stays zero
    assert forward[1] == pytest.approx(10 * a.factor("j1"))
    assert [NoiseEstimator(seed=8).estimate(s) for s in jobs] != forward  # the seed matters
    assert make_estimator("noise").estimate(jobs[5]) == NoiseEstimator().estimate(jobs[5])


# ------------------------------------------------------------------ rolling (P_R)


def test_decayed_mean_halves_old_weights():
    m = DecayedMean(half_life=100.0)
    m.add(100.0, 0.0)
    m.add(300.0, 100.0)
    assert m.mean == pytest.approx((0.5 * 100 + 300) / 1.5)


def _history():
    # Half-life 100 s; everything but A ended at 100, A at 0 (weight 1/2).
    return [
        status("A", 0, 1, 100, user="u", name="resnet_run1", end=0),
        status("B", 0, 1, 300, user="u", name="resnet_run2", end=100),
        status("C", 0, 1, 1000, user="u", name="bert_large", end=100),
        status("D", 0, 2, 50, user="v", name="other", end=100),
        status("E", 0, 1, 2000, user="v", name="x", end=100),
    ]


@pytest.mark.parametrize(
    ("user", "name", "gpus", "expected"),
    [
        ("u", "resnet_run9", 1, (0.5 * 100 + 300) / 1.5),  # same user, similar name, same GPUs
        ("u", "resnet_run9", 2, 50.0),  # no (u, 2 GPUs) history: everyone's 2-GPU jobs
        ("u", "resnet_run9", 4, (0.5 * 100 + 300 + 1000 + 50 + 2000) / 4.5),  # no 4-GPU history at all
        ("u", "gpt", 1, (0.5 * 100 + 300 + 1000) / 2.5),  # same user and GPUs, other name
        ("w", "z", 1, (0.5 * 100 + 300 + 1000 + 2000) / 3.5),  # unknown user: everyone's 1-GPU jobs
        ("w", "z", 2, 50.0),  # everyone's 2-GPU jobs
    ],
)
def test_decayed_rolling_falls_back_level_by_level(user, name, gpus, expected):
    est = RollingEstimator("decayed", half_life=100.0)
    for s in _history():
        est.observe(s)
    assert est.estimate(status("q", 200, gpus, 1e9, user=user, name=name)) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("user", "name", "gpus", "expected"),
    [
        # The Helios artifact's NaiveEstimator: plain means; names matched across users at
        # difflib cutoff 0.6 (resnet_run1/2/9 share a stem). History as above, unweighted.
        ("u", "resnet_run9", 1, (100 + 300) / 2),  # same user, similar name, same GPUs
        ("u", "resnet_run9", 2, (100 + 300) / 2),  # same user, similar name (any GPUs)
        ("w", "resnet_run9", 1, (100 + 300) / 2),  # another user's jobs with a similar name
        ("u", "gpt", 1, (100 + 300 + 1000) / 3),  # no similar name: the user's jobs
        ("w", "z", 1, (100 + 300 + 1000 + 50 + 2000) / 5),  # new user, new name: every job
        ("v", "oth3r", 2, 50.0),  # "oth#r" ~ "other" (ratio 0.8 >= 0.6), same GPUs
    ],
)
def test_rolling_follows_the_helios_artifact_by_default(user, name, gpus, expected):
    est = RollingEstimator()
    for s in _history():
        est.observe(s)
    assert est.estimate(status("q", 200, gpus, 1e9, user=user, name=name)) == pytest.approx(expected)


def test_rolling_prior_before_any_job_finished_and_estimates_are_fixed_when_first_asked():
    est = RollingEstimator(prior=1234.0)
    q = status("q", 0, 1, 5.0)
    assert est.estimate(q) == 1234.0
    est.observe(status("A", 0, 1, 10.0, end=10))
    assert est.estimate(q) == 1234.0  # fixed at first estimate
    assert est.estimate(status("r", 20, 1, 5.0)) == 10.0


def test_name_clusters_use_stems_then_difflib():
    assert name_stem("BERT_lr0.1_run12") == "bert_lr#.#_run#"
    names = NameClusters(cutoff=0.8)
    a = names.cluster("u", "imagenet_resnet50_baseline")
    assert names.cluster("u", "imagenet_resnet101_baseline") == a  # same stem
    assert names.cluster("u", "imagenet_resnet50_baselin") == a  # difflib ratio ~0.98
    assert names.cluster("u", "bert") != a
    assert names.cluster("other-user", "imagenet_resnet50_baseline") != a  # per user
    assert names.cluster("u", "") == -1


# ------------------------------------------------------------------ never the future


@pytest.mark.parametrize("make", [RollingEstimator, lambda: GbdtEstimator(min_train=20, rounds=5, seed=1)])
def test_an_estimate_never_reads_the_jobs_own_recorded_duration(make):
    est_a, est_b = make(), make()
    for i in range(40):
        done = status(f"h{i}", i * 10, 1 + i % 2, 100.0 + 50 * (i % 4), user=f"u{i % 3}", name=f"n{i % 4}", end=i * 10)
        est_a.observe(done)
        est_b.observe(done)
    honest = status("q", 500, 1, 10.0, user="u1", name="n1")
    poisoned = status("q", 500, 1, 1e9, user="u1", name="n1")
    assert est_a.estimate(honest) == est_b.estimate(poisoned)


def test_a_job_finishing_later_does_not_change_an_estimate_made_before():
    est = RollingEstimator()
    est.observe(status("A", 0, 1, 100, user="u", name="n", end=100))
    early = est.estimate(status("q", 150, 1, 7, user="u", name="n"))
    est.observe(status("P", 0, 1, 1e7, user="u", name="n", end=200))  # poisoned, finishes after q's submission
    assert est.estimate(status("q", 150, 1, 7, user="u", name="n")) == early == 100.0
    assert est.estimate(status("r", 250, 1, 7, user="u", name="n")) > 1e6  # but later jobs do learn from it


# ------------------------------------------------------------------ gbdt (P_M) and blend


def _two_kinds(n):
    """User a's jobs take 100 s, user b's 10,000 s (GPU and time features are noise)."""
    return [
        status(f"h{i}", i * 60, 1 + i % 3, 100.0 if i % 2 else 10000.0, user="a" if i % 2 else "b", end=i * 60)
        for i in range(n)
    ]


def test_gbdt_learns_from_finished_jobs_and_retrains_periodically():
    est = GbdtEstimator(min_train=30, retrain_every=20, rounds=20, leaves=4, seed=0)
    cold = status("q0", 0, 1, 1.0, user="a")
    assert est.estimate(cold) == est.fallback.prior  # nothing finished: P_R's prior
    for s in _two_kinds(70):
        est.observe(s)
    assert est.trainings == 3  # at 30, 50 and 70 finished jobs
    short, long_ = (
        est.estimate(status("q1", 5000, 1, 1.0, user="a")),
        est.estimate(status("q2", 5000, 1, 1.0, user="b")),
    )
    assert 50 < short < 200 and 5000 < long_ < 20000


def test_gbdt_is_deterministic():
    runs = []
    for _ in range(2):
        est = GbdtEstimator(min_train=30, rounds=10, seed=4)
        for s in _two_kinds(40):
            est.observe(s)
        runs.append(est.estimate(status("q", 9000, 2, 1.0, user="a", vc="x")))
    assert runs[0] == runs[1]


def test_helios_blend_is_lambda_pr_plus_one_minus_lambda_pm():
    blend = HeliosEstimator(0.25, min_train=30, rounds=10)
    for s in _two_kinds(40):
        blend.observe(s)
    q = status("q", 9000, 1, 1.0, user="b")
    pr, pm = blend.rolling.predict(q), blend.gbdt.predict(q)
    assert pr != pm
    assert blend.estimate(q) == pytest.approx(0.25 * pr + 0.75 * pm)
    assert blend.rolling.observed == 40  # fed once, shared with P_M's cold start


def test_missing_lightgbm_is_one_clear_input_error(monkeypatch):
    monkeypatch.setattr(gbdt_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InputError, match=r"shapeshift\[ml\]"):
        make_estimator("gbdt")


def test_all_helios_estimators_are_registered():
    assert {"oracle", "noise", "rolling", "gbdt", "helios"} <= set(ESTIMATORS)
    for name in ("noise", "rolling", "gbdt", "helios"):
        e = make_estimator(name)
        assert e.static and e.name == name and math.isfinite(e.estimate(status("z", 0, 1, 5.0)))
