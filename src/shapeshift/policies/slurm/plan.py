"""Where a job fits now, and the backfill scheduler's plan of the future.

Backfill, as ``src/plugins/sched/backfill/backfill.c`` (``_attempt_backfill``; Slurm
``master`` after 25.05, commit 284c3b95) and https://slurm.schedmd.com/sched_config.html
describe it:

* running jobs free their resources at ``start + time limit`` (never earlier, since the
  limit is all the scheduler knows; a job past its limit frees them a second from now);
* pending jobs are taken in priority order, at most ``bf_max_job_test`` of them; each
  gets the earliest time, from now to the end of ``bf_window``, at which it fits on its
  partition's nodes *without* the nodes reserved for higher-priority jobs over its
  whole run (``start`` .. ``start + limit``);
* a job that fits now starts now; one that fits later reserves the nodes it would use
  from ``start`` rounded down to ``bf_resolution`` to ``start + limit`` rounded up
  (``_set_slot_time``), whole nodes, as Slurm's node-space map does; one that fits
  nowhere in the window reserves nothing.

Node choice follows ``select/cons_tres`` (``fit``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class Need:
    gpus: int
    cpus: float
    mem: float


@dataclass
class Free:
    """Free GPUs, CPUs and memory per node index (numpy arrays, so a fit scans all nodes at once)."""

    gpus: Any
    cpus: Any
    mem: Any

    def __post_init__(self) -> None:
        self.gpus = np.asarray(self.gpus, dtype=np.int64)
        self.cpus = np.asarray(self.cpus, dtype=np.float64)
        self.mem = np.asarray(self.mem, dtype=np.float64)

    def copy(self) -> Free:
        return Free(self.gpus.copy(), self.cpus.copy(), self.mem.copy())

    def take(self, placement: list[tuple[int, Need]]) -> None:
        for node, need in placement:
            self.gpus[node] -= need.gpus
            self.cpus[node] -= need.cpus
            self.mem[node] -= need.mem

    def give(self, placement: list[tuple[int, Need]]) -> None:
        for node, need in placement:
            self.gpus[node] += need.gpus
            self.cpus[node] += need.cpus
            self.mem[node] += need.mem


_EPS = 1e-9


def fit(
    need: Need, groups: list[list[int]], free: Free, largest: int, excluded: set[int] | None = None
) -> list[tuple[int, Need]] | None:
    """Nodes for ``need``, or ``None``, chosen as ``select/cons_tres`` does
    (``src/plugins/topology/common/eval_nodes.c``, ``_eval_nodes_consec``): ``groups``
    are the partition's nodes by ``Weight`` (lightest first, each in index order), tried
    cumulatively; the nodes that could host the job form runs of consecutive indexes;
    the best run is the one with enough nodes and the fewest free CPUs (the first on
    ties), and in it a one-node job takes the node with the fewest free CPUs (the first
    on ties), a multi-node job the first nodes. A job with more GPUs than the largest
    node spans ``ceil(gpus / largest)`` nodes, an equal share on each (per-node GRES)."""
    span = 1 if need.gpus <= largest or largest <= 0 else math.ceil(need.gpus / largest)
    if span > 1 and need.gpus % span:
        span = next((k for k in range(span, need.gpus + 1) if need.gpus % k == 0), need.gpus)
    share = Need(need.gpus // span, need.cpus / span, need.mem / span)
    allowed: list[int] = []
    for group in groups:
        allowed = sorted(allowed + group)
        chosen = _best_run(share, span, allowed, free, excluded)
        if chosen is not None:
            return [(node, share) for node in chosen]
    return None


def _best_run(share: Need, span: int, nodes: list[int], free: Free, excluded: set[int] | None) -> list[int] | None:
    idx = np.asarray(nodes, dtype=np.int64)
    cpus = free.cpus[idx]
    ok = (free.gpus[idx] >= share.gpus) & (cpus + _EPS >= share.cpus) & (free.mem[idx] + _EPS >= share.mem)
    if excluded:
        ok &= ~np.isin(idx, np.fromiter(excluded, dtype=np.int64, count=len(excluded)))
    pos = np.flatnonzero(ok)
    if pos.size < span:
        return None
    ids, usable_cpus = idx[pos], cpus[pos]
    # Runs of consecutive node indexes (a node outside the partition or unusable breaks one).
    starts = np.r_[0, np.flatnonzero(np.diff(ids) != 1) + 1]
    ends = np.r_[starts[1:], ids.size]
    sufficient = np.flatnonzero(ends - starts >= span)
    if sufficient.size == 0:
        return ids[:span].tolist()
    totals = np.add.reduceat(usable_cpus, starts)
    best = sufficient[np.argmin(totals[sufficient])]  # argmin: the first of equals
    run, run_cpus = ids[starts[best] : ends[best]], usable_cpus[starts[best] : ends[best]]
    if span == 1:
        return [int(run[np.argmin(run_cpus)])]
    return run[:span].tolist()


@dataclass(frozen=True, slots=True)
class Ending:
    """A running job's resources and when the planner expects them back."""

    end: float
    placement: tuple[tuple[int, Need], ...]


@dataclass(frozen=True, slots=True)
class Reservation:
    job_id: str
    nodes: frozenset[int]
    begin: float
    end: float


@dataclass(frozen=True, slots=True)
class Candidate:
    job_id: str
    need: Need
    limit: float  # seconds, whole minutes
    groups: list[list[int]]  # the partition's nodes by Weight, each group in index order
    largest: int


@dataclass
class BackfillResult:
    started: list[tuple[str, list[tuple[int, Need]]]]
    reservations: list[Reservation]
    tested: int


def backfill(
    now: float,
    queue: list[Candidate],
    free: Free,
    running: list[Ending],
    *,
    window: float,
    resolution: float,
    max_job_test: int,
) -> BackfillResult:
    """One backfill cycle (see the module docstring). ``free`` is updated with the jobs
    it starts."""
    res = max(resolution, 1.0)
    window_end = math.floor((now + window) / res) * res
    endings = sorted(running, key=lambda e: e.end)
    reservations: list[Reservation] = []
    started: list[tuple[str, list[tuple[int, Need]]]] = []
    tested = 0
    for cand in queue:
        if tested >= max_job_test:
            break
        tested += 1
        times = sorted({now, *(max(e.end, now + 1) for e in endings), *(r.end for r in reservations if r.end > now)})
        future = free.copy()
        k = 0
        placement = None
        start = now
        for t in times:
            if t > window_end:
                break
            while k < len(endings) and max(endings[k].end, now + 1) <= t:
                future.give(list(endings[k].placement))
                k += 1
            excluded = {n for r in reservations if r.end > t and r.begin <= t + cand.limit for n in r.nodes}
            placement = fit(cand.need, cand.groups, future, cand.largest, excluded)
            if placement is not None:
                start = t
                break
        if placement is None:
            continue
        if start <= now:
            free.take(placement)
            started.append((cand.job_id, placement))
            endings.append(Ending(now + cand.limit, tuple(placement)))
            endings.sort(key=lambda e: e.end)
            continue
        begin = math.floor(start / res) * res
        end = math.floor((start + cand.limit + res - 1) / res) * res
        reservations.append(Reservation(cand.job_id, frozenset(n for n, _ in placement), begin, end))
    return BackfillResult(started, reservations, tested)
