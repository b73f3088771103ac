"""A ``slurm.conf``'s nodes and partitions as a ``ClusterSpec``.

Memory goes through ``mib_to_gb`` as a history's ``mem=`` does, so a job that asked for a
whole node's memory fits it. Slurm partitions may share nodes; the simulator's partitions
may not, so overlapping partitions are refused with the node they share (the usual fix:
replay one partition, or give ``whatif`` a configuration without the overlap). A
partition listing every node and nothing else is the common single-partition site.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec, ModelError, NodeSpec
from shapeshift.slurm.conf import SlurmConf
from shapeshift.workloads.readers.sacct_fields import mib_to_gb


@dataclass(frozen=True)
class SlurmCluster(ClusterSpec):
    """A cluster read from a ``slurm.conf``, carrying the configuration, so that
    ``--policy slurm`` schedules with the same file ``--cluster`` named."""

    slurm: SlurmConf | None = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.nodes, dict(self.partitions), dict(self.tenants), self.gpu_share_limit, self.slurm))


def _rebuild(nodes: Any, partitions: Any, tenants: Any, limit: int, conf: SlurmConf | None) -> SlurmCluster:
    return SlurmCluster(nodes=nodes, partitions=partitions, tenants=tenants, gpu_share_limit=limit, slurm=conf)


def cluster_of(conf: SlurmConf) -> SlurmCluster:
    nodes = tuple(
        NodeSpec(
            name=n.name, gpus=n.gpus, cpus=float(n.cpus), mem_gb=mib_to_gb(n.mem_mib), gpu_type=n.gpu_type or "generic"
        )
        for n in conf.nodes
    )
    owner: dict[str, str] = {}
    for part in conf.partitions:
        for node in part.nodes:
            if node in owner:
                raise InputError(
                    f"partitions {owner[node]} and {part.name} share node {node}; the simulator needs "
                    "partitions without shared nodes",
                    path=conf.path,
                    field="PartitionName",
                )
            owner[node] = part.name
    partitions = {p.name: p.nodes for p in conf.partitions if p.nodes}
    try:
        # Keywords: ClusterSpec may gain fields, and a positional configuration would land in one.
        return SlurmCluster(nodes=nodes, partitions=partitions, tenants={}, gpu_share_limit=1, slurm=conf)
    except ModelError as exc:
        raise InputError(str(exc), path=conf.path) from None
