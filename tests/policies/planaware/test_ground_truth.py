"""Ground truth (measured table first, fitted fallback counted) and policy knowledge."""

from __future__ import annotations

import math

import pytest

from shapeshift.model import Allocation, ExecutionPlan, JobSpec, Resources, ZeroMode
from shapeshift.perf.arch import get_arch
from shapeshift.perf.ground_truth import GroundTruthModel, host_memory_gb, placement_key
from shapeshift.perf.measurements import Measurement
from shapeshift.perf.rubick import Config, build_features, predict_breakdown
from shapeshift.policies.planaware.knowledge import ALL, Knowledge, dp_space, fixed_space, plans_in_space
from tests.conftest import bundled

DP = ExecutionPlan


def _rows() -> list[Measurement]:
    zero = ZeroMode.DP
    return [
        Measurement("bert", DP(dp=1), (1,), 1.0),
        Measurement("bert", DP(dp=2, zero=zero), (2,), 0.6),
        Measurement("bert", DP(dp=4, zero=zero), (4,), 0.35),
        Measurement("bert", DP(dp=8, zero=zero), (8,), 0.2),
        Measurement("bert", DP(dp=8, zero=zero), (3, 5), 0.9),
        Measurement("bert", DP(dp=8, zero=zero), (4, 4), 0.4),
        Measurement("bert", DP(dp=2, pp=2, micro_batches=1), (4,), 0.5),
        Measurement("bert", DP(dp=2, zero=ZeroMode.OFFLOAD), (2,), 2.0),
    ]


def _alloc(place: dict[int, int], plan: ExecutionPlan, cpus: float = 8.0, mem: float = 100.0) -> Allocation:
    g = sum(place.values())
    return Allocation(tuple((n, Resources(k, cpus * k / g, mem * k / g)) for n, k in place.items()), plan)


def _job(gpus: int, plan: ExecutionPlan, guaranteed: bool = False) -> JobSpec:
    return JobSpec("j", 0.0, gpus, model="bert", iterations=100, plan=plan, guaranteed=guaranteed, num_cpus=8.0 * gpus)


@pytest.fixture(scope="module")
def truth() -> GroundTruthModel:
    return GroundTruthModel({"bert": _rows()}, fit_starts=1)


def test_measured_rows_answer_exactly_and_placement_order_does_not_matter(truth):
    plan = DP(dp=8, zero=ZeroMode.DP)
    job = _job(8, plan)
    assert truth.rate(job, _alloc({0: 4, 1: 4}, plan)) == pytest.approx(1 / 0.4)
    assert truth.rate(job, _alloc({0: 5, 1: 3}, plan)) == pytest.approx(1 / 0.9)
    assert truth.rate(job, _alloc({0: 3, 1: 5}, plan)) == pytest.approx(1 / 0.9)
    assert placement_key((3, 0, 5)) == (5, 3)


def test_pipeline_plans_are_charged_as_one_micro_batch(truth):
    plan = DP(dp=2, pp=2, micro_batches=16)
    assert truth.rate(_job(4, plan), _alloc({0: 4}, plan)) == pytest.approx(1 / 0.5)


def test_fallback_is_used_and_counted_for_unmeasured_configurations(truth):
    before = truth.stats.calls["fallback"]
    plan = DP(dp=6, zero=ZeroMode.DP)
    rate = truth.rate(_job(6, plan), _alloc({0: 6}, plan))
    assert 0 < rate < math.inf
    assert truth.stats.calls["fallback"] == before + 1


def test_offload_needs_its_host_memory_and_scales_with_cpus(truth):
    # The Offload row: dp=2 on one node, 4 CPU threads per process (the default of rows
    # without cpu_threads), 2.0 s. A job's CPUs are shared by its 2 processes.
    plan = DP(dp=2, zero=ZeroMode.OFFLOAD)
    job = _job(2, plan)
    arch = get_arch("bert")
    need = host_memory_gb(arch, plan)
    assert need > 336e6 * 14 / 1e9  # optimizer states + base
    infeasible = truth.stats.calls["infeasible"]
    assert truth.rate(job, _alloc({0: 2}, plan, cpus=8.0, mem=1.0)) == 0.0
    assert truth.stats.calls["infeasible"] == infeasible + 1
    # 8 CPUs in all = 4 threads per process: exactly the row, unscaled
    table = truth.stats.calls["table"]
    assert truth.rate(job, _alloc({0: 2}, plan, cpus=8.0, mem=need)) == pytest.approx(1 / 2.0)
    assert truth.stats.calls["table"] == table + 1
    # 4 CPUs in all = 2 threads per process: the row scaled by the model's T(2) / T(4) > 1
    fitted = truth.fitted("bert")

    def model_t(threads: float) -> float:
        return float(fitted.predict([Config(fitted.arch, plan, (2,), threads, fitted.node)])[0])

    assert model_t(2.0) > model_t(4.0) > model_t(16.0)
    slower = truth.rate(job, _alloc({0: 2}, plan, cpus=4.0, mem=need))
    assert slower == pytest.approx(1 / (2.0 * model_t(2.0) / model_t(4.0)))
    # 32 CPUs in all = 16 threads per process (not 32: that was the bug of reading the
    # rows' per-process threads as the job's total)
    faster = truth.rate(job, _alloc({0: 2}, plan, cpus=32.0, mem=need))
    assert faster == pytest.approx(1 / (2.0 * model_t(16.0) / model_t(4.0)))
    assert faster != pytest.approx(1 / (2.0 * model_t(32.0) / model_t(4.0)))
    assert truth.stats.calls["table_cpu_scaled"] >= 2


def test_offload_optimizer_time_follows_threads_per_gpu_not_total_cpus(truth):
    # Rubick App. A: T_opt = k_opt_off P / (d c), c = threads of one process. An 8-GPU
    # Offload job with 32 CPUs runs 4 threads per process, the same per-process load as a
    # 1-GPU job with 4 CPUs has per parameter shard; giving it 64 CPUs halves c's share.
    fitted = truth.fitted("bert")
    plan = DP(dp=8, zero=ZeroMode.OFFLOAD)
    theta = fitted.params.as_array()

    def opt_time(threads: float) -> float:
        f = build_features([Config(fitted.arch, plan, (4, 4), threads, fitted.node)], fitted.options)
        return float(predict_breakdown(theta, f).t_oo[0])

    # the ground truth answers from the model (no row): its time equals the model's at 4 threads
    t32, source = truth.iteration_time("bert", plan, (4, 4), 32.0, 1e6)
    assert source == "fallback"
    assert t32 == pytest.approx(float(fitted.predict([Config(fitted.arch, plan, (4, 4), 4.0, fitted.node)])[0]))
    t64, _ = truth.iteration_time("bert", plan, (4, 4), 64.0, 1e6)
    # the CPU optimizer term k_opt_off P / (d c) halves from c = 4 to c = 8 threads
    k, p_b, host = fitted.params.k_opt_off, fitted.arch.params_b, 1 + fitted.params.k_host * 3
    assert k * p_b / (8 * 4) * host == pytest.approx(2 * k * p_b / (8 * 8) * host)
    assert t32 - t64 == pytest.approx(opt_time(4.0) - opt_time(8.0))
    assert opt_time(4.0) > opt_time(8.0) > opt_time(32.0)


def test_target_rate_only_for_guaranteed_jobs(truth):
    plan = DP(dp=4, zero=ZeroMode.DP)
    assert truth.target_rate(_job(4, plan)) is None
    assert truth.target_rate(_job(4, plan, guaranteed=True)) == pytest.approx(1 / 0.35)


def test_plan_spaces():
    arch = get_arch("llama7")
    tp4 = DP(dp=2, tp=4)
    assert plans_in_space(arch, (8,), fixed_space(tp4)) == [tp4]
    assert plans_in_space(arch, (5, 3), fixed_space(tp4)) == []  # TP groups stay inside nodes
    assert plans_in_space(arch, (4, 4, 4, 4), dp_space(tp4)) == [DP(dp=4, tp=4)]
    assert plans_in_space(arch, (4, 4, 4), dp_space(tp4)) == []  # llama7's batch 8 does not split over 3
    every = plans_in_space(arch, (8,), ALL)
    assert all(p.micro_batches == 1 for p in every if p.pp > 1)
    assert {p.family for p in every} >= {"3d", "zero-dp", "zero-offload"}


class _View:
    def __init__(self, allocs, statuses):
        self.allocations = allocs
        self._s = statuses

    def job(self, jid):
        return self._s[jid]


class _Status:
    def __init__(self, spec, rate):
        self.spec = spec
        self.rate = rate


def test_knowledge_uses_observed_speed_for_exactly_that_configuration(tmp_path):
    kn = Knowledge(traces=tmp_path, refit_threshold=10.0)  # empty dir: default coefficients
    plan = DP(dp=4, zero=ZeroMode.DP)
    before = kn.best("bert", (4,), 32.0, fixed_space(plan))
    assert before is not None
    spec = _job(4, plan)
    kn.observe(_View({"j": _alloc({0: 4}, plan, cpus=32.0)}, {"j": _Status(spec, 0.5)}))
    after = kn.best("bert", (4,), 32.0, fixed_space(plan))
    assert after is not None and after.iter_time == pytest.approx(2.0)
    assert kn.is_observed("bert", plan, (4,), 32.0)
    assert not kn.is_observed("bert", plan, (2, 2), 32.0)


def test_knowledge_ignores_a_job_slowed_by_a_gpu_partner_until_it_runs_alone(tmp_path):
    # Bug found with antman's sharing: an interference-slowed rate was recorded as the
    # configuration's iteration time and triggered refits. A job at speed < 1 is skipped;
    # once alone (speed 1) its rate is recorded: 1 / 0.5 it/s = 2 s per iteration.
    kn = Knowledge(traces=tmp_path, refit_threshold=10.0)
    plan = DP(dp=4, zero=ZeroMode.DP)
    spec = _job(4, plan)
    status = _Status(spec, 0.25)
    status.speed = 0.5
    view = _View({"j": _alloc({0: 4}, plan, cpus=32.0)}, {"j": status})
    kn.observe(view)
    assert not kn.is_observed("bert", plan, (4,), 32.0)
    status.rate, status.speed = 0.5, 1.0
    kn.observe(view)
    after = kn.best("bert", (4,), 32.0, fixed_space(plan))
    assert after is not None and after.iter_time == pytest.approx(2.0)


def test_knowledge_fits_on_seven_sampled_rows_of_the_real_traces():
    traces = bundled("rubick-a800-tables")
    kn = Knowledge(traces=traces)
    mk = kn.knowledge("gpt2")
    assert mk is not None and len(mk.sample) == 7 and mk.model.n_points == 7
