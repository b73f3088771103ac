"""The pollux policy: exact optimisation, limits and placement against brute force."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pytest

from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.engine import Engine
from shapeshift.engine.view import ClusterView
from shapeshift.model import BatchSpec, JobSpec
from shapeshift.perf.pollux.knowledge import shape_pairs
from shapeshift.policies.goodput.pollux import PolluxParams, PolluxPolicy, power_utility, solve
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor
from tests.conftest import bundled


def test_knapsack_matches_enumeration():
    rng = np.random.default_rng(7)
    for _ in range(25):
        utilities = [np.sort(rng.normal(size=rng.integers(2, 5))) * rng.uniform(0.5, 2) for _ in range(4)]
        total = 6
        best = max(
            sum(u[r] for u, r in zip(utilities, rs, strict=True))
            for rs in itertools.product(*(range(len(u)) for u in utilities))
            if sum(rs) <= total
        )
        counts = solve(utilities, total)
        assert sum(counts) <= total
        assert sum(u[r] for u, r in zip(utilities, counts, strict=True)) == pytest.approx(best)


def _engine(policy, jobs, nodes, gpus, now):
    from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth

    truth = PolluxGroundTruth(bundled("pollux-profiles"))
    engine = Engine(shorthand_cluster(nodes, gpus), policy, SimulatedExecutor(truth, CompletionQueue()))
    for spec in jobs:
        engine.submit(spec, spec.submit_time)
    return engine, ClusterView(engine, now, frozenset({""}), True)


def _job(name, app, batch, submit=0.0):
    return JobSpec(name, submit, 1, iterations=1, model=f"pollux/{app}", batch=batch)


CIFAR = BatchSpec(128, 128, 4096, 32, 1024, adaptive=True)
BERT = BatchSpec(12, 12, 384, 4, 12, adaptive=True)
SPEECH = BatchSpec(20, 20, 640, 10, 80, adaptive=True)


def test_allocation_reaches_the_brute_force_optimum_on_a_small_cluster():
    """2 nodes x 2 GPUs, three jobs that have waited 60 s: the objective of the placed
    allocation equals the best over every allocation matrix (node capacity, at most one
    job spanning nodes per node), each job's speedup evaluated at its real node count."""
    policy = PolluxPolicy(PolluxParams(profiles=str(bundled("pollux-profiles")), explore=False))
    jobs = [_job("c", "cifar10", CIFAR), _job("b", "bert", BERT), _job("d", "deepspeech2", SPEECH)]
    _, view = _engine(policy, jobs, 2, 2, 60.0)
    infos = {j.job_id: j for j in policy._jobs(view, "", 4)}
    fair = math.ceil(4 / 3)

    def objective(matrix):
        total = 0.0
        for job_id, row in zip(("c", "b", "d"), matrix, strict=True):
            info = infos[job_id]
            r, k = sum(row), sum(1 for g in row if g)
            if r > info.max_r:
                return -math.inf
            x = 0.0
            if r:
                good, _ = info.table.best(k, r)
                base, _ = info.table.best(1, fair)
                x = float(good[0] / base[0]) * 2 / 4 * info.factor
            total += float(power_utility(np.array([x]), -1.0)[0])
        return total

    best = -math.inf
    for flat in itertools.product(range(3), repeat=6):
        m = [flat[0:2], flat[2:4], flat[4:6]]
        if any(sum(m[j][n] for j in range(3)) > 2 for n in range(2)):
            continue
        spans = [sum(1 for g in row if g) > 1 for row in m]
        if any(sum(1 for j in range(3) if spans[j] and m[j][n]) > 1 for n in range(2)):
            continue
        best = max(best, objective(m))
    schedule = policy.decide(view)
    chosen = schedule.allocations
    matrix = [
        [dict((n, r.gpus) for n, r in chosen[j].placement).get(n, 0) if j in chosen else 0 for n in range(2)]
        for j in ("c", "b", "d")
    ]
    assert objective(matrix) == pytest.approx(best)
    assert sum(sum(row) for row in matrix) <= 4


class Flat:
    """Knowledge stand-in: job "flat" gains nothing from a second GPU, "linear" scales."""

    root = None

    def job(self, spec, batch_now, progress, merged=None):
        return _Table(spec.job_id)


@dataclass(frozen=True)
class _Table:
    kind: str
    params: str = "fitted"
    cap_total: bool = True

    def table(self, gpn, cols):
        r = np.arange(1, cols + 1, dtype=float)
        good = np.ones_like(r) if self.kind == "flat" else r
        return np.concatenate([good, good]), np.ones(2 * cols, dtype=int)

    def best(self, nodes, replicas):
        r = np.atleast_1d(np.asarray(replicas, float))
        return (np.ones_like(r) if self.kind == "flat" else r), np.ones(r.shape, dtype=int)

    def by_shape(self, gpn, max_r, max_nodes):
        # The same on any node count (no synchronisation cost): out[k, r] = 1 or r.
        out = np.zeros((max_nodes + 1, max_r + 1))
        k, r = shape_pairs(gpn, max_r, max_nodes)
        out[k, r] = 1.0 if self.kind == "flat" else r
        return out


def test_a_job_whose_speedup_is_flat_gets_no_more_than_its_minimum():
    # 1 node x 4 GPUs. Power mean p = -1 minimises sum 1/(x + 1e-3): flat x is the same
    # for 1..4 GPUs, linear grows with r. (flat 1, linear 3): 1 + 1/3; (2, 2): 1 + 1/2;
    # (0, 4): 1000 + ... -> flat gets exactly 1 GPU, linear the other 3. The stand-in is
    # an application's model: the offline one.
    params = PolluxParams(
        profiles=str(bundled("pollux-profiles")), explore=False, goodput_model="offline", batch_retune="round"
    )
    policy = PolluxPolicy(params)
    policy.knowledge = Flat()
    jobs = [_job("flat", "cifar10", CIFAR), _job("linear", "cifar10", CIFAR)]
    _, view = _engine(policy, jobs, 1, 4, 600.0)
    chosen = policy.decide(view).allocations
    assert chosen["flat"].gpus == 1 and chosen["linear"].gpus == 3


def test_new_jobs_start_on_one_gpu_and_at_most_double_later():
    # The artifact's exploration rule: max(2 x largest replicas run on, 1).
    policy = PolluxPolicy(PolluxParams(profiles=str(bundled("pollux-profiles"))))
    engine, view = _engine(policy, [_job("c", "cifar10", CIFAR)], 2, 4, 60.0)
    schedule = policy.decide(view)
    first = schedule.allocations["c"]
    assert first.gpus == 1 and first.batch_size is not None
    engine.reconcile(schedule, 60.0)
    view = ClusterView(engine, 120.0, frozenset({""}), True)
    assert policy.decide(view).allocations["c"].gpus <= 2


def test_the_shipped_reproduction_file_validates():
    from pathlib import Path

    from shapeshift.experiments.expand import expand
    from shapeshift.experiments.schema import load_experiment

    bundled("pollux-workload6")
    path = Path(__file__).resolve().parents[3] / "experiments" / "pollux-workload6.yaml"
    plans = expand(load_experiment(path))
    assert len(plans) == 10  # pollux at 5 intervals, pollux search=exact, sia, fifo, tiresias, optimus


def test_sia_knapsack_and_integer_program_reach_the_same_objective():
    """On one GPU type Sia's program is solved by the knapsack; HiGHS on the same program
    (what heterogeneous clusters use) must find the same optimum."""
    from shapeshift.policies.goodput.sia import SiaParams, SiaPolicy
    from shapeshift.policies.planaware.knowledge import Knowledge

    policy = SiaPolicy(SiaParams(profiles=str(bundled("pollux-profiles")), explore=False), Knowledge(None))
    jobs = [
        _job("c1", "cifar10", CIFAR, 0.0),
        _job("c2", "cifar10", CIFAR, 10.0),
        _job("b", "bert", BERT, 20.0),
        _job("d", "deepspeech2", SPEECH, 30.0),
        _job("y", "yolov3", BatchSpec(8, 8, 512, 4, 8, adaptive=True), 40.0),
    ]
    _, view = _engine(policy, jobs, 2, 4, 600.0)
    types = {"generic": (4, 2)}
    infos = [policy._job(view, j.job_id, types) for j in jobs]

    def cost(chosen):
        total = 0.0
        for info in infos:
            if info.job_id in chosen:
                k = info.options.index(chosen[info.job_id])
                total += float(policy.costs(view, info)[k])
        return total

    by_type = {"generic": [0, 1]}
    dp = policy._solve_one_type(view, infos, 8)
    ip = policy._solve_milp(view, infos, by_type)
    assert sum(o.gpus for o in dp.values()) <= 8
    assert cost(dp) == pytest.approx(cost(ip), abs=1e-9)


def test_sia_starts_a_waiting_job_without_a_restart_factor():
    """1 x 1 GPU, three 0 s jobs at t=0, sia (60 s rounds, p = -0.5, lambda_n = 1.1,
    restore penalty 78 s). The artifact scales only jobs holding GPUs by the restart
    factor (``__solve_mip_rescaled``), so a waiting job's one option costs
    round(1^-0.5, 2) - 1.1 = -0.1 < 0 (idle: 0) at any age: one job per round, ending at
    0, 60 and 120 s (which job first is a tie, left to the solver).
    (Scaling waiting jobs too kept j0 idle until its factor 360/438 allowed it, at 360.)"""
    from tests.conftest import job, run

    result = run([job("j0", 0, 1, 0.0), job("j1", 0, 1, 0.0), job("j2", 0, 1, 0.0)], "1x1", "sia")
    assert sorted(j.end_time for j in result.jobs) == [0.0, 60.0, 120.0]


def test_speedups_count_the_rounded_up_top_batch_as_the_artifacts_optimize():
    # Both artifacts' GoodputFunction.optimize round each GPU's share up and check only the
    # per-GPU batch (batch_overshoot, the default). Largest batch 2048, per-GPU 32..1024,
    # 12 GPUs packed on 3 nodes of 4: candidates run from 12 x 32 = 384 to 2048; the top
    # one splits as ceil(2048 / 12) = 171 per GPU, 2052 in all, and is kept. With
    # batch_overshoot=false the next one, 2048 x (384 / 2048)^(1/49) = 1979.2, splits as
    # 165 per GPU, 1980. Noise (sqr 0, var 1) makes goodput the throughput, which grows
    # with the batch, so the best is the largest valid one. The shape table (3 nodes, 12
    # GPUs) gives the same goodput as the packed column.
    from dataclasses import replace

    from shapeshift.perf.pollux.goodput import BatchLimits, PerfParams
    from shapeshift.perf.pollux.knowledge import JobGoodput

    params = PerfParams(0.05, 0.002, 0.1, 0.01, 0.02, 0.005, 1.0)
    table = JobGoodput(params, (0.0, 1.0), BatchLimits(128, 2048, 32, 1024), True)
    for cap, want in ((False, 2052), (True, 1980)):
        capped = replace(table, cap_total=cap)
        good, batch = capped.table(4, 12)
        assert batch[11] == want
        assert capped.by_shape(4, 12, 3)[3, 12] == pytest.approx(good[11])
    for overshoot in (True, False):
        policy = PolluxPolicy(PolluxParams(profiles=str(bundled("pollux-profiles")), batch_overshoot=overshoot))
        _, view = _engine(policy, [_job("c", "cifar10", CIFAR)], 2, 4, 60.0)
        (job,) = policy._jobs(view, "", 8)
        assert job.table.cap_total is not overshoot
