"""How large a cluster description may be, checked before any node is built.

A typo such as ``--cluster 99999999999x8`` or a YAML node group with ``count: 100000000``
would otherwise build one node object after another until memory runs out; both the
``NxG`` shorthand and the YAML format refuse it at parse time with one line instead.
"""

from __future__ import annotations

from shapeshift.errors import InputError

#: Bounds on a cluster description, checked before any node is built so that a typo
#: (``99999999999x8``) is refused at once instead of filling memory. Generous: the largest
#: GPU clusters reported hold on the order of 10^5 GPUs, and a node of 1,024 GPU slots
#: leaves room for fractional or logical slots.
MAX_NODES = 100_000
MAX_GPUS_PER_NODE = 1_024
MAX_TOTAL_GPUS = 1_000_000


def check_cluster_size(nodes: int, gpus_per_node: int, path: str | None = None, field: str | None = None) -> None:
    """Refuse more than ``MAX_NODES`` nodes, ``MAX_GPUS_PER_NODE`` GPUs per node or
    ``MAX_TOTAL_GPUS`` GPUs in all."""
    if nodes > MAX_NODES:
        raise InputError(f"{nodes} nodes is more than the {MAX_NODES:,} a cluster may have", path=path, field=field)
    if gpus_per_node > MAX_GPUS_PER_NODE:
        raise InputError(
            f"{gpus_per_node} GPUs per node is more than the {MAX_GPUS_PER_NODE:,} a node may have",
            path=path,
            field=field,
        )
    if nodes * gpus_per_node > MAX_TOTAL_GPUS:
        raise InputError(
            f"{nodes * gpus_per_node} GPUs is more than the {MAX_TOTAL_GPUS:,} a cluster may have",
            path=path,
            field=field,
        )
