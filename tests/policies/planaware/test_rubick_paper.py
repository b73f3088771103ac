"""Rubick's Algorithm 1 and Section 5 rules, each on a hand-built scenario.

Expectations come from the paper's rules, not from our output: slopes are throughput
gains per GPU relative to the model's throughput on a fixed 4-GPU baseline (Sec. 7.2),
so a linear model scores 0.25 per GPU; ``StubKnowledge`` makes knowledge and truth agree.
"""

from __future__ import annotations

import pytest

from shapeshift.engine.engine import Engine
from shapeshift.engine.overheads import Overheads
from shapeshift.model import JobSpec
from shapeshift.policies.planaware.core import PlanAwareScheduler
from shapeshift.policies.planaware.rubick import RubickParams, rubick_variant
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor
from shapeshift.sim.simulator import simulate
from tests.conftest import jcts
from tests.policies.planaware.stubs import StubKnowledge, StubTruth, cluster, pjob

PAUSE = Overheads(0.0, 78.0)


class ByModel(StubKnowledge):
    """Throughput per model: ``curves[model](gpus, requested_plan)``."""

    def __init__(self, curves) -> None:
        super().__init__()
        self.curves = curves

    def best(self, model, place, cpus, space=("all",)):
        self.thr = self.curves[model]
        return super().best(model, place, cpus, space)


class ByModelTruth(StubTruth):
    def __init__(self, curves) -> None:
        super().__init__()
        self.curves = curves

    def rate(self, job, allocation):
        self.thr = self.curves[job.model]
        return super().rate(job, allocation)


def _as(job: JobSpec, model: str) -> JobSpec:
    return JobSpec(**{**{f: getattr(job, f) for f in job.__slots__}, "model": model})


def _engine(curves, nodes=1, tenants=None, **params) -> Engine:
    pol = PlanAwareScheduler(rubick_variant("rubick", RubickParams(**params)), ByModel(curves))
    return Engine(cluster(nodes, 8, tenants), pol, SimulatedExecutor(ByModelTruth(curves), CompletionQueue()), PAUSE)


def _gpus(eng: Engine) -> dict[str, int]:
    return {j: a.gpus for j, a in eng.allocations.items()}


def test_a_higher_slope_job_shrinks_a_lower_slope_running_job():
    # Algorithm 1 lines 8-17. a (bert): 8 + g samples/s, baseline c[4] = 12, so each GPU
    # beyond the first is worth 1/12 = 0.083; alone it grows to all 8 GPUs (no cap).
    # b (roberta): 10 g, worth 10/40 = 0.25 per GPU > 0.083: it takes a's GPUs one by one
    # until a is at its minimum (1 GPU: losing it would preempt a, worth 9/12 = 0.75).
    curves = {"bert": lambda g, req: 8.0 + g, "roberta": lambda g, req: 10.0 * g}
    eng = _engine(curves)
    eng.submit(pjob("a", 0, 8, 100_000), 0.0)
    eng.step(0.0)
    assert _gpus(eng) == {"a": 8}
    eng.submit(_as(pjob("b", 10, 2, 100_000), "roberta"), 10.0)
    eng.step(10.0)
    assert _gpus(eng) == {"a": 1, "b": 7}


def test_a_guaranteed_running_job_is_shrunk_to_its_min_res_and_no_further():
    # g (guaranteed, tenant A): requested plan and best plan 10 g up to 4 GPUs, 40 + 2 (g - 4)
    # beyond: minRes = 4 GPUs (40 samples/s = its request's). Grown to 8 by a decision with
    # free GPUs (Algorithm 1 grows running guaranteed jobs too), its GPUs beyond 4 are worth
    # 2/40 = 0.05 each; h (roberta, 10 g) gains 0.25 per GPU and takes them, down to 4.
    def g_curve(g: int, req: bool) -> float:
        return 10.0 * g if g <= 4 else 40.0 + 2.0 * (g - 4)

    curves = {"bert": g_curve, "roberta": lambda g, req: 10.0 * g}
    eng = _engine(curves, tenants={"A": 8})
    eng.submit(pjob("g", 0, 4, 1_000_000, guaranteed=True, tenant="A"), 0.0)
    eng.step(0.0)
    assert _gpus(eng) == {"g": 4}  # placed at minRes
    eng.fire_wakeup()  # any later decision: g is in the slope order and grows into free GPUs
    eng.step(1.0)
    assert _gpus(eng) == {"g": 8}
    eng.submit(_as(pjob("h", 20, 2, 1_000_000), "roberta"), 20.0)
    eng.step(20.0)
    assert _gpus(eng) == {"g": 4, "h": 4}  # never below minRes, never preempted


def test_quota_is_charged_at_min_res():
    # Two guaranteed 8-GPU jobs whose best plan reaches the requested 5 x 8 = 40 samples/s on
    # 4 GPUs (10 x min(g, 4)): minRes = 4 each, so both fit tenant A's 8-GPU quota at once.
    # Each runs 400 it x 32 / 40 = 320 s. Charged at their request (8 each), the second
    # would wait for the first: 320 and 640 s.
    def thr(g: int, requested: bool) -> float:
        return 5.0 * g if requested else 10.0 * min(g, 4)

    pol = PlanAwareScheduler(rubick_variant("rubick"), StubKnowledge(thr))
    jobs = [pjob(f"g{i}", 0, 8, 400, guaranteed=True, tenant="A") for i in (1, 2)]
    r = simulate(jobs, cluster(2, 8, {"A": 8}), pol, throughput=StubTruth(thr), overheads=PAUSE)
    assert jcts(r) == pytest.approx({"g1": 320.0, "g2": 320.0})


@pytest.mark.parametrize(("threshold", "start"), [(100.0, 110.0), (None, 800.0)])
def test_a_best_effort_job_waiting_past_the_threshold_starts_within_one_decision(threshold, start):
    # rubick-n keeps requests (no stealing): big holds all 8 GPUs for 2,000 it x 32 / 80
    # samples/s = 800 s; w (4 GPUs) arrives at 10. With the arXiv v2 anti-starvation rule
    # (threshold 100 s) the policy asks to decide at 10 + 100 = 110 and places w there,
    # preempting big; without it, w waits for big to finish at 800. w then runs
    # 400 it x 32 / 40 samples/s = 320 s.
    pol = PlanAwareScheduler(rubick_variant("rubick-n", RubickParams(starvation_threshold=threshold)), StubKnowledge())
    jobs = [pjob("big", 0, 8, 2000), pjob("w", 10, 4, 400)]
    r = simulate(jobs, cluster(1, 8), pol, throughput=StubTruth(), overheads=PAUSE)
    w = next(j for j in r.jobs if j.spec.job_id == "w")
    assert w.first_start == pytest.approx(start)
    assert jcts(r)["w"] == pytest.approx(start - 10 + 400 * 32 / 40)
