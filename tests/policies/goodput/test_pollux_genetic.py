"""``pollux search=genetic``: the artifact's NSGA-II search (policies/goodput/genetic.py)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

from shapeshift.perf.pollux.goodput import BatchLimits, PerfParams
from shapeshift.perf.pollux.knowledge import JobGoodput, shape_pairs
from shapeshift.policies.goodput.genetic import (
    GeneticSearch,
    Values,
    Warm,
    adapt,
    crowding,
    dominates,
    domination_matrix,
    growth_probability,
    nondominated_rank,
)
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


def _packed(speed, nodes=3):
    """Values for speedups by count alone (the same on every node count up to ``nodes``),
    no restart penalty."""
    table = np.zeros((len(speed), nodes + 1, max(len(s) for s in speed)))
    for i, s in enumerate(speed):
        table[i, :, : len(s)] = s
    n = len(speed)
    return Values(table, table, np.ones(n), np.array([len(s) - 1 for s in speed]), np.zeros(n, bool))


def _run(seed, population=20, generations=30):
    _, speed = _problem()
    search = GeneticSearch(population, generations, np.random.default_rng(seed))
    base = np.zeros((3, 2), dtype=np.int64)
    caps = np.array([2, 2])
    return search.search(_packed(speed), base, caps, None, P)


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
    search = GeneticSearch(4, 1, np.random.default_rng(0))
    base = np.zeros((2, 1), np.int64)
    search.search(_packed([np.array([0, 1, 2.0])] * 2, 1), base, np.array([2]), None, P)
    fixed = search._repair(np.array([[[2], [2]]]))
    assert fixed[0, :, 0].tolist() == [2, 0]


def test_repair_cuts_a_job_to_its_limit_and_16_nodes_and_leaves_the_rest():
    # Problem._repair: a job over its GPU limit keeps that many, taken over its nodes in a
    # random order; a job over 16 nodes keeps 16 of them; a job within both is untouched.
    # 20 one-GPU nodes. State 0: job 0 (limit 3) holds 1 GPU on each of nodes 0-4, so it
    # keeps 3 of those; job 1 (limit 20) on nodes 5-14 is within both and unchanged.
    # State 1: job 1 alone on all 20 nodes, within its limit but over 16 nodes: it keeps 16.
    search = GeneticSearch(4, 1, np.random.default_rng(0))
    caps = np.ones(20, np.int64)
    search._caps, search._allowed = caps, None
    search._limit, search._rigid = np.array([3, 20]), np.array([False, False])
    s = np.zeros((2, 2, 20), np.int64)
    s[0, 0, :5] = 1  # state 0: job 0 over its limit, job 1 within both
    s[0, 1, 5:15] = 1
    s[1, 1, :] = 1  # state 1: job 1 on 20 nodes
    fixed = search._repair(s.copy())
    assert fixed[0, 0].sum() == 3 and set(np.flatnonzero(fixed[0, 0])) <= set(range(5))
    assert np.array_equal(fixed[0, 1], s[0, 1])
    assert fixed[1, 1].sum() == 16 and fixed[1, 0].sum() == 0


def test_domination_matrix_is_pairwise_domination():
    # The matrix is the definition applied to every ordered pair (no worse in every
    # objective, better in one), ties included: equal rows dominate neither way, a row never
    # itself; three objectives as well as two.
    rng = np.random.default_rng(3)
    for m in (2, 3):
        f = rng.integers(0, 3, size=(30, m)).astype(float)
        expected = np.array([[bool(dominates(f[a], f[b])) for b in range(30)] for a in range(30)])
        assert (domination_matrix(f) == expected).all()
    assert not domination_matrix(np.array([[1.0, 1.0], [1.0, 1.0]])).any()


def test_pareto_ranks_and_crowding_by_hand():
    # (0,0) dominates (1,1); (0,2) and (2,0) are not dominated by (0,0)? (0,0) <= both, strictly less
    # in one objective: it dominates them too. So ranks: (0,0) -> 0; (1,1), (0,2), (2,0) -> 1.
    f = np.array([[0, 0], [1, 1], [0, 2], [2, 0.0]])
    assert nondominated_rank(f).tolist() == [0, 1, 1, 1]
    # Front of three: extremes infinite; the middle (1,1): per objective the gap between
    # its neighbours over the range, (2-0)/2 = 1 twice, divided by the 2 objectives: 1.
    d = crowding(f[1:])
    assert d[0] == 1.0 and np.isinf(d[1]) and np.isinf(d[2])


def test_crowding_gives_duplicates_nothing_and_skips_a_flat_objective():
    # pymoo 0.4.2.1's calc_crowding_distance. (1,1) twice: the second is a duplicate (0);
    # the rest is the front above: (1,1) 1, the extremes infinite.
    d = crowding(np.array([[0, 2], [1, 1], [1, 1], [2, 0.0]]))
    assert d[1] == 1.0 and d[2] == 0.0 and np.isinf(d[0]) and np.isinf(d[3])
    # The second objective is 1 everywhere (range 0): it adds nothing, not even at the
    # extremes. First objective 0, 1, 2: the middle (2-0)/2 = 1, over 2 objectives 0.5.
    d = crowding(np.array([[0, 1], [1, 1], [2, 1.0]]))
    assert d[1] == 0.5 and np.isinf(d[0]) and np.isinf(d[2])


def test_mutation_grows_an_entry_with_probability_normalised_over_the_jobs():
    # Two nodes of 2 GPUs, three jobs; job 0 holds both GPUs of node 0, nothing else runs.
    # Node 0 is full: none of its entries grows. Node 1 has free GPUs: each of the 3 jobs
    # grows there with p1 = 1/3 (the artifact divides by the jobs, mask1.sum(axis=1), not by
    # the nodes with room, which would give 1/1). No job holds GPUs on node 1: p2 = 0.
    s = np.array([[[2, 0], [0, 0], [0, 0]]])
    p = growth_probability(s, np.array([2, 2]))
    assert p[0, :, 0].tolist() == [0, 0, 0]
    assert p[0, :, 1] == pytest.approx([1 / 3] * 3)
    # Job 0 with 1 GPU on node 1 instead: node 0 empty and node 1 half free, both have
    # room, p1 = 1/3 everywhere; on node 1 job 0 is the only holder, p2 = 1/1, so it grows
    # there for sure: 1/3 + 1 - 1/3 = 1.
    p = growth_probability(np.array([[[0, 1], [0, 0], [0, 0]]]), np.array([2, 2]))
    assert p[0, 0, 1] == pytest.approx(1.0)
    assert p[0, 1, 1] == p[0, 0, 0] == pytest.approx(1 / 3)


def test_the_warm_start_pairs_rows_by_job_or_as_the_artifact_by_position():
    # Previous round: jobs (a, b, c) on one node, one state with rows 1, 2, 3. This round
    # the attained-service order is (b, a, d). By job: b 2, a 1, d (new) 0. By position
    # (the artifact's _adapt_prev_states): the jobs of both rounds are a, b in the previous
    # order and b, a in this one, so b takes the first row (a's 1) and a the second (2).
    warm = Warm(np.array([[[1], [2], [3]]]), ("a", "b", "c"), (0,))
    assert adapt(warm, ("b", "a", "d"), (0,))[0, :, 0].tolist() == [2, 1, 0]
    assert adapt(warm, ("b", "a", "d"), (0,), by_position=True)[0, :, 0].tolist() == [1, 2, 0]


def test_the_result_is_the_final_front_and_one_generation_is_the_start_alone():
    # One job on 2 nodes x 2 GPUs valued as in _one_job_values (no restart): start from
    # [2, 0] (objectives -0.6677, -0.6667), [1, 1] (-0.1677, -0.0833) and [1, 0] (x = 0.5:
    # -0.501, utility 1 / 2 GPUs = -0.5). [2, 0] dominates both others, so the front is
    # [2, 0] alone. generations=1 is pymoo's n_gen 1: the start, no mating.
    search = GeneticSearch(4, 1, np.random.default_rng(0))
    start = np.array([[[2, 0]], [[1, 1]], [[1, 0]]])
    best, front = search.search(_one_job_values(False), np.zeros((1, 2), np.int64), np.array([2, 2]), start, P)
    assert best.tolist() == [[2, 0]]
    assert front.tolist() == [[[2, 0]]]


def test_the_default_search_is_the_sources():
    # Pollux §4.2 and both artifacts (pollux.py; sia-simulator/pollux_unaware.py) search each
    # round with NSGA-II, 100 states x 100 generations (pymoo's n_gen).
    params = PolluxParams()
    assert (params.search, params.population, params.generations) == ("genetic", 100, 100)
    assert params.genetic_value == "placement"


@pytest.mark.parametrize("field,value", [("population", 1), ("generations", 0), ("search", "random"), ("seed", -1)])
def test_bad_search_parameters_are_refused(field, value):
    with pytest.raises(ValueError):
        PolluxParams(**{field: value})


def _genetic_params(seed: int) -> PolluxParams:
    """The policy on the bundled profiles with a small seeded genetic search, one model
    per application and the batch once per round (what the policy tests hold fixed)."""
    from tests.conftest import bundled

    return PolluxParams(
        profiles=str(bundled("pollux-profiles")),
        explore=False,
        goodput_model="offline",
        batch_retune="round",
        search="genetic",
        population=20,
        generations=20,
        seed=seed,
    )


def test_policy_with_genetic_search_gives_the_flat_job_one_gpu():
    # test_pollux.py's flat/linear case through the policy: 1 node x 4 GPUs, p = -1,
    # (flat 1, linear 3) costs 1 + 1/3, (2, 2) 1 + 1/2, any zero ~1000: the search must
    # reach flat 1, linear 3, and two runs with one seed choose the same.
    from tests.policies.goodput.test_pollux import CIFAR, Flat, _engine, _job

    chosen = []
    for _ in range(2):
        params = _genetic_params(3)
        policy = PolluxPolicy(params)
        policy.knowledge = Flat()
        _, view = _engine(policy, [_job("flat", "cifar10", CIFAR), _job("linear", "cifar10", CIFAR)], 1, 4, 600.0)
        got = policy.decide(view).allocations
        chosen.append((got["flat"].gpus, got["linear"].gpus))
    assert chosen == [(1, 3), (1, 3)]


# A throughput model whose inter-node synchronisation dominates (PerfParams order: alpha_c,
# beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma). With gamma = 1 a step takes
# T_grad + T_sync, T_grad = 0.1 x local batch, T_sync = 0.1 on one node (2 GPUs), 1.0 across
# nodes, ~0 on one GPU. A fixed global batch of 4 (no accumulation, gain 1):
#   1 GPU:              4 / 0.4              = 10 examples/s
#   2 GPUs, one node:   4 / (0.2 + 0.1)      = 13.33
#   2 GPUs, two nodes:  4 / (0.2 + 1.0)      = 3.33
SYNC = PerfParams(0.0, 0.1, 1.0, 0.0, 0.1, 0.0, 1.0)


def test_goodput_by_shape_follows_the_artifacts_speedup_of_nodes_and_replicas():
    table = JobGoodput(SYNC, (1.0, 0.0), BatchLimits(4, 4, 1, 4), False)
    out = table.by_shape(2, 3, 2)  # nodes of 2 GPUs, up to 3 GPUs, up to 2 nodes
    assert out[1, 1] == pytest.approx(10.0)
    assert out[1, 2] == pytest.approx(4 / 0.3)
    assert out[2, 2] == pytest.approx(4 / 1.2)
    # 3 GPUs need two nodes of 2: the per-GPU batch ceil(4/3) = 2, 6 examples a step of
    # 0.2 + 1.0 s, counted at the fixed batch's scale 6/4: 5 / 1.5 = 3.33.
    assert out[2, 3] == pytest.approx(6 / 1.2 / (6 / 4))
    # No shape: 2 nodes for 1 GPU, 3 GPUs on one node of 2, or nothing at all.
    assert out[2, 1] == 0 and out[1, 3] == 0 and out[0].sum() == 0 and out[:, 0].sum() == 0


def _one_job_values(by_count, factor=1.0):
    # One job on 2 nodes x 2 GPUs, speedups over 1 GPU (10 examples/s) from SYNC above:
    # speed[1, 1] = 1, speed[1, 2] = 1.333, speed[2, 2] = 0.333; scaled by nodes / GPUs = 1/2.
    speed = np.zeros((1, 3, 3))
    speed[0, 1, 1], speed[0, 1, 2], speed[0, 2, 2] = 1.0, 4 / 3, 1 / 3
    if by_count:  # the packed value on every node count
        speed[0, 2, 2] = speed[0, 1, 2]
    return Values(speed / 2, speed, np.array([factor]), np.array([2]), np.zeros(1, bool), by_count)


def test_a_spread_placement_is_valued_below_the_packed_one():
    # One job, p = -1: the power mean is x + 1e-3 (x its scaled speedup); the second
    # objective is its speedup over the GPUs of the nodes in use.
    #   packed [2, 0]: x = 1.333 / 2 = 0.6667 -> -0.6677; utility 1.333 / 2 GPUs = 0.6667
    #   spread [1, 1]: x = 0.333 / 2 = 0.1667 -> -0.1677; utility 0.333 / 4 GPUs = 0.0833
    search = GeneticSearch(4, 1, np.random.default_rng(0))
    base = np.zeros((1, 2), np.int64)
    search.search(_one_job_values(False), base, np.array([2, 2]), None, P)
    f = search._evaluate(np.array([[[2, 0]], [[1, 1]]]))
    assert f[0] == pytest.approx([-(2 / 3 + 1e-3), -2 / 3])
    assert f[1] == pytest.approx([-(1 / 6 + 1e-3), -1 / 12])
    # Valued by count (ours), the two are worth the same but for the nodes in use.
    search.search(_one_job_values(True), base, np.array([2, 2]), None, P)
    g = search._evaluate(np.array([[[2, 0]], [[1, 1]]]))
    assert g[0, 0] == g[1, 0] == pytest.approx(-(2 / 3 + 1e-3))
    assert g[1, 1] == pytest.approx(-(4 / 3) / 4)


def test_a_move_with_the_same_count_is_a_restart_by_placement_not_by_count():
    # Running on [1, 1]; restart factor 0.5. Moving to [2, 0] keeps the count (2):
    # by placement it is a restart, x = 0.6667 x 0.5 = 0.3333; by count it is not, 0.6667.
    base = np.array([[1, 1]])
    search = GeneticSearch(4, 1, np.random.default_rng(0))
    search.search(_one_job_values(False, 0.5), base, np.array([2, 2]), None, P)
    assert search._evaluate(np.array([[[2, 0]]]))[0, 0] == pytest.approx(-(1 / 3 + 1e-3))
    search.search(_one_job_values(True, 0.5), base, np.array([2, 2]), None, P)
    assert search._evaluate(np.array([[[2, 0]]]))[0, 0] == pytest.approx(-(2 / 3 + 1e-3))


class _Sync:
    """Knowledge stand-in: goodput r on one node, r / 4 across nodes (heavy synchronisation)."""

    root = None

    def job(self, spec, batch_now, progress, merged=None):
        return _SyncTable()


@dataclass(frozen=True)
class _SyncTable:
    params: str = "fitted"
    cap_total: bool = True

    def table(self, gpn, cols):
        r = np.arange(1, cols + 1, dtype=float)
        return np.concatenate([np.where(r <= gpn, r, r / 4), r]), np.ones(2 * cols, dtype=int)

    def by_shape(self, gpn, max_r, max_nodes):
        out = np.zeros((max_nodes + 1, max_r + 1))
        k, r = shape_pairs(gpn, max_r, max_nodes)
        out[k, r] = np.where(k == 1, r, r / 4)
        return out

    def best(self, nodes, replicas):
        r = np.atleast_1d(np.asarray(replicas, float))
        return r, np.ones(r.shape, dtype=int)


def test_policy_keeps_the_placement_the_search_found(monkeypatch):
    # One job alone on 2 nodes x 2 GPUs, p = -1: the objective is its speedup (+1e-3), and
    # its speedups by shape are 1 GPU: 1, 2 on one node: 2, 2 / 3 / 4 over two nodes:
    # 0.5 / 0.75 / 1. The optimum is 2 GPUs on one node, and the allocation decided is
    # the search's best state, node for node.
    from tests.policies.goodput.test_pollux import CIFAR, _engine, _job

    found = []

    class Recording(GeneticSearch):
        def search(self, *args, **kwargs):
            best, pop = super().search(*args, **kwargs)
            found.append(best.copy())
            return best, pop

    monkeypatch.setattr("shapeshift.policies.goodput.pollux.GeneticSearch", Recording)
    for seed in (0, 1, 2):
        params = _genetic_params(seed)
        policy = PolluxPolicy(params)
        policy.knowledge = _Sync()
        _, view = _engine(policy, [_job("j", "cifar10", CIFAR)], 2, 2, 600.0)
        got = policy.decide(view).allocations["j"]
        place = {n: r.gpus for n, r in got.placement}
        assert place == {n: int(g) for n, g in enumerate(found[-1][0]) if g}
        assert sorted(place.values()) == [2]
