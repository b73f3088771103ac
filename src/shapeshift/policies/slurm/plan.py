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

Node choice follows ``select/cons_tres`` (``fit.py``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from shapeshift.policies.slurm import compiled as compiled_cycle
from shapeshift.policies.slurm.fit import (
    _ZERO,
    Free,
    Need,
    _blocked,
    fit,
    fit_thresholds,
    never_placeable,
    node_span,
)

__all__ = ["Free", "Need", "fit", "never_placeable", "node_span"]


@dataclass(frozen=True, slots=True)
class Ending:
    """A running job's resources and when the planner expects them back."""

    end: float
    placement: tuple[tuple[int, Need], ...]


@dataclass(frozen=True, slots=True)
class EndArrays:
    """Running jobs' planned ends as arrays, for the compiled cycle, in the order of
    ``backfill``'s ``running`` list: each one's end and the first entry and number of
    entries of its (node, share) pairs in the entry arrays (node, GPUs, CPUs, memory;
    entries of no listed job may lie between)."""

    end: np.ndarray
    first: np.ndarray
    count: np.ndarray
    node: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    mem: np.ndarray

    @classmethod
    def of(cls, running: list[Ending]) -> EndArrays:
        counts = np.fromiter((len(e.placement) for e in running), dtype=np.int64, count=len(running))
        pairs = [p for e in running for p in e.placement]
        shares = [r for _, r in pairs]
        return cls(
            np.fromiter((e.end for e in running), dtype=np.float64, count=len(running)),
            np.cumsum(counts) - counts,
            counts,
            np.array([n for n, _ in pairs], dtype=np.int64),
            np.array([r.gpus for r in shares], dtype=np.int64),
            np.array([r.cpus for r in shares], dtype=np.float64),
            np.array([r.mem for r in shares], dtype=np.float64),
        )


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


class BackfillResult:
    """A cycle's starts, reservations and how many jobs it tested. The compiled cycle
    hands its reservations as (job, nodes, begin, end) rows, made (and made into
    ``Reservation``s) only when read: a replay reads none of them."""

    def __init__(
        self,
        started: list[tuple[str, list[tuple[int, Need]]]],
        reservations: list[Reservation] | None,
        tested: int,
        rows: Callable[[], list[tuple[str, list[int], float, float]]] | None = None,
    ):
        self.started = started
        self.tested = tested
        self._reservations = reservations
        self._make_rows = rows
        self._made: list[tuple[str, list[int], float, float]] | None = None

    @property
    def _rows(self) -> list[tuple[str, list[int], float, float]]:
        if self._made is None:
            self._made = self._make_rows() if self._make_rows is not None else []
        return self._made

    @property
    def reservations(self) -> list[Reservation]:
        if self._reservations is None:
            self._reservations = [Reservation(j, frozenset(n), b0, b1) for j, n, b0, b1 in self._rows]
        return self._reservations

    def planned(self) -> dict[str, float]:
        """Each reserved job's planned start."""
        if self._reservations is not None:
            return {r.job_id: r.begin for r in self._reservations}
        return {row[0]: row[2] for row in self._rows}


#: ``_will_run_test``'s first window (seconds): running jobs ending within it of the first
#: one (epoch-aligned) are taken off together; each later window is twice the last.
WILL_RUN_WINDOW = 30


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
        self.ends = np.fromiter((e.end for e in items), dtype=np.float64, count=len(items))
        counts = np.fromiter((len(e.placement) for e in items), dtype=np.int64, count=len(items))
        self.offset = np.concatenate((_ZERO, np.cumsum(counts)))
        pairs = [p for e in items for p in e.placement]
        shares = [r for _, r in pairs]
        self.node = np.array([n for n, _ in pairs], dtype=np.int64)
        self.gpus = np.array([r.gpus for r in shares], dtype=np.int64)
        self.cpus = np.array([r.cpus for r in shares], dtype=np.float64)
        self.mem = np.array([r.mem for r in shares], dtype=np.float64)
        self.owner = np.repeat(np.arange(len(items), dtype=np.int64), counts)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The ends in end order and their (node, GPUs, CPUs, memory) entries, flat, with
        each end's offset into them (one more offset than ends)."""
        if not self._built:
            self._build()
        return self.ends, self.offset, self.node, self.gpus, self.cpus, self.mem

    def insert(self, ending: Ending) -> None:
        bisect.insort(self.items, ending, key=lambda e: e.end)
        self._built = False

    def remove(self, ending: Ending) -> None:
        if ending in self.items:  # a job without a time limit has no end here
            self.items.remove(ending)
            self._built = False

    def on(self, usable: np.ndarray) -> np.ndarray:
        """The positions of the ends with a node where ``usable`` (a boolean array) holds,
        in end order."""
        if not self.items:
            return _ZERO[:0]
        if not self._built:
            self._build()
        hit = self.owner[usable[self.node]]
        return np.flatnonzero(np.bincount(hit, minlength=len(self.items)))

    def give(self, free: Free, a: int, b: int) -> np.ndarray:
        """Give ``free`` the resources of the ends at positions ``a .. b - 1``, in order;
        returns the nodes given to (one entry per end's node, repeats included)."""
        sl = slice(int(self.offset[a]), int(self.offset[b]))
        node = self.node[sl]
        np.add.at(free.gpus, node, self.gpus[sl])
        np.add.at(free.cpus, node, self.cpus[sl])
        np.add.at(free.mem, node, self.mem[sl])
        return node


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
    now). ``None``: it fits nowhere. ``nodes``: the partition's nodes (the union of
    ``cand.groups``), a set or a boolean array over all nodes (computed when not given).

    A batch gives back every end up to its last, those on no usable node included: they
    free only nodes the fit leaves out, so the answer is the same. After a batch the
    test is a count: ``fit`` finds nodes exactly when enough usable nodes meet its
    per-node thresholds (``fit_thresholds``), and a batch only adds resources, so only
    the nodes it gave to can newly meet them; ``fit`` itself runs once, to choose the
    nodes, after the batch that brings the count to the job's span."""
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
    if not relevant.size:
        return None
    ends = index.ends[relevant]
    future = free.copy()
    span, (gpus_at_least, cpus_at_least, mem_at_least) = fit_thresholds(cand.need, cand.largest)
    meets = usable & (future.gpus >= gpus_at_least)
    meets &= future.cpus >= cpus_at_least
    meets &= future.mem >= mem_at_least
    count = int(np.count_nonzero(meets))
    given = 0
    end = float(ends[0])
    first = end + (WILL_RUN_WINDOW - (end + epoch) % WILL_RUN_WINDOW)
    window = WILL_RUN_WINDOW
    k, count_ends = 0, len(ends)
    while k < count_ends:
        # The batch: every end up to the window's (at least the next one; the window
        # always covers it). Slurm stops after 200 ends to check its 2-second timer and
        # goes on in the same window, so the test still comes at the window's end.
        k = max(int(ends.searchsorted(first + window, "right")), k + 1)
        last = int(relevant[k - 1])
        touched = index.give(future, given, last + 1)
        given = last + 1
        window *= 2
        while k < count_ends and ends[k] > first + window:
            window *= 2
        touched = touched[usable[touched] & ~meets[touched]]
        if touched.size:
            touched = touched[future.gpus[touched] >= gpus_at_least]
            touched = touched[future.cpus[touched] >= cpus_at_least]
            touched = touched[future.mem[touched] >= mem_at_least]
            if touched.size:
                meets[touched] = True
                count = int(np.count_nonzero(meets))
        if count >= span:
            placement = fit(cand.need, cand.groups, future, cand.largest, blocked)
            assert placement is not None, "fit_thresholds and fit disagree"
            start = float(ends[k - 1])
            return (start if start > now else now + 1), placement
    return None


def _mask(nodes: set[int], size: int) -> np.ndarray:
    mask = np.zeros(size, dtype=bool)
    if nodes:
        mask[np.fromiter(nodes, dtype=np.int64, count=len(nodes))] = True
    return mask


class Reservations:
    """The cycle's reservations, in the order made, by end, and per node (each node's
    reserved spans), so that ``later_start`` looks only at what it needs."""

    def __init__(self) -> None:
        self.items: list[Reservation] = []
        self._by_end: list[Reservation] = []
        self._ends: list[float] = []
        self._spans: dict[int, list[tuple[float, float]]] = {}

    def add(self, r: Reservation) -> None:
        self.items.append(r)
        at = bisect.bisect_right(self._ends, r.end)
        self._ends.insert(at, r.end)
        self._by_end.insert(at, r)
        for n in r.nodes:
            self._spans.setdefault(n, []).append((r.begin, r.end))

    def later_start(self, start_res: float, usable: set[int]) -> float | None:
        """The first instant after ``start_res`` at which a usable node that a
        reservation holds comes free (a slot boundary of the node-space map whose next
        slot has a node the current one lacks: ``later_start`` in ``_attempt_backfill``):
        the first reservation end, in end order, with a usable node that no reservation
        holds at that instant."""
        by_end, spans = self._by_end, self._spans
        for i in range(bisect.bisect_right(self._ends, start_res), len(by_end)):
            r = by_end[i]
            b = r.end
            for n in r.nodes:
                if n in usable and not any(lo <= b < hi for lo, hi in spans[n]):
                    return b
        return None


#: Backfill's preemption step (``backfill_preempt.py``): for a job that cannot start
#: now, given the nodes it may not use and the plan's ends, the nodes it starts on now
#: (``True``) or holds from now while its preemption completes (``False``), or ``None``.
PreemptHook = Callable[[Candidate, set[int], Endings], tuple[list[tuple[int, Need]], bool] | None]


def backfill(
    now: float,
    queue: Sequence[Candidate],
    free: Free,
    running: list[Ending],
    *,
    window: float,
    resolution: float,
    max_job_test: int,
    epoch: float = 0.0,
    preempt: PreemptHook | None = None,
    compiled: bool | None = None,
    arrays: EndArrays | None = None,
    table: tuple[np.ndarray, np.ndarray, list[list[list[int]]]] | None = None,
) -> BackfillResult:
    """One backfill cycle (``_attempt_backfill``; see the module docstring). ``free`` is
    updated with the jobs it starts. For each job, from ``start_res`` = now: the nodes
    reserved for higher jobs over ``start_res .. start_res + limit`` are left out, the
    will-run test (``will_run``) gives a start and nodes; a start after the next instant
    a reserved node comes free is tried again from that instant (``TRY_LATER``); a start
    now starts the job; a start within ``bf_window`` reserves the will-run's nodes, unless
    they overlap a reservation over that span (then tried again from that start).
    ``preempt``: a job that cannot start now may start by preempting (``PreemptHook``).
    ``compiled``: run the cycle compiled (``plan_compiled``: the same decisions); by
    default where numba is installed and there is no preemption step. ``arrays``: the
    same ends as ``running``, as the compiled cycle reads them (made from ``running``
    when not given); ``table``: the candidates' rows as ``CandidateRows`` keeps them
    (``plan_compiled.run``)."""
    res = max(resolution, 1.0)
    if compiled is None:
        compiled = preempt is None and compiled_cycle.available()
    if compiled and queue:
        if preempt is not None:
            raise ValueError("the compiled backfill cycle has no preemption step")
        ends = arrays if arrays is not None else EndArrays.of(running)
        return _backfill_compiled(now, queue, free, ends, window, res, max_job_test, epoch, table)
    endings = Endings(running)
    plan = Reservations()
    reservations = plan.items
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
            later = plan.later_start(start_res, usable)
            answer = will_run(now, cand, free, endings, excluded, epoch, usable_mask)
            if preempt is not None and start_res <= now and (answer is None or answer[0] > now):
                taken = preempt(cand, excluded, endings)
                if taken is not None and not taken[1]:
                    finish = math.floor((now + cand.limit + res - 1) / res) * res
                    held = frozenset(n for n, _ in taken[0])
                    plan.add(Reservation(cand.job_id, held, math.floor(now / res) * res, finish))
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
            plan.add(Reservation(cand.job_id, nodes, begin, finish))
            break
    return BackfillResult(started, reservations, tested)


def _backfill_compiled(
    now: float,
    queue: Sequence[Candidate],
    free: Free,
    ends: EndArrays,
    window: float,
    res: float,
    max_job_test: int,
    epoch: float,
    table: tuple[np.ndarray, np.ndarray, list[list[list[int]]]] | None = None,
) -> BackfillResult:
    """``backfill``'s cycle run by ``plan_compiled``, its answer as starts and reservations
    (a reservation's bounds are ints for an int resolution, as ``math.floor(x / res) * res``
    gives them here)."""
    from shapeshift.policies.slurm import plan_compiled  # imports numba: only when used

    tested, started, reserved = plan_compiled.run(now, queue, free, ends, window, res, max_job_test, epoch, table)
    as_int = isinstance(res, int)

    def rows() -> list[tuple[str, list[int], float, float]]:
        cast = int if as_int else float
        return [(queue[i].job_id, nodes, cast(b0), cast(b1)) for i, nodes, b0, b1 in reserved()]

    return BackfillResult(
        [(queue[i].job_id, [(n, share) for n in nodes]) for i, nodes, share in started], None, tested, rows
    )
