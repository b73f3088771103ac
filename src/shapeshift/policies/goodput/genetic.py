"""``pollux search=genetic``: the Pollux artifact's genetic search for one round's allocation.

Pollux (OSDI 2021, §4.2) and both the Pollux and Sia artifacts' simulators search for
each round's allocation with NSGA-II (pymoo 0.4.2.1, ``pymoo/algorithms/nsga2.py``),
100 states x 100 generations, started from the previous round's result
(Sia artifact ``sia-simulator/pollux_unaware.py``, ``PolluxPolicyUnaware.optimize``).
A state is a jobs x nodes matrix of GPU counts. The rules, as read there:

* **objectives** (``Problem._evaluate``, ``get_cluster_utilities``): minimise minus the
  power mean of the jobs' scaled speedups (restart penalty applied), and minus the
  cluster utility (summed speedup over the GPUs of the nodes in use); the result is the
  state of the first non-dominated front with the best first objective;
* **start** (``optimize``, ``_adapt_prev_states``): the previous round's result, which
  is the first non-dominated front of its final population (pymoo's ``Result.X``, not the
  whole population), rows of jobs still present copied by job, new jobs empty; the
  first round, the current allocation alone. The artifact pairs the rows by position
  among the jobs present in both rounds, previous order against this round's; its jobs
  are sorted by attained service each round, so a job whose place in that order changed
  starts from another job's row (``Warm.by_position``, :mod:`.pollux`
  ``genetic_warm=position``; by job is ours, the intent of ``_adapt_prev_states``);
* **generation** (pymoo ``NSGA2``: ``TournamentSelection(binary_tournament)``,
  ``RankAndCrowdingSurvival``, ``eliminate_duplicates=True``; ``("n_gen", n)`` counts the
  initial population as the first generation, so ``n - 1`` rounds of mating): as many
  offspring as the population, parents by binary tournament over random permutations of
  the population (the dominating one, else the larger crowding distance, else at random),
  offspring identical to a state already held dropped, then the union cut back to the
  population by non-dominated rank and crowding distance; rank and crowding are those the
  last cut computed (on the union, before it was cut);
* **crowding** (``calc_crowding_distance``): within a front, duplicates of an earlier
  point 0; per objective the gap between neighbours over the objective's range, the
  extremes infinite, nothing where the front's values are all equal; summed and divided
  by the number of objectives;
* **crossover** (``Problem._crossover``, pymoo ``Crossover.do`` with ``prob=0.9``): with
  probability 0.9 two parents give two children by one cut point over the jobs (rows
  before it swapped between the parents), else the children are the parents;
* **mutation** (``Problem._mutation``): each job row goes back to the current allocation
  with probability 0.1; with probability 0.1 a row has each entry zeroed with
  probability 0.1; then each entry whose node has a free GPU is redrawn uniformly between
  its value and the node's size with probability one over the number of jobs, combined
  (as independent events) with one over the number of jobs holding GPUs on that node
  for a job holding some (both normalised over the jobs axis, ``sum(axis=1)``);
* **repair** (``Problem._repair``): one distributed job per node (the first in job order
  keeps it), at most a job's GPU limit and 16 nodes (nodes taken in a random order),
  then node capacity (jobs in order, each taking what is left);
* **value** (``Problem._get_job_speedups``, ``_evaluate``): a job's speedup is that of
  its state's own shape, ``count_nonzero`` nodes and the sum of GPUs (so a job spread
  over two nodes pays the inter-node synchronisation its throughput model puts on two
  nodes), and it pays the restart penalty when its row differs from the current
  allocation in any node; the state found is the allocation, placement included
  (``_state_to_allocations``).

``by_count`` (ours, :mod:`.pollux` ``genetic_value=packed``): a job is valued at its
GPU count packed on ``ceil(r / GPUs per node)`` nodes whatever nodes the state spreads it
over, penalised only when its count changes, and only the counts are kept. ``allowed``
(ours) keeps a job off nodes of GPU types it may not use; with no typed job it changes
nothing. All randomness comes from one seeded ``numpy.random.Generator`` (the artifact is
unseeded).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: ``Problem._repair``'s cap on the nodes one job spans.
MAX_NODES = 16
#: The power mean's floor on a speedup (``Problem._evaluate``).
EPS = 1e-3


@dataclass(frozen=True)
class Values:
    """What a state is worth, per job j: ``scaled[j, k, r]`` its speedup on r GPUs over k
    nodes scaled so that one node's share is 1, before the restart penalty; ``speed`` the
    same unscaled (the cluster-utility objective); ``factor[j]`` its restart penalty;
    ``limit[j]`` its most GPUs; ``rigid[j]``: all of its limit or nothing. ``by_count``:
    a change of count, not of placement, is a restart (the tables then hold the packed
    value on every k)."""

    scaled: np.ndarray
    speed: np.ndarray
    factor: np.ndarray
    limit: np.ndarray
    rigid: np.ndarray
    by_count: bool = False


@dataclass
class Warm:
    """The previous round's result (its final population's first front) and the job and
    node ids their axes index."""

    states: np.ndarray
    jobs: tuple[str, ...]
    nodes: tuple[int, ...]


def adapt(warm: Warm, jobs: tuple[str, ...], nodes: tuple[int, ...], by_position: bool = False) -> np.ndarray:
    """Previous states laid on this round's jobs and nodes (rows of vanished jobs and
    columns of vanished nodes dropped, new ones empty). ``by_position``: as the artifact's
    ``_adapt_prev_states``, the k-th job present in both rounds in the previous order gives
    its row to the k-th such job in this round's order, whichever job that is."""
    out = np.zeros((len(warm.states), len(jobs), len(nodes)), dtype=np.int64)
    jrow = {j: i for i, j in enumerate(warm.jobs)}
    ncol = {n: i for i, n in enumerate(warm.nodes)}
    dst_j = [i for i, j in enumerate(jobs) if j in jrow]
    if by_position:
        now = set(jobs)
        src_j = [i for i, j in enumerate(warm.jobs) if j in now]
    else:
        src_j = [jrow[jobs[i]] for i in dst_j]
    for i, n in enumerate(nodes):
        if n in ncol and dst_j:
            out[:, dst_j, i] = warm.states[:, src_j, ncol[n]]
    return out


def dominates(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row by row: ``a`` dominates ``b`` (no worse in every objective, better in one)."""
    return np.all(a <= b, axis=-1) & np.any(a < b, axis=-1)


def domination_matrix(f: np.ndarray) -> np.ndarray:
    """``dom[a, b]``: row ``a`` of ``f`` dominates row ``b``, built one objective at a time
    (two n x n comparisons each, not an n x n x m array reduced over its short axis)."""
    n, m = f.shape
    no_worse = np.ones((n, n), dtype=bool)
    better = np.zeros((n, n), dtype=bool)
    for k in range(m):
        column = f[:, k]
        no_worse &= column[:, None] <= column[None, :]
        better |= column[:, None] < column[None, :]
    return no_worse & better


def nondominated_rank(f: np.ndarray) -> np.ndarray:
    """Front number (0 = non-dominated) of each row of ``f`` (minimised objectives)."""
    n = len(f)
    dom = domination_matrix(f)
    count = dom.sum(axis=0)
    rank = np.full(n, -1)
    front = 0
    left = np.ones(n, dtype=bool)
    while left.any():
        now = left & (count == 0)
        rank[now] = front
        left &= ~now
        count = count - dom[now].sum(axis=0)
        count[~left] = -1
        front += 1
    return rank


def crowding(f: np.ndarray) -> np.ndarray:
    """Crowding distance within one front, as pymoo 0.4.2.1's ``calc_crowding_distance``:
    a point equal to an earlier one gets 0; per objective, the gap between a point's
    neighbours over the objective's range (the extremes infinite, nothing where the
    range is 0), summed over objectives and divided by their number."""
    n, m = f.shape
    if n <= 2:
        return np.full(n, np.inf)
    order = np.lexsort(f.T[::-1])  # stable: equal points keep their order
    g = f[order]
    first = np.ones(n, dtype=bool)
    first[1:] = np.any(g[1:] != g[:-1], axis=1)
    unique = np.sort(order[first])  # the first of equal points
    g = f[unique]
    dist = np.zeros(len(g))
    for k in range(m):
        order = np.argsort(g[:, k], kind="stable")
        v = g[order, k]
        span = v[-1] - v[0]
        if span == 0:
            continue
        below = np.concatenate([[np.inf], np.diff(v)]) / span
        above = np.concatenate([np.diff(v), [np.inf]]) / span
        dist[order] += below + above
    out = np.zeros(n)
    out[unique] = dist / m
    return out


def growth_probability(s: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Per entry of the states ``s`` (states x jobs x nodes), the probability that the
    mutation redraws it upwards (``Problem._mutation``, step 3): ``p1`` = 1 / the number of
    jobs where the node has a free GPU, ``p2`` = 1 / the number of jobs holding GPUs there
    for a job holding some (both normalised over the jobs axis, as the artifact's
    ``sum(axis=1)``), combined as independent events."""
    fits = (caps[None] - s.sum(axis=1) >= 1)[:, None, :]  # (states, 1, nodes): a free GPU
    p1 = np.where(fits, 1.0 / s.shape[1], 0.0)  # every job of such a node counts
    held = (s > 0) & fits
    p2 = held / np.maximum(held.sum(axis=1, keepdims=True), 1)
    return p1 + p2 - p1 * p2


class GeneticSearch:
    """NSGA-II over GPU-count matrices with the artifact's operators (module docstring)."""

    #: pymoo's ``Crossover`` default: the share of matings that cross over.
    CROSSOVER_PROB = 0.9
    #: pymoo's ``InfillCriterion.n_max_iterations``: matings tried to fill the offspring.
    MAX_MATINGS = 100

    def __init__(self, population: int, generations: int, rng: np.random.Generator):
        self.population = population
        self.generations = generations
        self.rng = rng

    def search(
        self,
        values: Values,
        base: np.ndarray,
        caps: np.ndarray,
        start: np.ndarray | None,
        p: float,
        allowed: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(best state, the final population's first front). ``base``: the current jobs x
        nodes; ``caps``: GPUs per node; ``start``: the states to start from; ``allowed``:
        jobs x nodes, where each job may run. ``generations`` counts the start as the first
        (pymoo's ``n_gen``)."""
        self._v, self._base, self._caps, self._p = values, base, caps, p
        self._limit, self._rigid = values.limit, values.rigid
        self._allowed = allowed
        pop = start if start is not None and len(start) else base[None].copy()
        pop = self._unique(self._repair(pop.copy()))
        f = self._evaluate(pop)
        keep, rank, crowd = self._survive(f, len(pop))
        pop, f = pop[keep], f[keep]
        for _ in range(self.generations - 1):
            off = self._offspring(pop, f, crowd)
            if len(off) == 0:  # pymoo ends the run when no new state can be made
                break
            pop = np.concatenate([pop, off])
            f = np.concatenate([f, self._evaluate(off)])
            keep, rank, crowd = self._survive(f, self.population)
            pop, f = pop[keep], f[keep]
        front = np.flatnonzero(rank == 0)
        best = front[np.argmin(f[front, 0])]
        return pop[best], pop[front]

    def _evaluate(self, pop: np.ndarray) -> np.ndarray:
        v = self._v
        r = pop.sum(axis=2)
        k = np.count_nonzero(pop, axis=2)
        j = np.arange(pop.shape[1])
        x = v.scaled[j, k, r]
        # A restart: the row differs from the current allocation (by_count: its sum does).
        moved = r != self._base.sum(axis=1)[None, :] if v.by_count else np.any(pop != self._base[None], axis=2)
        x = np.where(moved, x * v.factor[None, :], x)
        p = self._p
        if p == 0:
            mean = np.exp(np.log(np.maximum(x, EPS)).sum(axis=1) / pop.shape[1])
        else:
            mean = (((x + EPS) ** p).sum(axis=1) / pop.shape[1]) ** (1.0 / p)
        active = (pop.sum(axis=1) > 0) @ self._caps
        util = np.where(active > 0, v.speed[j, k, r].sum(axis=1) / np.maximum(active, 1), 0.0)
        return np.column_stack([-mean, -util])

    def _offspring(self, pop: np.ndarray, f: np.ndarray, crowd: np.ndarray) -> np.ndarray:
        """New states until there are as many as the population (pymoo's ``Mating`` inside
        ``InfillCriterion.do``): each batch of matings repaired, states already held or
        repeated dropped, the batch cut to what is still wanted."""
        seen = {s.tobytes() for s in pop}
        out: list[np.ndarray] = []
        for _ in range(self.MAX_MATINGS + 1):
            want = self.population - len(out)
            if want <= 0:
                break
            n_mate = (want + 1) // 2
            parents = self._tournament(f, crowd, 2 * n_mate).reshape(n_mate, 2)
            kids = self._repair(self._mutate(self._crossover(pop[parents[:, 0]], pop[parents[:, 1]])))
            fresh: dict[bytes, np.ndarray] = {}
            for kid in kids:
                key = kid.tobytes()
                if key not in seen and key not in fresh:
                    fresh[key] = kid
            for key in list(fresh)[:want]:
                seen.add(key)
                out.append(fresh[key])
        return np.array(out).reshape(-1, *pop.shape[1:])

    def _tournament(self, f: np.ndarray, crowd: np.ndarray, n: int) -> np.ndarray:
        """``n`` winners of binary tournaments between states drawn as consecutive pairs
        of random permutations of the population (pymoo's ``TournamentSelection``)."""
        perms = -(-2 * n // len(f))
        pairs = np.concatenate([self.rng.permutation(len(f)) for _ in range(perms)])[: 2 * n].reshape(n, 2)
        a, b = pairs[:, 0], pairs[:, 1]
        a_dom, b_dom = dominates(f[a], f[b]), dominates(f[b], f[a])
        coin = self.rng.random(n) < 0.5
        pick_a = a_dom | (~b_dom & ((crowd[a] > crowd[b]) | ((crowd[a] == crowd[b]) & coin)))
        return np.where(pick_a, a, b)

    def _crossover(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Children of the pairs ``(x[i], y[i])``: first every pair's first child (``x``
        with the rows before the cut from ``y``), then every second (``y`` with those of
        ``x``), as pymoo's ``crossover_mask``; a pair not crossing gives itself."""
        n_jobs = x.shape[1]
        cut = self.rng.integers(n_jobs, size=(len(x), 1)) if n_jobs else np.zeros((len(x), 1), int)
        cross = self.rng.random(len(x)) < self.CROSSOVER_PROB
        swap = ((np.arange(n_jobs) < cut) & cross[:, None])[:, :, None]
        return np.concatenate([np.where(swap, y, x), np.where(swap, x, y)])

    def _mutate(self, s: np.ndarray) -> np.ndarray:
        rng = self.rng
        reset = rng.random(s.shape[:2]) < 0.1
        s = np.where(reset[:, :, None], self._base[None], s)
        prob = np.where(rng.random(s.shape[:2]) < 0.1, 0.1, 0.0)
        s = np.where(rng.random(s.shape) < prob[:, :, None], 0, s)
        hit = rng.random(s.shape) < growth_probability(s, self._caps)
        u = rng.random(s.shape)  # drawn for every entry: the same stream whatever is redrawn
        si, ji, ni = np.nonzero(hit)
        grown = s[si, ji, ni]
        s[si, ji, ni] = grown + np.floor(u[si, ji, ni] * (self._caps[ni] + 1 - grown)).astype(np.int64)
        return s

    def _repair(self, s: np.ndarray) -> np.ndarray:
        if self._allowed is not None:
            s = np.where(self._allowed[None], s, 0)
        s = self._one_distributed(s)
        keys = self.rng.random(s.shape)  # drawn for every row: the same stream whatever is cut
        # Only rows over the job's GPU limit or MAX_NODES change (in the rest every cut is
        # a no-op), so only those are shuffled and cut, row by row as the whole array was.
        over = (s.sum(axis=2) > self._limit[None, :]) | (np.count_nonzero(s, axis=2) > MAX_NODES)
        if over.any():
            si, ji = np.nonzero(over)
            shuffle = np.argsort(keys[si, ji], axis=1)
            t = np.take_along_axis(s[si, ji], shuffle, axis=1)
            t = np.diff(np.minimum(np.cumsum(t, axis=1), self._limit[ji, None]), axis=1, prepend=0)
            nodes = np.diff(np.minimum(np.cumsum(t > 0, axis=1), MAX_NODES), axis=1, prepend=0)
            t[nodes == 0] = 0
            cut = np.empty_like(t)
            np.put_along_axis(cut, shuffle, t, axis=1)
            s[si, ji] = cut
        s = np.diff(np.minimum(np.cumsum(s, axis=1), self._caps[None, None, :]), axis=1, prepend=0)
        r = s.sum(axis=2)
        bad = self._rigid[None, :] & (r != 0) & (r != self._limit[None, :])
        s[bad] = 0
        return s

    def _one_distributed(self, s: np.ndarray) -> np.ndarray:
        spread = np.count_nonzero(s, axis=2) > 1
        on = (s > 0) & spread[:, :, None]
        later = np.cumsum(on, axis=1) > 1
        return np.where(later & on, 0, s)

    def _unique(self, pop: np.ndarray) -> np.ndarray:
        _, idx = np.unique(pop.reshape(len(pop), -1), axis=0, return_index=True)
        return pop[np.sort(idx)]

    def _survive(self, f: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indices kept, their rank, their crowding): whole fronts in rank order, the
        last one that does not fit cut by crowding distance, ties at random (pymoo's
        ``RankAndCrowdingSurvival``; crowding computed on the whole front)."""
        rank = nondominated_rank(f)
        crowd = np.zeros(len(f))
        keep: list[int] = []
        for k in range(rank.max() + 1):
            idx = np.flatnonzero(rank == k)
            d = crowding(f[idx])
            crowd[idx] = d
            if len(keep) + len(idx) <= size:
                keep.extend(idx.tolist())
                continue
            order = np.lexsort((self.rng.random(len(idx)), -d))
            keep.extend(idx[order[: size - len(keep)]].tolist())
            break
        kept = np.array(keep, dtype=np.int64)
        return kept, rank[kept], crowd[kept]
