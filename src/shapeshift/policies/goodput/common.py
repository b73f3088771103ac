"""Placement shared by the goodput policies (Pollux, Sia): GPU counts -> nodes.

Both papers place a job's GPUs on as few nodes as possible and let at most one job that
spans nodes use any node (Pollux §4.2 and ``Problem._repair`` in its artifact: "enforce
at most one distributed job per node"; Sia §3.4 allocates multi-node jobs whole nodes).
A job whose GPU count did not change keeps its GPUs where they are (moving it would be a
restart the optimiser did not pay for), unless the policy asks to re-pack one that spans
more nodes than its count needs (``repack``: Pollux values a job on the nodes it gets).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, Schedule

Placement = dict[int, int]
PartitionStep = Callable[[ClusterView, str, dict[str, Allocation], dict[str, str]], None]


def decide_partitions(view: ClusterView, step: PartitionStep, seen: dict[str, int]) -> Schedule:
    """Run ``step`` on every partition that changed, then remember the largest GPU count
    each job was given (both papers let a job grow to twice what it has run on)."""
    desired = dict(view.allocations)
    reasons: dict[str, str] = {}
    for part in sorted(view.dirty_partitions):
        if part in view.partitions:
            step(view, part, desired, reasons)
    for job_id, alloc in desired.items():
        seen[job_id] = max(seen.get(job_id, 0), alloc.gpus)
    return Schedule.replace(view.allocations, desired, reasons)


def keep_or_pack(
    wanted: Mapping[str, tuple[int, Allocation | None]],
    order: Sequence[str],
    capacity: Mapping[int, int],
    exact: frozenset[str] = frozenset(),
    allowed: Mapping[str, list[int]] | None = None,
    repack: Callable[[str, int, int], bool] | None = None,
) -> dict[str, Placement]:
    """Per job, GPUs per node for its wanted count (``wanted[job] = (count, current)``).

    Jobs keeping their count stay in place; the rest are packed largest first (ties in
    ``order``). A job that cannot get its count takes the largest count that fits (jobs in
    ``exact`` take theirs or nothing); a job that gets nothing is absent from the result.
    A job in ``allowed`` (a GPU-type constraint) is packed on those nodes only.
    ``repack(job, nodes_now, nodes_packed)``: a job keeping its count on more nodes than
    ``ceil(count / GPUs per node)`` moves to a placement on fewer (packed as a new job is,
    before the new jobs) when this says so; else it stays, or, if a move of another such
    job took its GPUs, is packed with the new jobs.
    """
    free = dict(capacity)
    shared: set[int] = set()  # nodes that already host a job spanning nodes
    result: dict[str, Placement] = {}
    rank = {job: i for i, job in enumerate(order)}
    gpn = max(capacity.values(), default=1)
    spread: list[tuple[str, Placement]] = []
    for job in order:
        count, current = wanted[job]
        if count <= 0 or current is None or current.gpus != count:
            continue
        place = {n: r.gpus for n, r in current.placement}
        if repack is not None and len(place) > math.ceil(count / gpn):
            spread.append((job, place))
        elif _fits(place, free, shared):
            _take(place, free, shared, result, job)
    for job, place in spread:
        pool = free if allowed is None or job not in allowed else {n: free[n] for n in allowed[job] if n in free}
        tight = _pack(wanted[job][0], pool, shared)
        if tight is not None and len(tight) < len(place) and repack is not None and repack(job, len(place), len(tight)):
            _take(tight, free, shared, result, job)
        elif _fits(place, free, shared):
            _take(place, free, shared, result, job)
    todo = sorted((j for j in order if j not in result and wanted[j][0] > 0), key=lambda j: (-wanted[j][0], rank[j]))
    for job in todo:
        lowest = wanted[job][0] if job in exact else 1
        for count in range(wanted[job][0], lowest - 1, -1):
            pool = free if allowed is None or job not in allowed else {n: free[n] for n in allowed[job] if n in free}
            place = _pack(count, pool, shared)
            if place is not None:
                _take(place, free, shared, result, job)
                break
    return result


def _fits(place: Placement, free: Mapping[int, int], shared: set[int]) -> bool:
    spans = len(place) > 1
    return all(n in free and free[n] >= g for n, g in place.items()) and not (spans and bool(shared & place.keys()))


def _take(place: Placement, free: dict[int, int], shared: set[int], result: dict[str, Placement], job: str) -> None:
    for n, g in place.items():
        free[n] -= g
    if len(place) > 1:
        shared.update(place)
    result[job] = place


def _pack(count: int, free: Mapping[int, int], shared: set[int]) -> Placement | None:
    """One node if any has room (best fit), else the fewest nodes free of other spanning jobs."""
    fits = [n for n, f in free.items() if f >= count]
    if fits:
        n = min(fits, key=lambda n: (free[n], n))
        return {n: count}
    place: Placement = {}
    need = count
    for n in sorted((n for n in free if n not in shared and free[n] > 0), key=lambda n: (-free[n], n)):
        take = min(free[n], need)
        place[n] = take
        need -= take
        if need == 0:
            return place
    return None
