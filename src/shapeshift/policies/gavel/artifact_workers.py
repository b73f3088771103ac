"""Which GPUs of its type a job granted a type gets, as the Sia artifact's Gavel baseline.

The Sia artifact (siasosp23/artifacts, ``sia-simulator/gavel.py``,
``schedule_jobs_on_workers`` and ``assign_workers_to_job``) numbers the GPUs ("workers")
of a type node by node, in node order, and places the jobs granted that type this round
as follows:

* the jobs are taken by GPU count, largest first (ties in grant order);
* at each GPU count, first every job of that count that ran on this type in the last
  round keeps its previous GPUs if none of them has been handed out yet this round;
* then every other job of that count takes the next GPUs not yet handed out, from a
  cursor that only moves forward over the type's GPUs.

So a job is not consolidated: once nodes are partly used it spans the free GPUs of
several nodes, and a wider job placed first can take GPUs a narrower job held, which
then moves. Shapeshift's other rounds place each job consolidated
(:class:`~shapeshift.policies.framework.placement.Consolidated`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from shapeshift.engine.fractions import whole_gpu_spec
from shapeshift.policies.framework.placement import allocation_for

if TYPE_CHECKING:
    import numpy as np

    from shapeshift.engine.state import FreeResources
    from shapeshift.engine.view import ClusterView
    from shapeshift.model import Allocation
    from shapeshift.policies.gavel.table import GavelJobs, GpuTypes

#: A GPU of a node: (node index, GPU slot on the node).
Worker = tuple[int, int]


def assign_workers(
    jobs: Sequence[tuple[str, int]],
    nodes: Sequence[int],
    slots: Sequence[int],
    previous: Mapping[str, tuple[Worker, ...]],
) -> dict[str, tuple[Worker, ...]]:
    """The GPUs of one type each job of ``jobs`` ((job, GPU count), in grant order) gets.

    ``nodes`` are the type's nodes in order and ``slots`` their GPUs; ``previous`` holds
    the GPUs of the jobs that ran on this type in the last round. The granted GPU counts
    must fit the type's GPUs (the grants make sure of it)."""
    workers = [(node, slot) for node, count in zip(nodes, slots, strict=True) for slot in range(count)]
    ranked = sorted(jobs, key=lambda job: -job[1])  # stable: grant order within a count
    taken: set[Worker] = set()
    out: dict[str, tuple[Worker, ...]] = {}
    cursor = 0
    for width in sorted({gpus for _, gpus in ranked}, reverse=True):
        same = [job_id for job_id, gpus in ranked if gpus == width]
        for job_id in same:
            before = previous.get(job_id)
            if before is not None and len(before) == width and taken.isdisjoint(before):
                out[job_id] = before
                taken.update(before)
        for job_id in same:
            if job_id in out:
                continue
            mine: list[Worker] = []
            while len(mine) < width and cursor < len(workers):
                worker = workers[cursor]
                cursor += 1
                if worker not in taken:
                    mine.append(worker)
                    taken.add(worker)
            if len(mine) < width:
                raise ValueError(f"{job_id}: {width} GPUs granted but the type has too few left")
            out[job_id] = tuple(mine)
    return out


def gpus_by_node(workers: tuple[Worker, ...]) -> dict[int, int]:
    """GPUs per node of ``workers``, nodes in order."""
    counts: dict[int, int] = {}
    for node, _ in sorted(workers):
        counts[node] = counts.get(node, 0) + 1
    return counts


def _per_node(alloc: Allocation) -> dict[int, int]:
    return {node: res.gpus for node, res in alloc.placement}


def place_granted(
    view: ClusterView,
    types: GpuTypes,
    table: GavelJobs,
    granted: np.ndarray,
    grant_sequence: np.ndarray,
    running: list[str],
    free: FreeResources,
    record: dict[str, tuple[Worker, ...]],
    changes: dict[str, Allocation | None],
    reasons: dict[str, str],
) -> None:
    """Place a round's grants (``granted``: each table row's type, -1 none;
    ``grant_sequence``: the granted rows in grant order) by :func:`assign_workers`,
    adding to ``changes`` and ``reasons``; ``record`` holds each job's GPUs of the last
    round and is replaced by this round's. A running job whose GPUs per node stay the
    same is left as it is: the artifact restarts a job only when its nodes change
    (``cluster.py``, ``optimize_policy``)."""
    current = view.allocations
    new: dict[str, tuple[Worker, ...]] = {}
    for k in range(len(types.names)):
        jobs: list[tuple[str, int]] = [
            (str(table.ids[r]), int(table.gpus[r])) for r in grant_sequence.tolist() if granted[r] == k
        ]
        previous = {}
        for job_id, _ in jobs:
            before, alloc = record.get(job_id), current.get(job_id)
            if (
                before is not None
                and alloc is not None
                and types.node_type[alloc.placement[0][0]] == k
                and gpus_by_node(before) == _per_node(alloc)
            ):
                previous[job_id] = before
        nodes = types.nodes[k].tolist()
        new.update(assign_workers(jobs, nodes, [view.cluster.nodes[n].gpus for n in nodes], previous))
    for job_id in running:
        target = new.get(job_id)
        if target is None or gpus_by_node(target) != _per_node(current[job_id]):
            free.give(current[job_id])
            changes[job_id] = None
    record.clear()
    for job_id, workers in new.items():
        if job_id in current and job_id not in changes:
            record[job_id] = workers
            continue
        per_node = gpus_by_node(workers)
        # The artifact's GPUs are always free; here a node may be down or hold a job of
        # another policy's making (a controller restarted), so look before taking.
        short = any(free.gpus[node] < gpus for node, gpus in per_node.items())
        placed = None if short else allocation_for(whole_gpu_spec(view.job(job_id).spec), per_node, free)
        if placed is None:
            reasons[job_id] = "granted GPUs this round but they are not free or their nodes lack CPUs or memory"
            continue
        free.take(placed)
        record[job_id] = workers
        changes[job_id] = placed
