"""``pollux search=genetic``: the Pollux artifact's genetic search for one round's allocation.

Pollux (OSDI 2021, §4.2) and both the Pollux and Sia artifacts' simulators search for
each round's allocation with NSGA-II (pymoo 0.4.2.1, ``pymoo/algorithms/nsga2.py``),
100 states x 100 generations, started from the previous round's final states
(Sia artifact ``sia-simulator/pollux_unaware.py``, ``PolluxPolicyUnaware.optimize``).
A state is a jobs x nodes matrix of GPU counts. The rules, as read there:

* **objectives** (``Problem._evaluate``, ``get_cluster_utilities``): minimise minus the
  power mean of the jobs' scaled speedups (restart penalty applied), and minus the
  cluster utility (summed speedup over the GPUs of the nodes in use); the result is the
  state of the first non-dominated front with the best first objective;
* **start** (``optimize``, ``_adapt_prev_states``): the previous round's final states,
  rows of jobs still present copied, new jobs empty; the first round, the current
  allocation alone;
* **generation** (pymoo ``NSGA2``: ``TournamentSelection(binary_tournament)``,
  ``RankAndCrowdingSurvival``, ``eliminate_duplicates=True``): as many offspring as the
  population, parents by binary tournament (the dominating one, else the larger crowding
  distance, else at random), offspring identical to a state already held dropped, then
  the union cut back to the population by non-dominated rank and crowding distance;
* **crossover** (``Problem._crossover``): two parents give two children by one cut point
  over the jobs (rows before it from one parent, the rest from the other);
* **mutation** (``Problem._mutation``): each job row goes back to the current allocation
  with probability 0.1; with probability 0.1 a row has each entry zeroed with
  probability 0.1; then each entry where the job would fit on the node's free GPUs is
  redrawn uniformly between its value and the node's size, with probability one over
  the number of such nodes (again one over the nodes the job already holds there, the
  two combined as independent events);
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
    """The previous round's final states and the job and node ids their axes index."""

    states: np.ndarray
    jobs: tuple[str, ...]
    nodes: tuple[int, ...]


def adapt(warm: Warm, jobs: tuple[str, ...], nodes: tuple[int, ...]) -> np.ndarray:
    """Previous states laid on this round's jobs and nodes (rows of vanished jobs and
    columns of vanished nodes dropped, new ones empty)."""
    out = np.zeros((len(warm.states), len(jobs), len(nodes)), dtype=np.int64)
    jrow = {j: i for i, j in enumerate(warm.jobs)}
    ncol = {n: i for i, n in enumerate(warm.nodes)}
    dst_j = [i for i, j in enumerate(jobs) if j in jrow]
    src_j = [jrow[jobs[i]] for i in dst_j]
    for i, n in enumerate(nodes):
        if n in ncol and dst_j:
            out[:, dst_j, i] = warm.states[:, src_j, ncol[n]]
    return out


def nondominated_rank(f: np.ndarray) -> np.ndarray:
    """Front number (0 = non-dominated) of each row of ``f`` (minimised objectives)."""
    n = len(f)
    le = np.all(f[:, None, :] <= f[None, :, :], axis=2)
    lt = np.any(f[:, None, :] < f[None, :, :], axis=2)
    dom = le & lt  # dom[a, b]: a dominates b
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
    """Crowding distance within one front (pymoo's: extremes infinite, gaps normalised)."""
    n, m = f.shape
    if n <= 2:
        return np.full(n, np.inf)
    dist = np.zeros(n)
    for k in range(m):
        order = np.argsort(f[:, k], kind="stable")
        v = f[order, k]
        span = v[-1] - v[0]
        gap = np.zeros(n)
        gap[0] = gap[-1] = np.inf
        if span > 0:
            gap[1:-1] = (v[2:] - v[:-2]) / span
        dist[order] += gap
    return dist


class GeneticSearch:
    """NSGA-II over GPU-count matrices with the artifact's operators (module docstring)."""

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
        """(best state, final population). ``base``: the current jobs x nodes; ``caps``: GPUs
        per node; ``start``: the states to start from; ``allowed``: jobs x nodes, where each
        job may run."""
        self._v, self._base, self._caps, self._p = values, base, caps, p
        self._limit, self._rigid = values.limit, values.rigid
        self._allowed = allowed
        pop = start if start is not None and len(start) else base[None].copy()
        pop = self._unique(self._repair(pop.copy()))
        f = self._evaluate(pop)
        for _ in range(self.generations):
            off = self._offspring(pop, f)
            if len(off) == 0:
                continue
            pop = np.concatenate([pop, off])
            f = np.concatenate([f, self._evaluate(off)])
            keep = self._survive(f)
            pop, f = pop[keep], f[keep]
        front = np.flatnonzero(nondominated_rank(f) == 0)
        best = front[np.argmin(f[front, 0])]
        return pop[best], pop

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

    def _offspring(self, pop: np.ndarray, f: np.ndarray) -> np.ndarray:
        rank = nondominated_rank(f)
        crowd = np.zeros(len(f))
        for k in np.unique(rank):
            idx = np.flatnonzero(rank == k)
            crowd[idx] = crowding(f[idx])
        seen = {s.tobytes() for s in pop}
        out: list[np.ndarray] = []
        for _ in range(100):  # pymoo's n_max_iterations for filling the offspring
            want = self.population - len(out)
            if want <= 0:
                break
            n_mate = (want + 1) // 2
            a = self._tournament(f, rank, crowd, n_mate)
            b = self._tournament(f, rank, crowd, n_mate)
            kids = self._repair(self._mutate(self._crossover(pop[a], pop[b])))
            for kid in kids:
                key = kid.tobytes()
                if key not in seen:
                    seen.add(key)
                    out.append(kid)
        return np.array(out[: self.population]).reshape(-1, *pop.shape[1:])

    def _tournament(self, f: np.ndarray, rank: np.ndarray, crowd: np.ndarray, n: int) -> np.ndarray:
        a = self.rng.integers(len(f), size=n)
        b = self.rng.integers(len(f), size=n)
        a_dom = np.all(f[a] <= f[b], axis=1) & np.any(f[a] < f[b], axis=1)
        b_dom = np.all(f[b] <= f[a], axis=1) & np.any(f[b] < f[a], axis=1)
        coin = self.rng.random(n) < 0.5
        pick_a = a_dom | (~b_dom & ((crowd[a] > crowd[b]) | ((crowd[a] == crowd[b]) & coin)))
        return np.where(pick_a, a, b)

    def _crossover(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        n_jobs = x.shape[1]
        cut = self.rng.integers(n_jobs, size=(len(x), 1)) if n_jobs else np.zeros((len(x), 1), int)
        first = (np.arange(n_jobs) < cut)[:, :, None]
        return np.concatenate([np.where(first, x, y), np.where(first, y, x)])

    def _mutate(self, s: np.ndarray) -> np.ndarray:
        rng = self.rng
        reset = rng.random(s.shape[:2]) < 0.1
        s = np.where(reset[:, :, None], self._base[None], s)
        prob = np.where(rng.random(s.shape[:2]) < 0.1, 0.1, 0.0)
        s = np.where(rng.random(s.shape) < prob[:, :, None], 0, s)
        free = self._caps[None] - s.sum(axis=1)  # (pop, nodes)
        fits = np.broadcast_to((free >= 1)[:, None, :], s.shape)
        p1 = fits / np.maximum(fits.sum(axis=2, keepdims=True), 1)
        held = (s > 0) & fits
        p2 = held / np.maximum(held.sum(axis=2, keepdims=True), 1)
        hit = rng.random(s.shape) < p1 + p2 - p1 * p2
        high = np.broadcast_to(self._caps[None, None, :] + 1, s.shape)
        draw = s + np.floor(rng.random(s.shape) * (high - s)).astype(np.int64)
        return np.where(hit, draw, s)

    def _repair(self, s: np.ndarray) -> np.ndarray:
        if self._allowed is not None:
            s = np.where(self._allowed[None], s, 0)
        s = self._one_distributed(s)
        shuffle = np.argsort(self.rng.random(s.shape), axis=2)
        t = np.take_along_axis(s, shuffle, axis=2)
        t = np.diff(np.minimum(np.cumsum(t, axis=2), self._limit[None, :, None]), axis=2, prepend=0)
        nodes = np.diff(np.minimum(np.cumsum(t > 0, axis=2), MAX_NODES), axis=2, prepend=0)
        t[nodes == 0] = 0
        s = np.take_along_axis(t, np.argsort(shuffle, axis=2), axis=2)
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

    def _survive(self, f: np.ndarray) -> np.ndarray:
        rank = nondominated_rank(f)
        keep: list[int] = []
        for k in range(rank.max() + 1):
            idx = np.flatnonzero(rank == k)
            if len(keep) + len(idx) <= self.population:
                keep.extend(idx.tolist())
                continue
            d = crowding(f[idx])
            order = np.lexsort((self.rng.random(len(idx)), -d))
            keep.extend(idx[order[: self.population - len(keep)]].tolist())
            break
        return np.array(keep)
