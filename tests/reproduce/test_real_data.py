"""Smoke runs on a slice of the real Rubick traces, and the CLI's handling of bad input."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.reproduce.experiment import Paths, llm_share, load_jobs, run_one, scale_load
from tests.conftest import bundled, shared_file


@pytest.fixture(scope="module")
def paths() -> Paths:
    bundled("rubick-a800-tables")
    return Paths.default(shared_file("data/rubick"), bundled("rubick-a800"))


def test_mt_slice_antman_meets_slo_and_rubick_reports_it(paths):
    jobs = [j for j in load_jobs(paths, "mt")[:12] if j.model in {"vit", "t5", "bert"}]
    assert any(j.guaranteed for j in jobs)  # the slice exercises guarantees
    antman = run_one(paths, jobs, "antman", "mt")
    assert antman["completed"] == len(jobs)
    # AntMan runs guaranteed jobs exactly as requested, and the promise is the requested
    # configuration's speed under the same ground truth: met all the time, by construction
    assert antman["slo_attainment"] == pytest.approx(1.0)
    rubick = run_one(paths, jobs, "rubick", "mt")
    assert rubick["completed"] == len(jobs)
    assert 0.0 <= rubick["slo_attainment"] <= 1.0
    assert rubick["gt_table"] > 0  # the measured table answers most configurations


def test_mt_slice_rubick_min_res_meets_each_target_under_its_model_and_stays_within_the_request(paths):
    # Rubick Sec. 5: minRes is the smallest allocation whose *predicted* throughput meets
    # the requested configuration's (no margin), never above the request in any dimension.
    from shapeshift.perf.plans import packed_placement
    from shapeshift.policies.framework.registry import make_policy
    from shapeshift.policies.planaware.knowledge import fixed_space, job_space

    jobs = [j for j in load_jobs(paths, "mt")[:40] if j.model in {"vit", "t5", "bert", "gpt2"}]
    guaranteed = [j for j in jobs if j.guaranteed]
    assert guaranteed
    traces = paths.traces
    policy = make_policy("rubick", {"traces": traces})  # its 7-row fits, as at the first decision
    kn = policy.knowledge
    for spec in guaranteed:
        g, choice, cpus = policy.min_res_full(spec, 8)
        assert 1 <= g <= spec.num_gpus and 0 < cpus <= spec.num_cpus
        target = kn.best(spec.model, packed_placement(spec.num_gpus, 8), spec.num_cpus, fixed_space(spec.plan))
        got = choice or target  # None = the requested plan at the requested size
        assert got.throughput >= target.throughput * (1 - 1e-9), spec.job_id
        if g > 1 and choice is not None:  # one GPU fewer would not have met it (smallest)
            fewer = kn.best(spec.model, packed_placement(g - 1, 8), spec.num_cpus, job_space(spec, True, True))
            assert fewer is None or fewer.throughput < target.throughput, spec.job_id


def test_sweep_transformations():
    from tests.policies.planaware.stubs import pjob

    jobs = [pjob(f"j{i}", 100.0 * i, 1, 10) for i in range(4)]
    assert [j.submit_time for j in scale_load(jobs, 2.0)] == [0.0, 50.0, 100.0, 150.0]
    mixed = [pjob("a", 0, 1, 10), pjob("b", 5, 1, 10)]
    llama = [j.__class__(**{**{f: getattr(j, f) for f in j.__slots__}, "model": "llama7"}) for j in mixed]
    out = llm_share([mixed[0], llama[1]], 1.0)
    assert all(j.model == "llama7" for j in out) and [j.submit_time for j in out] == [0, 5]
    assert all(j.model == "bert" for j in llm_share([mixed[0], llama[1]], 0.0))


def test_cli_reports_bad_input_without_traceback(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["reproduce", "--data", str(tmp_path / "nope"), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    res = runner.invoke(app, ["simulate", "--policy", "rubick", "--policy-arg", "max_scale=0.5"])
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_table_flags_policies_that_left_jobs_unfinished():
    from shapeshift.reproduce.experiment import markdown_table

    done = dict(variant="base", policy="rubick", jobs=406, completed=406, avg_jct_h=0.3, p99_jct_h=3.0, makespan_h=15.0)
    short = {**done, "policy": "rubick-e", "completed": 361}
    lines = markdown_table([done, short]).splitlines()
    assert "unfinished" not in lines[-2] and "rubick-e (45 of 406 jobs unfinished)" in lines[-1]
