"""Where a job fits now: the node choice of ``select/cons_tres``.

The free resources per node (``Free``), what a job asks of each node (``Need``) and
``fit``, the choice among the nodes that could host it (Slurm ``master`` after 25.05,
commit 284c3b95, ``src/plugins/topology/common/eval_nodes.c``). The backfill plan
(``plan.py``) asks it at every step of its will-run test, the main scheduler once per
job it reaches.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
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
    #: Whether the arrays are another's (the engine's, ``shapes.free_borrowed``), read
    #: until the first change: ``take`` and ``give`` copy them first, and whatever else
    #: writes them calls ``own`` before (most decisions start nothing, and a copy of
    #: every node's resources at each one cost more than the rest of such a decision).
    borrowed: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.gpus = np.asarray(self.gpus, dtype=np.int64)
        self.cpus = np.asarray(self.cpus, dtype=np.float64)
        self.mem = np.asarray(self.mem, dtype=np.float64)

    def copy(self) -> Free:
        return Free(self.gpus.copy(), self.cpus.copy(), self.mem.copy())

    def own(self) -> Free:
        """Arrays of its own from here on (copies of borrowed ones); returns itself."""
        if self.borrowed:
            self.gpus, self.cpus, self.mem = self.gpus.copy(), self.cpus.copy(), self.mem.copy()
            self.borrowed = False
        return self

    def take(self, placement: list[tuple[int, Need]]) -> None:
        if self.borrowed:
            self.own()
        for node, need in placement:
            self.gpus[node] -= need.gpus
            self.cpus[node] -= need.cpus
            self.mem[node] -= need.mem

    def give(self, placement: list[tuple[int, Need]]) -> None:
        if self.borrowed:
            self.own()
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
    _, span, share, at_least = _share(need, largest)
    for allowed, at in _cumulative(groups):
        chosen = _best_run(span, at_least, allowed, at, free, blocked)
        if chosen is not None:
            return [(node, share) for node in chosen]
    return None


def fit_thresholds(need: Need, largest: int) -> tuple[int, tuple[np.ndarray, ...]]:
    """``fit``'s span for ``need`` and its per-node thresholds (GPUs, CPUs, memory, as
    0-d arrays): ``fit`` finds nodes exactly when at least ``span`` of the nodes it may
    use (its groups' nodes, less the excluded ones) hold ``free.gpus >= t[0]``,
    ``free.cpus >= t[1]`` and ``free.mem >= t[2]`` (each of its branches returns nodes
    whenever that many are usable, and ``None`` otherwise). The will-run test counts
    such nodes instead of fitting after every batch of ends."""
    _, span, _, at_least = _share(need, largest)
    return span, at_least


#: ``fit``'s span, per-node share and the share's thresholds (``_at_least``) of each
#: request, by the identity of its ``Need`` (kept in the entry, so a reused identity is
#: told apart) and the largest node: a replay asks for the same few shapes again and
#: again, each one shared ``Need`` (``shapes.py``).
_SHARES: dict[tuple[int, int], tuple[Need, int, Need, tuple[np.ndarray, ...]]] = {}


def _share(need: Need, largest: int) -> tuple[Need, int, Need, tuple[np.ndarray, ...]]:
    """``need``'s entry of ``_SHARES``, made on first use."""
    hit = _SHARES.get((id(need), largest))
    if hit is not None and hit[0] is need:
        return hit
    span = node_span(need.gpus, largest)
    share = Need(need.gpus // span, need.cpus / span, need.mem / span)
    # The share's GPUs and the least free CPUs and memory that hold it, as 0-d arrays
    # (the same comparisons as with the numbers, without converting them on every fit).
    at_least = (np.asarray(share.gpus), np.asarray(_at_least(share.cpus)), np.asarray(_at_least(share.mem)))
    if len(_SHARES) >= 4096:
        _SHARES.clear()
    hit = _SHARES[(id(need), largest)] = (need, span, share, at_least)
    return hit


def _at_least(amount: float) -> float:
    """The smallest float ``x`` with ``x + _EPS >= amount`` in float arithmetic: as
    ``x + _EPS`` rounds monotonically, ``free >= _at_least(a)`` is exactly
    ``free + _EPS >= a`` for every float ``free``, one array operation instead of two."""
    x = amount - _EPS
    while not x + _EPS >= amount:
        x = math.nextafter(x, math.inf)
    while math.nextafter(x, -math.inf) + _EPS >= amount:
        x = math.nextafter(x, -math.inf)
    return x


#: ``_cumulative``'s arrays per groups list, by its identity (the policy hands the same
#: lists on every call); the list itself is kept to tell a reused identity apart.
_CUMULATIVE: dict[int, tuple[list[list[int]], list[tuple[np.ndarray, slice | np.ndarray]]]] = {}


def _cumulative(groups: list[list[int]]) -> list[tuple[np.ndarray, slice | np.ndarray]]:
    """The node indexes ``fit`` tries, group after group: the first group, then the first
    two, ..., each sorted (built once per groups list, not once per fit), each with how
    to read them: consecutive indexes (a partition of one node range) as a slice, not
    gathered."""
    hit = _CUMULATIVE.get(id(groups))
    if hit is not None and hit[0] is groups:
        return hit[1]
    arrays: list[tuple[np.ndarray, slice | np.ndarray]] = []
    allowed: list[int] = []
    for group in groups:
        allowed = sorted(allowed + group)
        idx = np.asarray(allowed, dtype=np.int64)
        consecutive = idx.size and idx[-1] - idx[0] == idx.size - 1
        arrays.append((idx, slice(int(idx[0]), int(idx[-1]) + 1) if consecutive else idx))
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


def _best_run(
    span: int,
    at_least: tuple[np.ndarray, ...],
    idx: np.ndarray,
    at: slice | np.ndarray,
    free: Free,
    blocked: np.ndarray | None,
) -> list[int] | None:
    gpus_at_least, cpus_at_least, mem_at_least = at_least
    cpus = free.cpus[at]
    if isinstance(at, slice):
        # Into buffers kept per range length (no arrays allocated): ``ok`` between two
        # ``False`` ends, so where it changes is one comparison of the buffer with itself.
        ok, later, earlier, change, scratch = _pads(cpus.size)
        np.greater_equal(free.gpus[at], gpus_at_least, out=ok)
        np.greater_equal(cpus, cpus_at_least, out=scratch)
        ok &= scratch
        np.greater_equal(free.mem[at], mem_at_least, out=scratch)
        ok &= scratch
        if blocked is not None:
            ok &= ~blocked[at]
        np.not_equal(later, earlier, out=change)
        return _best_in_range(span, ok, cpus, at.start, change.nonzero()[0])
    ok = free.gpus[at] >= gpus_at_least
    ok &= cpus >= cpus_at_least
    ok &= free.mem[at] >= mem_at_least
    if blocked is not None:
        ok &= ~blocked[at]
    pos = ok.nonzero()[0]
    if pos.size < span:
        return None
    ids = idx[pos]
    if span == 1 and ids.size == 1:
        return [int(ids[0])]
    usable_cpus = cpus[pos]
    # Runs of consecutive node indexes (a node outside the partition or unusable breaks one).
    starts = np.concatenate((_TRUE, (ids[1:] - ids[:-1]) != 1)).nonzero()[0]
    if starts.size == 1:  # one run, long enough: nothing to choose between runs
        return [int(ids[int(usable_cpus.argmin())])] if span == 1 else ids[:span].tolist()
    breaks = starts[1:]
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


def _best_in_range(span: int, ok: np.ndarray, cpus: np.ndarray, first_id: int, bounds: np.ndarray) -> list[int] | None:
    """``_best_run`` over one range of consecutive node indexes (``first_id`` onwards),
    where a run of usable nodes is a run of ``True`` in ``ok``: found from where ``ok``
    changes (``bounds``: alternately where a run starts and where it ends, one past its
    last node), with no array of the usable nodes. A run's total is summed over the same
    values in the same order as ``_best_run`` sums them, so the choice is the same.
    ``ok`` may be a reused buffer: it is read only during the call."""
    size = ok.size
    if bounds.size == 2:  # one run
        start, end = int(bounds[0]), int(bounds[1])
        if end - start < span:
            return None
        if span == 1:
            return [first_id + start + int(cpus[start:end].argmin())]
        return list(range(first_id + start, first_id + start + span))
    if not bounds.size:
        return None
    # Every run's total (and the gaps between runs', left out): ``reduceat`` sums from
    # each index to the next, the last to the end of the array.
    totals = np.add.reduceat(cpus, bounds[:-1] if bounds[-1] == size else bounds)[::2]
    if span == 1:  # every run is long enough: the run of fewest free CPUs, its node of fewest
        best = 2 * int(totals.argmin())  # argmin: the first of equals
        start, end = int(bounds[best]), int(bounds[best + 1])
        return [first_id + start + int(cpus[start:end].argmin())]
    lengths = bounds[1::2] - bounds[::2]
    if int(lengths.sum()) < span:
        return None
    sufficient = (lengths >= span).nonzero()[0]
    if sufficient.size == 0:  # the first usable nodes, across runs
        return (ok.nonzero()[0][:span] + first_id).tolist()
    start = int(bounds[2 * int(sufficient[np.argmin(totals[sufficient])])])  # argmin: the first of equals
    return list(range(first_id + start, first_id + start + span))


#: Per thread (a live controller may fit in several) and per range length, views of one
#: ``False``-ended boolean buffer: its inside (``ok``) and the buffer one apart both ways;
#: then where those differ and a scratch array (``_best_run``'s arrays, reused).
_LOCAL = threading.local()


def _pads(size: int) -> tuple[np.ndarray, ...]:
    pads = getattr(_LOCAL, "pads", None)
    if pads is None:
        pads = _LOCAL.pads = {}
    pad = pads.get(size)
    if pad is None:
        edges = np.zeros(size + 2, dtype=bool)
        pad = (edges[1:-1], edges[1:], edges[:-1], np.empty(size + 1, dtype=bool), np.empty(size, dtype=bool))
        if len(pads) >= 64:
            pads.clear()
        pads[size] = pad
    return pad


_ZERO = np.zeros(1, dtype=np.int64)
_TRUE = np.ones(1, dtype=bool)
