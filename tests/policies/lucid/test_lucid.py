"""Lucid: binder rules, profiler hand-over, pairing, no leakage from the future."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.engine.sharing import GpuLedger
from shapeshift.engine.state import JobStatus
from shapeshift.model import Allocation, ClusterSpec, JobSpec, NodeSpec, Resources
from shapeshift.policies.lucid.packing import PROFILED, BinderRules, Candidate, PartnerIndex, fit_packing_model
from shapeshift.policies.lucid.packing import sharing_score as score_of
from shapeshift.policies.lucid.policy import Lucid, LucidParams
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.helios_synth import helios_synthetic


def cluster(nodes: int, gpus: int, limit: int = 2, mem: float = 24.0) -> ClusterSpec:
    specs = tuple(NodeSpec(f"n{i}", gpus, 8 * gpus, 64 * gpus, gpu_mem_gb=mem) for i in range(nodes))
    return ClusterSpec(specs, gpu_share_limit=limit)


def held(ledger: GpuLedger, job_id: str, placement: dict[int, int], mem: float) -> None:
    spec = JobSpec(job_id, 0.0, sum(placement.values()), duration=1.0)
    alloc = Allocation(tuple((n, Resources(g)) for n, g in placement.items()), gpu_mem_gb=mem)
    ledger.take(JobStatus(spec, ""), alloc)


def test_binder_refuses_what_the_paper_refuses():
    ledger = GpuLedger(cluster(2, 4))
    held(ledger, "one-node", {0: 2}, 8.0)
    held(ledger, "two-nodes", {0: 1, 1: 1}, 8.0)
    rules = BinderRules(threshold=2, ratio=2.0)
    partner = Candidate("one-node", 2, 1, 100.0, 8.0)
    spread = Candidate("two-nodes", 2, 0, 100.0, 8.0)
    assert rules.why_not(ledger, Candidate("new", 2, 1, 150.0, 8.0), partner) == ""
    assert rules.why_not(ledger, Candidate("new", 2, 0, 100.0, 8.0), spread) == "partner spans nodes"
    assert rules.why_not(ledger, Candidate("new", 1, 0, 100.0, 8.0), partner) == "different GPU counts"
    assert "over 2" in rules.why_not(ledger, Candidate("new", 2, 2, 100.0, 8.0), partner)  # 2 + 1 > 2
    assert "twice" in rules.why_not(ledger, Candidate("new", 2, 0, 201.0, 8.0), partner)  # 201 > 2 x 100
    # 8 + 16.5 GB > 24 GB:
    assert rules.why_not(ledger, Candidate("new", 2, 0, 100.0, 16.5), partner) == "not enough GPU memory"
    # The index picks the first qualifying partner in start order, as a full scan does.
    held(ledger, "later", {1: 2}, 8.0)
    later = Candidate("later", 2, 0, 100.0, 8.0)
    newcomer = Candidate("new", 2, 1, 100.0, 8.0)
    index = PartnerIndex(rules, [spread, partner, later])
    assert rules.partner(ledger, newcomer, [spread, partner, later]) is partner
    assert index.pick(ledger, newcomer) is partner
    assert index.pick(ledger, newcomer) is later  # the partner taken is gone


def test_packing_model_scores_busy_models_jumbo_and_idle_ones_tiny():
    model = fit_packing_model(0)
    # Mean speed beside every profiled model under the default interference model:
    # ResNet50 0.82 < 0.85 -> Jumbo; NeuMF 0.98 >= 0.95 -> Tiny; ResNet18 0.88 -> Medium.
    assert score_of(model, PROFILED["ResNet50"]) == 2
    assert score_of(model, PROFILED["NeuMF"]) == 0
    assert score_of(model, PROFILED["ResNet18"]) == 1
    x = np.array([[p.gpu_util, p.mem_bw, p.gpu_mem_gb] for p in PROFILED.values()])
    assert [score_of(model, p) for p in PROFILED.values()] == model.predict(x).tolist()


def lucid(**params) -> Lucid:
    return Lucid(LucidParams(**params))


def test_profiler_finishes_short_jobs_and_hands_long_ones_over_with_features():
    # profile_before_queue: a job waits for the profiler before it joins the main queue.
    # Node 0 profiles, node 1 is the main partition. T_prof = 200 s.
    # short (100 s) completes in the profiler at 100. long (1000 s) runs 0-200 there, then
    # moves to node 1 (no restore penalty here) and ends at 1000.
    jobs = [JobSpec("short", 0.0, 1, duration=100.0, model="ncf"), JobSpec("long", 0.0, 1, duration=1000.0)]
    policy = lucid(profile_before_queue=True)
    result = simulate(jobs, cluster(2, 1), policy, overheads=Overheads(0.0, 0.0))
    ends = {j.job_id: j.end_time for j in result.jobs}
    # LGF ties go to submit time then id: "long" < "short", so long profiles first on the
    # one-GPU profiler and short waits until 200, ending at 300.
    assert ends == {"long": pytest.approx(1000.0), "short": pytest.approx(300.0)}
    assert policy.finished_in_profiler == 1
    assert "long" in policy.features and policy.features["long"].gpu_util > 0
    long_status = next(j for j in result.jobs if j.job_id == "long")
    assert long_status.reconfigurations == 1 and long_status.allocation is None


def test_main_queue_starts_a_job_that_waits_for_the_profiler():
    # The artifact profiles in a separate pass, so the main queue does not wait for it.
    # Same input as above: long profiles on node 0 from 0 (LGF tie -> id order). short waits
    # for the profiler, but the main queue starts it on node 1 at 0, and it ends at 100
    # there (not in the profiler). long leaves the profiler at 200 with 800 s left and runs
    # on node 1, free since 100: ends at 1000.
    jobs = [JobSpec("short", 0.0, 1, duration=100.0, model="ncf"), JobSpec("long", 0.0, 1, duration=1000.0)]
    policy = lucid()
    result = simulate(jobs, cluster(2, 1), policy, overheads=Overheads(0.0, 0.0))
    ends = {j.job_id: j.end_time for j in result.jobs}
    assert ends == {"long": pytest.approx(1000.0), "short": pytest.approx(100.0)}
    assert policy.finished_in_profiler == 0
    fields = policy.summary_fields()
    assert fields["lucid_profiled"] == 1  # short never entered the profiler


def test_a_job_that_finishes_in_the_profiler_leaves_the_main_queue():
    # One profiler GPU (node 0), one main GPU (node 1), no sharing (limit 1).
    # first profiles 0-200 (the main queue skips a job while it profiles), then runs on
    # node 1 with 800 s left: ends 1000. quick arrives at 300: the main GPU is busy, the
    # profiler free, so it profiles 300-350 and finishes there; it must leave the main
    # queue with it (it is never started twice).
    jobs = [
        JobSpec("first", 0.0, 1, duration=1000.0, model="resnet50"),
        JobSpec("quick", 300.0, 1, duration=50.0, model="resnet50"),
    ]
    policy = lucid()
    result = simulate(jobs, cluster(2, 1, limit=1), policy, overheads=Overheads(0.0, 0.0))
    ends = {j.job_id: j.end_time for j in result.jobs}
    assert ends == {"first": pytest.approx(1000.0), "quick": pytest.approx(350.0)}
    assert policy.finished_in_profiler == 1
    assert all(not queue for queue in policy.main_queue.values())


def test_unprofiled_jobs_pair_unless_pair_profiled_only():
    # No profiler (profiler_nodes=0): nothing is ever profiled. a (ncf, Tiny) takes the one
    # GPU at 0; b (ncf, Tiny) arrives at 1 and joins it (scores 0 + 0 <= 2, equal
    # priorities). With pair_profiled_only b has no profile and waits until a ends at 1000.
    jobs = [JobSpec("a", 0.0, 1, duration=1000.0, model="ncf"), JobSpec("b", 1.0, 1, duration=100.0, model="ncf")]
    paired = lucid(profiler_nodes=0)
    result = simulate(jobs, cluster(1, 1), paired, overheads=Overheads(0.0, 0.0))
    assert {j.job_id: j.first_start for j in result.jobs}["b"] == pytest.approx(1.0)
    assert paired.paired == 1
    alone = lucid(profiler_nodes=0, pair_profiled_only=True)
    result = simulate(jobs, cluster(1, 1), alone, overheads=Overheads(0.0, 0.0))
    assert {j.job_id: j.first_start for j in result.jobs}["b"] == pytest.approx(1000.0)
    assert alone.paired == 0


def test_lucid_pairs_a_profiled_newcomer_with_an_affine_running_job():
    # a (ncf, Tiny) profiles 0-200 and moves to node 1; b waits for the profiler, profiles
    # 200-400, then joins a's GPU (scores 0 + 0 <= 2, equal priorities, 2 x 2.1 GB < 24 GB).
    jobs = [JobSpec("a", 0.0, 1, duration=3000.0, model="ncf"), JobSpec("b", 1.0, 1, duration=1000.0, model="ncf")]
    result = simulate(jobs, cluster(2, 1), lucid(), overheads=Overheads(0.0, 0.0))
    shared = {j.job_id: j.shared_seconds for j in result.jobs}
    assert shared["b"] > 0 and shared["a"] == pytest.approx(shared["b"])


def test_lucid_learns_from_finished_jobs_only():
    # Poison a job submitted late: give it a huge duration. Every decision taken before it
    # arrives must be the same, although the duration model retrains (every 0.1 days) on
    # finished jobs. Durations are capped at 1 h so the run ends soon after the arrivals.
    work = helios_synthetic(400, 60, seed=3)
    jobs = [replace(j, duration=min(j.duration, 3600.0)) for j in work.jobs()]
    poisoned_at = 300
    cut = jobs[poisoned_at].submit_time
    poisoned = [*jobs[:poisoned_at], replace(jobs[poisoned_at], duration=1e7), *jobs[poisoned_at + 1 :]]
    nodes = tuple(NodeSpec(f"n{i}", 8, 64, 512, gpu_mem_gb=24.0) for i in range(4))
    shared = ClusterSpec(nodes, gpu_share_limit=2)

    def starts(specs):
        # Small, quick PrAMs: the property under test is what they see, not their accuracy.
        policy = lucid(min_train_jobs=50, retrain_days=0.1, pram_interactions=0, pram_max_rounds=50)
        result = simulate(specs, shared, policy)
        assert policy.durations.model is not None  # the duration model did train
        return {j.job_id: j.first_start for j in result.jobs if j.first_start is not None and j.first_start < cut}

    clean, dirty = starts(jobs), starts(poisoned)
    assert len(clean) > 250 and clean == dirty


def test_a_job_larger_than_the_profiler_or_the_main_nodes_still_runs():
    # Found by the sharing invariant test: on 2 nodes x 1 GPU the profiler holds 1 GPU and
    # the main nodes 1 GPU; a 2-GPU job skips profiling and runs across both nodes.
    result = simulate([JobSpec("big", 0.0, 2, duration=50.0)], cluster(2, 1), lucid(), overheads=Overheads(0.0, 0.0))
    assert [(j.job_id, j.end_time) for j in result.jobs] == [("big", 50.0)]


def test_row_evaluator_gives_what_predict_gives():
    from shapeshift.policies.lucid.models import DurationModel, PrAMSettings

    model = DurationModel(settings=PrAMSettings(interactions=3, max_rounds=50))
    for job in list(helios_synthetic(300, 30, seed=2).jobs()):
        profile = PROFILED["ResNet18"] if job.num_gpus == 1 else None  # some rows lack features
        model.observe(job, profile, job.duration)
    model.fit()
    x = np.array(model.rows[:40], dtype=float)
    x = np.where(np.isfinite(x), x, model._fill)
    assert np.allclose([model.evaluate(list(row)) for row in x], model.model.predict(x), rtol=0, atol=1e-9)


def test_duration_model_fits_with_the_artifacts_interpret_release():
    # estimator_lucid.ipynb: ExplainableBoostingRegressor(learning_rate=0.01,
    # binning="uniform", interactions=20), the rest interpret-core 0.2.7's defaults
    # (ebm.py): outer_bags=8, max_rounds=5000, early_stopping_rounds=50,
    # early_stopping_tolerance=1e-4, max_leaves=3, min_samples_leaf=2, cyclic rounds only.
    from shapeshift.policies.lucid.models import PrAMSettings, _pram

    model = _pram(0, PrAMSettings(), nominal=3, total=9)
    model.feature_names_ = [f"f{i}" for i in range(9)]
    got = model._ebm_params(9)
    expected = {
        "learning_rate": 0.01, "interactions": 20, "outer_bags": 8, "max_rounds": 5000,
        "early_stopping_rounds": 50, "early_stopping_tolerance": 1e-4, "max_leaves": 3,
        "min_samples_leaf": 2, "greedy_ratio": 0.0, "smoothing_rounds": 0,
    }  # fmt: skip
    assert {k: got[k] for k in expected} == expected
    assert got["feature_types"] == ["nominal"] * 3 + ["uniform"] * 6
    assert LucidParams().outer_bags == 8 and LucidParams().pram_release == "0.2.7"
    installed = _pram(0, PrAMSettings(outer_bags=1, release="installed"), nominal=3, total=9)
    assert installed.binning == "quantile" and installed.early_stopping_rounds == 100


def test_forecaster_feature_matrix_is_the_per_bin_rule():
    # The forecaster builds its training and forecast rows column-wise; each row must be
    # exactly the per-bin definition (_features): hour and weekday of the bin, the counts
    # 1 h, 3 h and 1 day earlier, and the mean, median and std of bins i-11 .. i-6.
    from shapeshift.policies.lucid.models import SubmissionForecaster

    rng = np.random.default_rng(1)
    for n in (150, 151, 700, 4200):
        series = rng.poisson(4.0, size=n).astype(float)
        first = 1_000 * n
        bins = range(first + 144, first + n)
        rows = np.array([SubmissionForecaster._features(series, first, b) for b in bins])
        assert np.array_equal(SubmissionForecaster._feature_rows(series, first, bins), rows)
    # A bin at i = 150: weekday/hour from 600-s bins, lags are plain reads.
    series = np.arange(200, dtype=float)
    row = SubmissionForecaster._feature_rows(series, 0, range(150, 151))[0]
    assert list(row[2:5]) == [144.0, 132.0, 6.0]  # lags of 6, 18 and 144 bins
    assert list(row[5:7]) == [141.5, 141.5]  # mean and median of 139..144


def test_philly_setting_gives_lucid_the_artifacts_philly_profiler():
    # utils.profiler_config in the artifact: Philly profiles on 2 nodes for 80 s, at most
    # factor 2 x scale 2 = 4 GPUs. Only lucid declares these parameters.
    from shapeshift.datasets.catalog import PHILLY_SETTING
    from shapeshift.policies.framework.registry import policy_info

    given = dict(PHILLY_SETTING.policy_params)
    assert given == {"profiler_nodes": "2", "profile_seconds": "80", "profiler_max_gpus": "4"}
    params = LucidParams(**given)
    assert (params.profiler_nodes, params.profile_seconds, params.profiler_max_gpus) == (2, 80.0, 4)
    assert set(given) <= set(policy_info("lucid").params.model_fields)
    assert not set(given) & set(policy_info("tiresias").params.model_fields)
