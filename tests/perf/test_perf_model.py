"""Unit tests of the performance model: formulas, memory, reader, fit, curves, CLI."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from shapeshift.cli.perf_cmd import app
from shapeshift.model import ExecutionPlan, ZeroMode
from shapeshift.perf.arch import ModelArch, get_arch
from shapeshift.perf.curves import gpu_curve
from shapeshift.perf.fitting import FittedModel, OnlineModel, fit
from shapeshift.perf.measurements import Measurement, parse_placement, parse_trace_plan, read_placements
from shapeshift.perf.memory import estimate_memory, fits_memory
from shapeshift.perf.planner import Candidate, plan_profiling
from shapeshift.perf.plans import enumerate_plans, packed_placement
from shapeshift.perf.rubick import (
    Config,
    ModelOptions,
    RubickParams,
    build_features,
    iteration_time,
    soft_sum,
)
from shapeshift.perf.topology import dp_inter_load, plan_topology

TOY = ModelArch("toy", 1e9, 1000, 10, 10, 100, 8)


def test_soft_sum_limits() -> None:
    assert soft_sum(np.array(3.0), np.array(4.0), 1.0) == pytest.approx(7.0)
    assert soft_sum(np.array(3.0), np.array(4.0), 2.0) == pytest.approx(5.0)
    assert soft_sum(np.array(3.0), np.array(4.0), 200.0) == pytest.approx(4.0, rel=1e-2)
    assert soft_sum(np.array(0.0), np.array(0.0), 3.0) == 0.0


def _params(**kw: float) -> RubickParams:
    base = {"k_bwd": 2.0, "k_sync": 1.0, "k_opt": 0.1, "k_const": 0.01}
    base |= {"t_fwd": 0.01, "t_fwd_3d": 0.02, "k_stage": 0.05}
    return RubickParams(**{**base, **kw})


def test_single_gpu_plain_dp_hand_computed() -> None:
    # T_fwd = 0.01 * 8 = 0.08; T_bwd = 0.16; no comm; T_opt = 0.1 * 1 = 0.1; + 0.01
    t = iteration_time(_params(), Config(TOY, ExecutionPlan(), (1,)))
    assert t == pytest.approx(0.08 + 0.16 + 0.1 + 0.01)


def test_grad_ckpt_and_accum_hand_computed() -> None:
    # a=2: per-step fwd 0.04, bwd 2*0.04 + 0.04 (GC) = 0.12; T_cc = 2*0.04 + 1*0.12 + 0.12 = 0.32
    plan = ExecutionPlan(grad_accum=2, grad_ckpt=True)
    assert iteration_time(_params(), Config(TOY, plan, (1,))) == pytest.approx(0.32 + 0.1 + 0.01)


def test_intra_node_dp_comm_and_zero_opt() -> None:
    # d=4 on one node: V = 2 bytes * 1e9 / 1e9 = 2 GB; ring 1.5 -> 3 GB / 400 GB/s = 0.0075 s
    # fwd = 0.01*2 = 0.02, bwd 0.04; k_sync=1 adds: 0.0475; ZeRO-DP opt 0.1/4
    t = iteration_time(_params(), Config(TOY, ExecutionPlan(dp=4, zero=ZeroMode.DP), (4,)))
    assert t == pytest.approx(0.02 + 0.04 + 0.0075 + 0.025 + 0.01)


def test_inter_node_spread_and_paper_terms() -> None:
    cfg = Config(TOY, ExecutionPlan(dp=8), (4, 4))
    f_paper = build_features([cfg], ModelOptions(spread=False))
    assert f_paper.t_dp_inter[0] == pytest.approx(1.75 * 2.0 / 12.5)  # 2(d-1)/d V / B
    f_spread = build_features([cfg], ModelOptions(spread=True))
    # hierarchical: intra ring 1.75*2/400 plus 2(n-1)/n V / (NICs(4)=2 * 12.5)
    assert f_spread.t_dp_intra[0] == pytest.approx(1.75 * 2.0 / 400)
    assert f_spread.t_dp_inter[0] == pytest.approx(1.0 * 2.0 / (2 * 12.5))
    thin = build_features([Config(TOY, ExecutionPlan(dp=8), (1,) * 8)], ModelOptions(spread=True))
    assert thin.t_dp_inter[0] == pytest.approx(1.75 * 2.0 / 12.5)  # 1x8 is 3.5x slower than 4+4


def test_topology_megatron_layout() -> None:
    # llama7 148 (PP1 TP4 DP8): 4 nodes x 8 -> each DP group has 2 ranks per node
    four = plan_topology(8, 4, 1, (8, 8, 8, 8))
    eight = plan_topology(8, 4, 1, (4,) * 8)
    assert four.dp.nodes == 4 and four.dp.min_per_node == 2 and not four.tp.crosses
    assert four.dp_inter_load == pytest.approx(4 * 1.5 / 4)  # 4 groups x 2(3/4), 4 NICs
    assert eight.dp_inter_load == pytest.approx(4 * 1.75 / 2)  # 4 groups x 2(7/8), 2 NICs
    assert dp_inter_load(np.array([[0, 0, 0]]), (3,)) == 0.0
    assert plan_topology(1, 1, 2, (1, 1)).pp_crosses


def test_tp_pp_terms_hand_computed() -> None:
    # TP 2 on one node, d=1: V_tp = 4*2*(1/2)*8*100*1000*10 elems * 2 B = 0.064 GB / 400
    cfg = Config(TOY, ExecutionPlan(tp=2), (2,))
    f = build_features([cfg])
    assert f.t_tp[0] == pytest.approx(0.064 / 400)
    assert f.fwd_work[0] == pytest.approx(4.0)
    # PP 2 across nodes, m=1: fwd work = 8/(1*2)*2 = 8 (no pipelining benefit); V_pp = 2*2*8*1e5 * 2 B
    g = build_features([Config(TOY, ExecutionPlan(pp=2), (1, 1))])
    assert g.fwd_work[0] == pytest.approx(8.0)
    assert g.t_pp[0] == pytest.approx(2 * 2 * 8 * 1e5 * 2 / 1e9 / 12.5)
    assert g.stages[0] == 1.0
    h = build_features([Config(TOY, ExecutionPlan(pp=2, micro_batches=8), (2,))])
    assert h.fwd_work[0] == pytest.approx(8 / (8 * 2) * 9)  # t_p g/p (m+p-1)


def test_offload_terms_hand_computed() -> None:
    p = _params(k_opt_off=4.0, k_off=1.0, k_swap=1.0)
    cfg = Config(TOY, ExecutionPlan(dp=1, zero=ZeroMode.OFFLOAD), (1,), cpus=8)
    # T_off = 4 B * 1e9 / 25 GB/s = 0.16; T_opt = 4 * 1 / 8 = 0.5; k=1 sums; cc = 0.08 + 0.16
    assert iteration_time(p, cfg) == pytest.approx(0.08 + 0.16 + 0.16 + (0.5 + 0.16) + 0.01)
    more_cpus = iteration_time(p, Config(TOY, cfg.plan, (1,), cpus=16))
    assert more_cpus < iteration_time(p, cfg)


def test_host_contention_slows_the_cpu_optimizer_per_offloading_rank_on_a_node() -> None:
    p = _params(k_opt_off=4.0, k_off=1.0, k_swap=1.0, k_host=0.5)
    plan = ExecutionPlan(dp=4, zero=ZeroMode.OFFLOAD)
    packed = build_features([Config(TOY, plan, (4,), cpus=8)])
    spread = build_features([Config(TOY, plan, (1, 1, 1, 1), cpus=8)])
    assert packed.host_share[0] == 3.0 and spread.host_share[0] == 0.0
    assert build_features([Config(TOY, plan, (3, 1), cpus=8)]).host_share[0] == 2.0  # the busiest node
    # per rank: T_off = 4 B * 0.25e9 / 25 GB/s = 0.04; CPU Adam 4 * 0.25 / 8 = 0.125, x (1 + 0.5 * 3) packed
    packed_t = iteration_time(p, Config(TOY, plan, (4,), cpus=8))
    without = iteration_time(p, Config(TOY, plan, (4,), cpus=8), ModelOptions(host_contention=False))
    assert packed_t - without == pytest.approx(0.125 * 1.5)
    assert build_features([Config(TOY, ExecutionPlan(dp=4), (4,))]).host_share[0] == 0.0  # Offload only


def test_split_forward_uses_3d_rate() -> None:
    cfg = Config(TOY, ExecutionPlan(tp=2), (2,))
    a = iteration_time(_params(t_fwd_3d=0.02), cfg)
    b = iteration_time(_params(t_fwd_3d=0.02), cfg, ModelOptions(split_forward=False))
    assert a > b


def test_memory_7b_needs_offload() -> None:
    llama = get_arch("llama7").with_batch(1)
    assert not fits_memory(llama, ExecutionPlan(), (1,))
    assert estimate_memory(llama, ExecutionPlan(), (1,)).states_gb == pytest.approx(112.0)
    off = ExecutionPlan(zero=ZeroMode.OFFLOAD, grad_ckpt=True)
    est = estimate_memory(llama, off, (1,))
    assert est.feasible and est.states_gb == pytest.approx(14.0) and est.host_gb == pytest.approx(98.0)
    assert not fits_memory(llama, off, (1,), host_mem_gb=64)
    zero = estimate_memory(llama, ExecutionPlan(dp=8, zero=ZeroMode.DP), (8,))
    assert zero.states_gb == pytest.approx(7 * (2 + 14 / 8))


def test_plan_enumeration() -> None:
    gpt2 = get_arch("gpt2")  # 19 heads: only tp=1 fits; 24 layers
    plans = enumerate_plans(gpt2, (4, 4))
    assert all(p.gpus == 8 for p in plans)
    assert not any(p.tp > 1 for p in plans)
    assert ExecutionPlan(dp=4, pp=2, micro_batches=4) in plans
    llama = enumerate_plans(get_arch("llama7"), (2, 3, 3))
    assert not any(p.tp > 1 for p in llama)  # TP must stay inside a node
    dp = [p for p in enumerate_plans(TOY, (2,)) if p.family != "3d"]
    assert {(p.zero, p.grad_ckpt, p.grad_accum) for p in dp} == {
        (z, g, a) for z in ZeroMode for g in (False, True) for a in (1, 2, 4)
    }
    assert packed_placement(12, 8) == (8, 4)


def test_trace_strings() -> None:
    assert parse_trace_plan("248", 64) == ExecutionPlan(dp=8, tp=4, pp=2)
    assert parse_trace_plan("zero-offload+gc", 4) == ExecutionPlan(dp=4, zero=ZeroMode.OFFLOAD, grad_ckpt=True)
    assert parse_trace_plan("tp+ga", 3).tp == 3
    assert parse_placement("233") == (2, 3, 3)
    with pytest.raises(ValueError, match="needs 64 GPUs"):
        parse_trace_plan("248", 8)
    with pytest.raises(ValueError, match="bad plan"):
        parse_trace_plan("zero-3", 8)


def _synthetic(truth: RubickParams, arch: ModelArch) -> list[Measurement]:
    cfgs = []
    for placement in [(1,), (2,), (4,), (8,), (4, 4), (2, 2, 2, 2), (1,) * 8, (8, 8), (2, 3, 3)]:
        g = sum(placement)
        for plan in (ExecutionPlan(dp=g), ExecutionPlan(dp=g, zero=ZeroMode.DP), ExecutionPlan(dp=g, grad_ckpt=True)):
            cfgs.append((plan, placement, 4.0))
        for cpus in (2.0, 8.0):
            cfgs.append((ExecutionPlan(dp=g, zero=ZeroMode.OFFLOAD), placement, cpus))
    for plan, placement in [
        (ExecutionPlan(dp=1, tp=2, pp=2), (4,)),
        (ExecutionPlan(dp=2, tp=4, pp=2), (8, 8)),
        (ExecutionPlan(dp=1, tp=8, pp=4), (8,) * 4),
    ]:
        cfgs.append((plan, placement, 4.0))
    rows = []
    for plan, placement, cpus in cfgs:
        t = iteration_time(truth, Config(arch, plan, placement, cpus))
        rows.append(Measurement(arch.name, plan, placement, t, cpus))
    return rows


def test_fit_recovers_known_parameters() -> None:
    truth = RubickParams(
        k_bwd=2.2, k_sync=3.0, k_opt=0.05, k_opt_off=8.0, k_off=2.5, k_swap=3.0,
        k_const=0.05, t_fwd=0.004, t_fwd_3d=0.009, k_net=1.6, k_stage=0.03, k_host=0.4,
    )  # fmt: skip
    arch = ModelArch("synthetic", 2e9, 2048, 24, 16, 1024, 32)
    rows = _synthetic(truth, arch)
    fitted = fit(rows, arch=arch, starts=3, prior=0.0)
    assert fitted.rmsle < 1e-3
    got = fitted.params.to_dict()
    assert "k_host" in fitted.free
    for name in ("k_bwd", "k_opt", "k_opt_off", "t_fwd", "t_fwd_3d", "k_net", "k_const", "k_host"):
        assert got[name] == pytest.approx(getattr(truth, name), rel=0.05), name


def test_warm_started_refit_stays_at_the_answer_within_a_few_iterations() -> None:
    # Started at the true coefficients, two iterations suffice to stay there; from the
    # data-driven guess, two iterations leave the fit far off. This is what makes online
    # refits cheap enough to run inside a scheduling decision.
    truth = RubickParams(k_bwd=2.2, k_opt=0.05, t_fwd=0.004, t_fwd_3d=0.009, k_net=1.6)
    arch = ModelArch("synthetic", 2e9, 2048, 24, 16, 1024, 32)
    rows = _synthetic(truth, arch)
    warm = fit(rows, arch=arch, starts=1, prior=0.0, warm_start=truth, max_iterations=2)
    cold = fit(rows, arch=arch, starts=1, prior=0.0, max_iterations=2)
    assert warm.rmsle < 1e-3
    assert cold.rmsle > 10 * warm.rmsle


def test_fit_needs_points_and_keeps_offload_defaults() -> None:
    arch = ModelArch("synthetic", 2e9, 2048, 24, 16, 1024, 32)
    rows = [r for r in _synthetic(RubickParams(), arch) if r.plan.zero is not ZeroMode.OFFLOAD]
    with pytest.raises(ValueError, match="at least 7"):
        fit(rows[:6], arch=arch)
    fitted = fit(rows[:8], arch=arch, starts=1)
    assert fitted.params.k_opt_off == RubickParams().k_opt_off
    assert any("Offload" in n for n in fitted.notes)


def test_fitted_model_json_roundtrip_and_observe(tmp_path: Path) -> None:
    arch = ModelArch("synthetic", 2e9, 2048, 24, 16, 1024, 32)
    truth = RubickParams(k_bwd=2.5, t_fwd=0.01)
    rows = _synthetic(truth, arch)
    model = FittedModel(arch, RubickParams(t_fwd=0.002), rmsle=0.5, notes=("n",))
    path = tmp_path / "p.json"
    model.save(path)
    loaded = FittedModel.load(path)
    assert loaded == model
    online = OnlineModel(model, threshold=0.1, window=3)
    refits = [online.observe(r) for r in rows[:10]]
    assert not any(refits[:6]) and any(refits)  # refit once 7 points exist and the error is high
    err = abs(online.model.predict_measurements(rows[10:12]) / [r.iter_time for r in rows[10:12]] - 1)
    assert float(err.max()) < 0.1


def test_gpu_curve_is_monotone() -> None:
    # (its speed, cold and cached, is a benchmark figure: benchmarks/bench_gpu_curve.py)
    model = FittedModel(get_arch("gpt2"), RubickParams(t_fwd=0.07, t_fwd_3d=0.07))
    curve = gpu_curve(model, 64, 8)
    thr = [p.throughput for p in curve.points]
    assert len(thr) == 64 and all(b >= a for a, b in itertools.pairwise(thr))
    assert curve.points[0].plan is not None and curve.points[0].plan.gpus == 1


def test_planner_covers_families_and_offload() -> None:
    arch = get_arch("t5")
    places = [(1,), (2,), (4,), (8,), (4, 4), (2, 3, 3), (2, 2, 2, 2)]
    cands = [Candidate(p, pl) for pl in places for p in enumerate_plans(arch, pl, max_accum=1)]
    chosen = plan_profiling(arch, cands, 7)
    fams = [c.family for c in chosen]
    assert len(chosen) == 7 and fams.count("zero-offload") >= 3
    assert set(fams) >= {"3d", "ga", "gc", "zero-dp", "zero-offload"}
    assert {"single", "even"} <= {c.spread for c in chosen} or {"single", "uneven"} <= {c.spread for c in chosen}
    assert plan_profiling(arch, cands, 7) == chosen  # deterministic


def _brute_force_gain(arch: ModelArch, pool: list[Candidate], chosen: list[Candidate]) -> np.ndarray:
    """Mean over the prior coefficient sets of log det(M + j j^T) - log det(M), computed directly."""
    from shapeshift.perf.planner import RIDGE, log_sensitivities, prior_coefficients
    from shapeshift.perf.rubick import A800_NODE

    gains = []
    for theta in prior_coefficients(arch, A800_NODE):
        jac = log_sensitivities(arch, pool, theta, A800_NODE)
        rows = [pool.index(c) for c in chosen]
        m = RIDGE * np.eye(jac.shape[1]) + jac[rows].T @ jac[rows]
        base = np.linalg.slogdet(m)[1]
        gains.append([np.linalg.slogdet(m + np.outer(j, j))[1] - base for j in jac])
    return np.mean(gains, axis=0)


def test_planner_takes_the_most_informative_eligible_run() -> None:
    # With the family quotas met, each further pick maximises the information gain plus the
    # coverage bonus; checked against a direct log-determinant computation.
    from shapeshift.perf.planner import COVERAGE_BONUS

    arch = get_arch("gpt2")
    places = [(1,), (2,), (4,), (8,), (4, 4), (2, 3, 3), (1,) * 8]
    pool = sorted(
        (Candidate(p, pl) for pl in places for p in enumerate_plans(arch, pl, max_accum=1)), key=Candidate.key
    )
    chosen = plan_profiling(arch, pool, 9, check_memory=False)
    assert len(set(chosen)) == 9
    before, last = chosen[:8], chosen[8]
    gain = _brute_force_gain(arch, pool, before)
    gain += COVERAGE_BONUS * np.array(
        [(c.gpus not in {b.gpus for b in before}) + (c.spread not in {b.spread for b in before}) for c in pool]
    )
    gain[[pool.index(c) for c in before]] = -np.inf
    assert pool[int(np.argmax(gain))] == last


def test_planner_quota_keeps_offload_runs_even_when_others_are_more_informative() -> None:
    arch = get_arch("t5")
    places = [(1,), (2,), (4,), (8,), (4, 4), (2, 3, 3)]
    cands = [Candidate(p, pl) for pl in places for p in enumerate_plans(arch, pl, max_accum=1)]
    four = plan_profiling(arch, cands, 4)
    assert [c.family for c in four].count("zero-offload") <= 3
    seven = plan_profiling(arch, cands, 7)
    assert [c.family for c in seven].count("zero-offload") == 3
    assert plan_profiling(arch, [], 7) == []
    three = plan_profiling(arch, cands, 3)  # just enough runs: each must add a spread
    assert {c.spread for c in three} == {"single", "even", "uneven"}
    one_node = [c for c in cands if len(c.placement) == 1]
    assert len({c.gpus for c in plan_profiling(arch, one_node, 3)}) == 3  # ... or a GPU count
    with pytest.raises(ValueError):
        plan_profiling(arch, cands, 0)


# ---- CLI error paths -------------------------------------------------------------------

runner = CliRunner()


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "placements.csv"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("exec_plan,placement\nga,1\n", "missing column(s) iter_time"),
        ("exec_plan,placement,iter_time\nga,1,0.5\nzero-9,2,0.4\n", ":3: field 'exec_plan'"),
        ("exec_plan,placement,iter_time\nga,1,abc\n", ":2: field 'iter_time'"),
        ("exec_plan,placement,iter_time\nga,x1,0.4\n", ":2: field 'placement'"),
    ],
)
def test_cli_fit_bad_input(tmp_path: Path, content: str, message: str) -> None:
    csv_path = str(_csv(tmp_path, content))
    res = runner.invoke(app, ["fit", "--measurements", csv_path, "--model", "bert", "--out", str(tmp_path / "o.json")])
    assert res.exit_code == 2
    assert message in res.output
    assert "Traceback" not in res.output


def test_cli_errors_missing_file_unknown_model_bad_plan(tmp_path: Path) -> None:
    res = runner.invoke(app, ["fit", "--measurements", str(tmp_path / "none.csv"), "--model", "bert", "--out", "x"])
    assert res.exit_code == 2 and "no such file" in res.output
    res = runner.invoke(app, ["fit", "--measurements", str(tmp_path / "none.csv"), "--model", "gpt9", "--out", "x"])
    assert res.exit_code == 2 and "unknown model 'gpt9'" in res.output
    params = tmp_path / "p.json"
    FittedModel(get_arch("bert"), RubickParams()).save(params)
    base = ["predict", "--params", str(params), "--model", "bert", "--placement", "44"]
    assert runner.invoke(app, [*base, "--plan", "zero-dp"]).exit_code == 0
    res = runner.invoke(app, [*base, "--plan", "12x"])
    assert res.exit_code == 2 and "--plan" in res.output
    res = runner.invoke(app, ["plan-profiling", "--model", "bert", "--cluster", "eight"])
    assert res.exit_code == 2 and "--cluster" in res.output
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = runner.invoke(app, ["predict", "--params", str(bad), "--model", "bert", "--plan", "ga", "--placement", "4"])
    assert res.exit_code == 2 and "bad.json:1" in res.output


def test_cli_fit_predict_roundtrip(tmp_path: Path) -> None:
    table = [("ga", "1", 0.66), ("ga", "2", 0.37), ("ga", "4", 0.23), ("ga", "8", 0.16)]
    table += [("ga", "44", 0.21), ("gc", "8", 0.19), ("zero-dp", "8", 0.155), ("ga", "2222", 0.26)]
    rows = "exec_plan,placement,iter_time\n" + "".join(f"{p},{pl},{t}\n" for p, pl, t in table)
    out = tmp_path / "bert.json"
    res = runner.invoke(app, ["fit", "--measurements", str(_csv(tmp_path, rows)), "--model", "bert", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert FittedModel.load(out).n_points == 8
    res = runner.invoke(app, ["predict", "--params", str(out), "--model", "bert", "--plan", "ga", "--placement", "8"])
    assert res.exit_code == 0 and "iteration time" in res.output


def test_reader_on_bundled_trace() -> None:
    from tests.conftest import bundled

    path = bundled("rubick-a800-tables/llama7b_bsz16/placements.csv")
    rows = read_placements(path)
    assert all(r.iter_time > 0 for r in rows) and len(rows) == 17  # iter_time 0 rows dropped
    assert {r.cpus for r in rows} == {2.0, 4.0}
    pp = [r for r in rows if r.plan.pp > 1]
    assert all(r.plan.micro_batches == 16 // r.plan.dp for r in pp)
    assert not math.isnan(sum(r.iter_time for r in rows))
