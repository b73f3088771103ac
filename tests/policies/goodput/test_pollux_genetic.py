"""``pollux search=genetic``: the artifact's NSGA-II search (policies/goodput/genetic.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from shapeshift.policies.goodput.genetic import GeneticSearch, crowding, nondominated_rank
from shapeshift.policies.goodput.pollux import PolluxParams, PolluxPolicy, power_utility, solve

P = -1.0


def _problem():
    # 2 nodes x 2 GPUs, three jobs, p = -1, no restart penalty, nothing running.
    # Scaled speedups x[r] for r = 0..4 GPUs:
    #   a: linear 0, 1, 2, 3, 4      b: saturates 0, 1, 1.5, 1.5, 1.5      c: flat 0, 1, 1, 1, 1
    # Objective: maximise sum -(x + 1e-3)^-1. Brute force over counts with sum <= 4:
    #   (2, 1, 1): -1/2.001 - 2/1.001 = -2.4978;  (1, 2, 1): -1/1.001 - 1/1.501 - 1/1.001 = -2.6642;
    #   (2, 2, 0) and any zero count: <= -1000.  So the optimum is a=2, b=1, c=1.
    speed = [np.array([0, 1, 2, 3, 4.0]), np.array([0, 1, 1.5, 1.5, 1.5]), np.array([0, 1, 1, 1, 1.0])]
    terms = [power_utility(s, P) for s in speed]
    return terms, speed


def _brute(terms, total):
    best, arg = -np.inf, None
    for counts in itertools.product(*(range(len(t)) for t in terms)):
        if sum(counts) <= total:
            v = sum(t[r] for t, r in zip(terms, counts, strict=True))
            if v > best:
                best, arg = v, counts
    return list(arg)


def _run(seed, population=20, generations=30):
    terms, speed = _problem()
    search = GeneticSearch(population, generations, np.random.default_rng(seed))
    base = np.zeros((3, 2), dtype=np.int64)
    caps = np.array([2, 2])
    return search.search(terms, speed, base, caps, np.zeros(3, dtype=bool), None, P)


def test_genetic_search_reaches_the_knapsack_and_brute_force_optimum():
    terms, _ = _problem()
    assert _brute(terms, 4) == [2, 1, 1]
    assert solve(terms, 4) == [2, 1, 1]
    for seed in (0, 1, 2):
        best, _ = _run(seed)
        assert best.sum(axis=1).tolist() == [2, 1, 1]


def test_same_seed_same_population_and_repair_keeps_capacity():
    best0, pop0 = _run(7)
    best1, pop1 = _run(7)
    assert np.array_equal(best0, best1) and np.array_equal(pop0, pop1)
    # Every state kept respects 2 GPUs per node and one distributed job per node.
    assert (pop0.sum(axis=1) <= 2).all()
    spread = np.count_nonzero(pop0, axis=2) > 1
    assert (((pop0 > 0) & spread[:, :, None]).sum(axis=1) <= 1).all()


def test_repair_clamps_to_node_capacity_in_job_order():
    # One node of 2 GPUs, jobs asking 2 and 2 on it: the first keeps 2, the second gets 0.
    terms = [power_utility(np.array([0, 1, 2.0]), P)] * 2
    search = GeneticSearch(4, 1, np.random.default_rng(0))
    base = np.zeros((2, 1), np.int64)
    search.search(terms, [np.array([0, 1, 2.0])] * 2, base, np.array([2]), np.zeros(2, bool), None, P)
    fixed = search._repair(np.array([[[2], [2]]]))
    assert fixed[0, :, 0].tolist() == [2, 0]


def test_pareto_ranks_and_crowding_by_hand():
    # (0,0) dominates (1,1); (0,2) and (2,0) are not dominated by (0,0)? (0,0) <= both, strictly less
    # in one objective: it dominates them too. So ranks: (0,0) -> 0; (1,1), (0,2), (2,0) -> 1.
    f = np.array([[0, 0], [1, 1], [0, 2], [2, 0.0]])
    assert nondominated_rank(f).tolist() == [0, 1, 1, 1]
    # Front of three: extremes infinite; the middle (1,1): (2-0)/2 + (2-0)/2 = 2.
    d = crowding(f[1:])
    assert d[0] == 2.0 and np.isinf(d[1]) and np.isinf(d[2])


@pytest.mark.parametrize("field,value", [("population", 1), ("generations", 0), ("search", "random"), ("seed", -1)])
def test_bad_search_parameters_are_refused(field, value):
    with pytest.raises(ValueError):
        PolluxParams(**{field: value})


def test_policy_with_genetic_search_gives_the_flat_job_one_gpu():
    # test_pollux.py's flat/linear case through the policy: 1 node x 4 GPUs, p = -1,
    # (flat 1, linear 3) costs 1 + 1/3, (2, 2) 1 + 1/2, any zero ~1000: the search must
    # reach flat 1, linear 3, and two runs with one seed choose the same.
    from tests.conftest import bundled
    from tests.policies.goodput.test_pollux import CIFAR, Flat, _engine, _job

    chosen = []
    for _ in range(2):
        params = PolluxParams(
            profiles=str(bundled("pollux-profiles")),
            explore=False,
            goodput_model="offline",
            batch_retune="round",
            search="genetic",
            population=20,
            generations=20,
            seed=3,
        )
        policy = PolluxPolicy(params)
        policy.knowledge = Flat()
        _, view = _engine(policy, [_job("flat", "cifar10", CIFAR), _job("linear", "cifar10", CIFAR)], 1, 4, 600.0)
        got = policy.decide(view).allocations
        chosen.append((got["flat"].gpus, got["linear"].gpus))
    assert chosen == [(1, 3), (1, 3)]
