"""Where the ranks of a 3D-parallel plan land, and what links their groups cross.

Ranks are laid out the Megatron way (TP fastest, then DP, then PP) and assigned to
nodes in placement order: the first ``g_1`` ranks on node 0, the next ``g_2`` on node 1,
and so on. From that we derive, per communication group kind, whether it crosses nodes
and how unevenly: the figures the bandwidth terms of :mod:`shapeshift.perf.rubick` need.
Results are cached because the same (plan shape, placement) recurs across a fit and a
sensitivity curve.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True, slots=True)
class GroupSpan:
    """How the worst group of one kind is spread: nodes spanned and fewest members on a node.

    ``nodes == 1`` means every group of this kind stays inside a node. ``min_per_node`` is
    the smallest number of a group's ranks on any node it touches, taken over the group
    that is slowest under hierarchical all-reduce (largest ``(n-1)/n / min_per_node``).
    """

    nodes: int
    min_per_node: int

    @property
    def crosses(self) -> bool:
        return self.nodes > 1


@dataclass(frozen=True, slots=True)
class PlanTopology:
    """``dp_inter_load``: inter-node all-reduce traffic of the busiest node, in units of one
    rank's gradient volume per NIC (see :func:`dp_inter_load`)."""

    dp: GroupSpan
    tp: GroupSpan
    pp_crosses: bool
    dp_inter_load: float


def nics_used(gpus_on_node: int) -> int:
    """NICs a node's GPUs drive: one per *pair* of GPUs (at least one).

    A800 HGX nodes pair two GPUs per PCIe switch and NIC, so 2 or 3 busy GPUs on a node
    move no more inter-node data than 1 (measured: t5 zero-dp on 2+6 and 3+5 is as slow
    as 2+2+2+2, while 4+4 is twice as fast).
    """
    return max(1, gpus_on_node // 2)


def dp_inter_load(dp_groups: np.ndarray, placement: tuple[int, ...]) -> float:
    """Busiest node's inter-node traffic under hierarchical all-reduce, per unit volume and NIC.

    A DP group spread over ``n`` nodes moves ``2(n-1)/n`` times its per-rank volume in and
    out of every node it touches (intra-node reduce-scatter, inter-node all-reduce of the
    node's share, intra-node all-gather). All groups that touch a node share that node's
    NICs (:func:`nics_used` of the GPUs placed there); the busiest node sets the pace.
    """
    load = np.zeros(len(placement))
    for row in dp_groups:
        touched = np.unique(row)
        n = len(touched)
        if n > 1:
            load[touched] += 2.0 * (n - 1) / n
    nics = np.array([nics_used(g) for g in placement], dtype=float)
    return float(np.max(load / nics))


def _worst_span(node_ids: np.ndarray) -> GroupSpan:
    """``node_ids``: (groups, members) node index per rank; pick the slowest group."""
    best: tuple[float, GroupSpan] | None = None
    for row in node_ids:
        counts = np.bincount(row)
        counts = counts[counts > 0]
        n = len(counts)
        k = int(counts.min())
        cost = (n - 1) / n / k if n > 1 else 0.0
        span = GroupSpan(n, k)
        if best is None or cost > best[0]:
            best = (cost, span)
    assert best is not None
    return best[1]


@lru_cache(maxsize=65536)
def plan_topology(dp: int, tp: int, pp: int, placement: tuple[int, ...]) -> PlanTopology:
    """Spans of the DP and TP groups and whether PP stage boundaries cross nodes."""
    gpus = dp * tp * pp
    if sum(placement) != gpus:
        raise ValueError(f"plan uses {gpus} GPUs but placement {placement} holds {sum(placement)}")
    node_of_rank = np.repeat(np.arange(len(placement)), placement).reshape(pp, dp, tp)
    dp_groups = node_of_rank.transpose(0, 2, 1).reshape(pp * tp, dp)
    dp_span = _worst_span(dp_groups)
    tp_span = _worst_span(node_of_rank.reshape(pp * dp, tp))
    stage_nodes = node_of_rank.reshape(pp, dp * tp)
    pp_crosses = pp > 1 and bool(np.any(stage_nodes[1:] != stage_nodes[:-1]))
    return PlanTopology(dp_span, tp_span, pp_crosses, dp_inter_load(dp_groups, placement))
