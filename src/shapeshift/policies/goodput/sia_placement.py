"""Where Sia's chosen GPU counts land on one GPU type's nodes, as the artifact places them.

The Sia artifact's policy places every round from scratch (``sia-simulator/sia.py``,
``SiaPolicy.alloc_to_placement``: ``smart_placement`` is off, so
``alloc_to_placement_fast`` runs): the jobs of one type, widest first (ties in the order
the jobs were submitted), take GPUs from a cursor over the type's nodes that only moves
forward and wraps around. A job first takes as many whole free nodes as its count holds
whole nodes, looking once round the nodes; whatever it still needs it takes from the
next nodes with free GPUs, so a job smaller than a node may be split across nodes where
the node at the cursor is partly used. The cursor then stays where the job's last GPU
came from, plus one. Nothing keeps a job where it was: a job whose GPUs per node come out
the same keeps running (the artifact restarts a job only when that tuple changes,
``Job.reallocate``), any other is restarted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation

Placement = dict[int, int]


def cursor_place(wanted: Mapping[str, int], order: Sequence[str], capacity: Mapping[int, int]) -> dict[str, Placement]:
    """Per job, GPUs per node for ``wanted[job]`` GPUs on nodes of ``capacity`` (node ->
    GPUs, all free), placed widest first (ties in ``order``) from a forward cursor. The
    counts must fit in all (the integer program's GPU constraint); a job asking 0 is absent."""
    nodes = sorted(capacity)
    free = [capacity[n] for n in nodes]
    if not nodes:
        return {}
    per_node = max(free)
    assert sum(wanted[j] for j in order) <= sum(free), "the counts exceed the type's GPUs"
    rank = {job: i for i, job in enumerate(order)}
    cursor = 0
    result: dict[str, Placement] = {}
    for job in sorted((j for j in order if wanted[j] > 0), key=lambda j: (-wanted[j], rank[j])):
        need, i, got = wanted[job], cursor, {}
        whole = need // per_node
        checked = 0
        while checked < len(nodes) and whole > 0:
            if free[i] == per_node:
                free[i] = 0
                need -= per_node
                got[nodes[i]] = per_node
                whole -= 1
            i = (i + 1) % len(nodes)
            checked += 1
        while need > 0:
            if free[i] > 0:
                take = min(need, free[i])
                free[i] -= take
                need -= take
                got[nodes[i]] = got.get(nodes[i], 0) + take
            i = (i + 1) % len(nodes)
        cursor = i
        result[job] = got
    return result


def same_shape_move(view: ClusterView, before: Allocation, after: Allocation) -> bool:
    """A move to other nodes of the same GPU type with the same GPUs per node, in node
    order: no restart in the artifact's count (``Job.reallocate`` compares that tuple)."""
    nodes_b, nodes_a = sorted(n for n, _ in before.placement), sorted(n for n, _ in after.placement)
    types = {view.cluster.nodes[n].gpu_type for n in (*nodes_b, *nodes_a)}
    shape_b = [r.gpus for _, r in sorted(before.placement, key=lambda part: part[0])]
    shape_a = [r.gpus for _, r in sorted(after.placement, key=lambda part: part[0])]
    return nodes_b != nodes_a and len(types) == 1 and shape_b == shape_a
