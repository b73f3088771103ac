"""Where a job fits now, and the backfill scheduler's plan of the future.

Backfill, as ``src/plugins/sched/backfill/backfill.c`` (``_attempt_backfill``; Slurm
``master`` after 25.05, commit 284c3b95) and https://slurm.schedmd.com/sched_config.html
describe it:

* running jobs free their resources at ``start + time limit`` (never earlier, since the
  limit is all the scheduler knows; a job past its limit frees them a second from now);
* pending jobs are taken in priority order, at most ``bf_max_job_test`` of them; for
  each, the nodes reserved for higher-priority jobs over ``start .. start + limit`` are
  left out and the will-run test of ``select/cons_tres`` (``will_run``) says when and
  where it could start: running jobs are taken off in batches of epoch-aligned,
  doubling windows, and the start is the end of a batch's last job;
* a job that fits now starts now; one whose start comes after a reserved node frees is
  tried again from that instant (``TRY_LATER``); otherwise it reserves the will-run's
  nodes from ``start`` rounded down to ``bf_resolution`` to ``start + limit`` rounded
  up (``_set_slot_time``), whole nodes, as Slurm's node-space map does; one that fits
  nowhere in the window reserves nothing.

Node choice follows ``select/cons_tres`` (``fit``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
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


def node_span(gpus: int, largest: int) -> int:
    """How many nodes a job of ``gpus`` GPUs spans where the largest node has ``largest``:
    one if it fits on a node, else the fewest nodes over which its GPUs divide equally
    (the per-node GRES request a whole-job GPU count becomes)."""
    span = 1 if gpus <= largest or largest <= 0 else math.ceil(gpus / largest)
    if span > 1 and gpus % span:
        span = next((k for k in range(span, gpus + 1) if gpus % k == 0), gpus)
    return span


def never_placeable(gpus: int, node_gpus: list[int]) -> str:
    """Why a job of ``gpus`` GPUs can never start on nodes with ``node_gpus`` GPUs under
    ``fit``'s equal per-node share ('' if it can). slurmctld refuses such a job at
    submission (``ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE``, ``src/slurmctld/job_mgr.c``) rather
    than letting it hold the head of its partition's queue for ever."""
    largest = max(node_gpus, default=0)
    span = node_span(gpus, largest)
    share = gpus // span
    able = sum(1 for n in node_gpus if n >= share)
    if span > able:
        return (
            f"Requested node configuration is not available: {gpus} GPUs as {span} nodes of {share}"
            f" GPU(s) each, and the partition has {able} such node(s)"
        )
    return ""


def fit(
    need: Need, groups: list[list[int]], free: Free, largest: int, excluded: set[int] | np.ndarray | None = None
) -> list[tuple[int, Need]] | None:
    """Nodes for ``need``, or ``None``, chosen as ``select/cons_tres`` does
    (``src/plugins/topology/common/eval_nodes.c``, ``_eval_nodes_consec``): ``groups``
    are the partition's nodes by ``Weight`` (lightest first, each in index order), tried
    cumulatively; the nodes that could host the job form runs of consecutive indexes;
    the best run is the one with enough nodes and the fewest free CPUs (the first on
    ties), and in it a one-node job takes the node with the fewest free CPUs (the first
    on ties), a multi-node job the first nodes. A job with more GPUs than the largest
    node spans ``ceil(gpus / largest)`` nodes, an equal share on each (per-node GRES).
    ``excluded``: nodes left out, as a set or a boolean array over all nodes."""
    blocked = _blocked(excluded, free.gpus.size) if isinstance(excluded, set) else excluded
    span = node_span(need.gpus, largest)
    share = Need(need.gpus // span, need.cpus / span, need.mem / span)
    for allowed in _cumulative(groups):
        chosen = _best_run(share, span, allowed, free, blocked)
        if chosen is not None:
            return [(node, share) for node in chosen]
    return None


#: ``_cumulative``'s arrays per groups list, by its identity (the policy hands the same
#: lists on every call); the list itself is kept to tell a reused identity apart.
_CUMULATIVE: dict[int, tuple[list[list[int]], list[np.ndarray]]] = {}


def _cumulative(groups: list[list[int]]) -> list[np.ndarray]:
    """The node indexes ``fit`` tries, group after group: the first group, then the first
    two, ..., each sorted (built once per groups list, not once per fit)."""
    hit = _CUMULATIVE.get(id(groups))
    if hit is not None and hit[0] is groups:
        return hit[1]
    arrays: list[np.ndarray] = []
    allowed: list[int] = []
    for group in groups:
        allowed = sorted(allowed + group)
        arrays.append(np.asarray(allowed, dtype=np.int64))
    if len(_CUMULATIVE) >= 256:
        _CUMULATIVE.clear()
    _CUMULATIVE[id(groups)] = (groups, arrays)
    return arrays


def _blocked(excluded: set[int], size: int) -> np.ndarray | None:
    """``excluded`` as a boolean array over ``size`` nodes (``None`` when empty)."""
    if not excluded:
        return None
    mask = np.zeros(size, dtype=bool)
    mask[np.fromiter(excluded, dtype=np.int64, count=len(excluded))] = True
    return mask


def _best_run(share: Need, span: int, idx: np.ndarray, free: Free, blocked: np.ndarray | None) -> list[int] | None:
    # Consecutive indexes (a partition of one node range) are read as a slice, not gathered.
    at: slice | np.ndarray = (
        slice(int(idx[0]), int(idx[-1]) + 1) if idx.size and idx[-1] - idx[0] == idx.size - 1 else idx
    )
    cpus = free.cpus[at]
    ok = free.gpus[at] >= share.gpus
    ok &= cpus + _EPS >= share.cpus
    ok &= free.mem[at] + _EPS >= share.mem
    if blocked is not None:
        ok &= ~blocked[at]
    pos = ok.nonzero()[0]
    if pos.size < span:
        return None
    ids, usable_cpus = idx[pos], cpus[pos]
    if span == 1 and ids.size == 1:
        return [int(ids[0])]
    # Runs of consecutive node indexes (a node outside the partition or unusable breaks one).
    breaks = (np.diff(ids) != 1).nonzero()[0] + 1
    starts = np.concatenate((_ZERO, breaks))
    totals = np.add.reduceat(usable_cpus, starts)
    if span == 1:  # every run is long enough: the run of fewest free CPUs, its node of fewest
        best = int(totals.argmin())  # argmin: the first of equals
        end = int(breaks[best]) if best < breaks.size else ids.size
        first = int(starts[best])
        return [int(ids[first + int(usable_cpus[first:end].argmin())])]
    ends = np.concatenate((breaks, (ids.size,)))
    sufficient = (ends - starts >= span).nonzero()[0]
    if sufficient.size == 0:
        return ids[:span].tolist()
    best = sufficient[np.argmin(totals[sufficient])]  # argmin: the first of equals
    return ids[starts[best] : ends[best]][:span].tolist()


_ZERO = np.zeros(1, dtype=np.int64)


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


#: ``_will_run_test``'s first window (seconds): running jobs ending within it of the first
#: one (epoch-aligned) are taken off together; each later window is twice the last.
WILL_RUN_WINDOW = 30
#: ``_will_run_test`` stops testing after this many jobs of one batch and takes off more.
WILL_RUN_BATCH = 200


class Endings:
    """Planned ends in end order, with their nodes and resources as flat arrays, so that
    the will-run test finds the ends on usable nodes and gives back a batch's resources
    with array operations."""

    def __init__(self, endings: list[Ending]):
        self.items = sorted(endings, key=lambda e: e.end)
        self._built = False

    def _build(self) -> None:
        """The arrays, built when a will-run test first needs them (many cycles start
        every job they test without one)."""
        self._built = True
        items = self.items
        self.ends = [e.end for e in items]
        counts = np.fromiter((len(e.placement) for e in items), dtype=np.int64, count=len(items))
        self.offset = np.concatenate((_ZERO, np.cumsum(counts)))
        pairs = [p for e in items for p in e.placement]
        self.node = np.fromiter((n for n, _ in pairs), dtype=np.int64, count=len(pairs))
        self.gpus = np.fromiter((r.gpus for _, r in pairs), dtype=np.int64, count=len(pairs))
        self.cpus = np.fromiter((r.cpus for _, r in pairs), dtype=np.float64, count=len(pairs))
        self.mem = np.fromiter((r.mem for _, r in pairs), dtype=np.float64, count=len(pairs))
        self.owner = np.repeat(np.arange(len(items), dtype=np.int64), counts)

    def insert(self, ending: Ending) -> None:
        bisect.insort(self.items, ending, key=lambda e: e.end)
        self._built = False

    def remove(self, ending: Ending) -> None:
        if ending in self.items:  # a job without a time limit has no end here
            self.items.remove(ending)
            self._built = False

    def on(self, usable: np.ndarray) -> list[int]:
        """The positions of the ends with a node where ``usable`` (a boolean array) holds."""
        if not self.items:
            return []
        if not self._built:
            self._build()
        hit = self.owner[usable[self.node]]
        return np.flatnonzero(np.bincount(hit, minlength=len(self.items))).tolist()

    def give(self, free: Free, a: int, b: int) -> None:
        """Give ``free`` the resources of the ends at positions ``a .. b - 1``, in order."""
        sl = slice(int(self.offset[a]), int(self.offset[b]))
        node = self.node[sl]
        np.add.at(free.gpus, node, self.gpus[sl])
        np.add.at(free.cpus, node, self.cpus[sl])
        np.add.at(free.mem, node, self.mem[sl])


def will_run(
    now: float,
    cand: Candidate,
    free: Free,
    endings: list[Ending] | Endings,
    excluded: set[int],
    epoch: float,
    nodes: set[int] | np.ndarray | None = None,
) -> tuple[float, list[tuple[int, Need]]] | None:
    """When and where ``cand`` could start on its partition's nodes outside ``excluded``,
    as ``select/cons_tres``'s will-run test answers it (``cons_common/job_test.c``,
    ``_will_run_test``, 22.05; ``cons_tres/job_test.c`` in master): now if it fits the free
    resources; else the running jobs with a usable node are taken off in end order, in
    batches: the first batch ends ``WILL_RUN_WINDOW`` seconds after the first end rounded
    up to a multiple of that window on the wall clock (``epoch`` is the wall-clock time
    of time 0), each later window twice as long; after each batch the job is tested, and
    its start is the end of the batch's last job (a job past its limit: a second from
    now). ``None``: it fits nowhere. ``nodes``: the partition's nodes, a set or a boolean
    array over all nodes (computed when not given).

    A batch gives back every end up to its last, those on no usable node included: they
    free only nodes the fit leaves out, so the answer is the same."""
    size = free.gpus.size
    blocked = _blocked(excluded, size)
    placement = fit(cand.need, cand.groups, free, cand.largest, blocked)
    if placement is not None:
        return now, placement
    if not isinstance(nodes, np.ndarray):
        nodes = _mask(nodes if nodes is not None else {n for g in cand.groups for n in g}, size)
    usable = nodes if blocked is None else nodes & ~blocked
    index = endings if isinstance(endings, Endings) else Endings(endings)
    relevant = index.on(usable)
    if not relevant:
        return None
    ends = index.ends
    future = free.copy()
    given = 0
    first: float | None = None
    window = WILL_RUN_WINDOW
    k = 0
    while k < len(relevant):
        last = None
        removed = 0
        tested = True
        while k < len(relevant):
            end = ends[relevant[k]]
            if first is None:
                first = end + (WILL_RUN_WINDOW - (end + epoch) % WILL_RUN_WINDOW)
            last = relevant[k]
            k += 1
            if k == len(relevant) or ends[relevant[k]] > first + window:
                break
            removed += 1
            if removed > WILL_RUN_BATCH + 1:
                tested = False
                break
        if not tested or last is None:
            continue
        index.give(future, given, last + 1)
        given = last + 1
        window *= 2
        while k < len(relevant) and ends[relevant[k]] > first + window:
            window *= 2
        placement = fit(cand.need, cand.groups, future, cand.largest, blocked)
        if placement is not None:
            return (ends[last] if ends[last] > now else now + 1), placement
    return None


def _mask(nodes: set[int], size: int) -> np.ndarray:
    mask = np.zeros(size, dtype=bool)
    if nodes:
        mask[np.fromiter(nodes, dtype=np.int64, count=len(nodes))] = True
    return mask


def _later_start(start_res: float, reservations: list[Reservation], usable: set[int]) -> float | None:
    """The first instant after ``start_res`` at which a usable node that a reservation
    holds comes free (a slot boundary of the node-space map whose next slot has a node
    the current one lacks: ``later_start`` in ``_attempt_backfill``)."""
    for b in sorted({r.end for r in reservations if r.end > start_res}):
        freed = {n for r in reservations if r.end == b for n in r.nodes} & usable
        held = {n for r in reservations if r.begin <= b < r.end for n in r.nodes}
        if freed - held:
            return b
    return None


#: Backfill's preemption step (``backfill_preempt.py``): for a job that cannot start
#: now, given the nodes it may not use and the plan's ends, the nodes it starts on now
#: (``True``) or holds from now while its preemption completes (``False``), or ``None``.
PreemptHook = Callable[[Candidate, set[int], Endings], tuple[list[tuple[int, Need]], bool] | None]


def backfill(
    now: float,
    queue: list[Candidate],
    free: Free,
    running: list[Ending],
    *,
    window: float,
    resolution: float,
    max_job_test: int,
    epoch: float = 0.0,
    preempt: PreemptHook | None = None,
) -> BackfillResult:
    """One backfill cycle (``_attempt_backfill``; see the module docstring). ``free`` is
    updated with the jobs it starts. For each job, from ``start_res`` = now: the nodes
    reserved for higher jobs over ``start_res .. start_res + limit`` are left out, the
    will-run test (``will_run``) gives a start and nodes; a start after the next instant
    a reserved node comes free is tried again from that instant (``TRY_LATER``); a start
    now starts the job; a start within ``bf_window`` reserves the will-run's nodes, unless
    they overlap a reservation over that span (then tried again from that start).
    ``preempt``: a job that cannot start now may start by preempting (``PreemptHook``)."""
    res = max(resolution, 1.0)
    endings = Endings(running)
    reservations: list[Reservation] = []
    started: list[tuple[str, list[tuple[int, Need]]]] = []
    tested = 0
    partition_nodes: dict[int, set[int]] = {}  # per partition (its groups list), built once a cycle
    partition_mask: dict[int, np.ndarray] = {}
    for cand in queue:
        if tested >= max_job_test:
            break
        tested += 1
        usable = partition_nodes.get(id(cand.groups))
        if usable is None:
            usable = partition_nodes[id(cand.groups)] = {n for g in cand.groups for n in g}
            partition_mask[id(cand.groups)] = _mask(usable, free.gpus.size)
        usable_mask = partition_mask[id(cand.groups)]
        start_res = now
        while start_res <= now + window:
            end = start_res + cand.limit
            excluded = {n for r in reservations if r.end > start_res and r.begin <= end for n in r.nodes}
            later = _later_start(start_res, reservations, usable)
            answer = will_run(now, cand, free, endings, excluded, epoch, usable_mask)
            if preempt is not None and start_res <= now and (answer is None or answer[0] > now):
                taken = preempt(cand, excluded, endings)
                if taken is not None and not taken[1]:
                    finish = math.floor((now + cand.limit + res - 1) / res) * res
                    held = frozenset(n for n, _ in taken[0])
                    reservations.append(Reservation(cand.job_id, held, math.floor(now / res) * res, finish))
                    break
                answer = (now, taken[0]) if taken is not None else answer
            if answer is None:
                if later is None:
                    break
                start_res = later
                continue
            start, placement = answer
            start = max(start, start_res)
            if later is not None and start > later:
                start_res = later
                continue
            if start <= now:
                free.take(placement)
                started.append((cand.job_id, placement))
                endings.insert(Ending(now + cand.limit, tuple(placement)))
                break
            if start > now + window:
                break
            nodes = frozenset(n for n, _ in placement)
            begin = math.floor(start / res) * res
            finish = math.floor((start + cand.limit + res - 1) / res) * res
            if start > start_res and any(r.end > begin and r.begin < finish and r.nodes & nodes for r in reservations):
                start_res = start
                continue
            reservations.append(Reservation(cand.job_id, nodes, begin, finish))
            break
    return BackfillResult(started, reservations, tested)
