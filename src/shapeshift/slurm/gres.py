"""``gres.conf``: the GPU devices of each node, checked against ``slurm.conf``'s ``Gres=``.

Lines ``NodeName=... Name=gpu [Type=T] (File=/dev/nvidia[0-3] | Count=N)``; a node may
have several lines (one per type or per device range), whose devices add up. slurmd
reports what gres.conf gives and slurmctld compares it with slurm.conf
(``src/common/gres.c``, ``_node_config_validate``, 22.05): a node with fewer GPUs than
configured is not usable (``gres/gpu count reported lower than configured``), and a
``Type=`` other than the one ``Gres=`` names matches none of its GPUs. A replay of such
a node would place jobs where Slurm would not, so both are refused with their line.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Protocol, TypeVar

from shapeshift.errors import InputError
from shapeshift.slurm.conf_lines import Reader, logical_lines
from shapeshift.slurm.values import count, expand_hostlist


class _Node(Protocol):
    gpus: int
    gpu_type: str


Node = TypeVar("Node", bound=_Node)

#: gres.conf keys the replay reads; ``Cores``, ``Links``, ``Flags`` and the rest place
#: GPUs within a node, which the replay does not model.
MODELLED = frozenset({"nodename", "name", "type", "file", "count", "autodetect"})


def apply_gres(path: Path, nodes: dict[str, Node], ignored: set[str]) -> dict[str, Node]:
    """The nodes with the GPU type gres.conf gives where ``Gres=`` names none, after
    checking each node's GPUs there against ``Gres=``; the keys not modelled join
    ``ignored`` (as ``gres.conf:KEY``)."""
    reader = Reader(path)
    result = dict(nodes)
    devices: dict[str, int] = {}
    unknown: set[str] = set()  # nodes with a line that counts nothing (``AutoDetect``)
    last_line: dict[str, tuple[int, str]] = {}
    for number, body in logical_lines(path):
        reader.line = number
        values = dict(reader.pairs(number, body))
        if values.get("name", "").lower() != "gpu":
            continue
        ignored.update(f"gres.conf:{reader.name(k)}" for k in values if k not in MODELLED)
        names = reader.value("NodeName", values["nodename"], expand_hostlist) if "nodename" in values else list(nodes)
        where = "File" if "file" in values else "Count"
        if "file" in values:
            found: int | None = len(reader.value("File", values["file"], expand_hostlist))
        elif "count" in values or "autodetect" not in values:
            found = reader.value("Count", values.get("count", "1"), count)
        else:
            found = None  # the devices are detected on the node: not known here
        gpu_type = values.get("type", "")
        for name in names:
            node = result.get(name)
            if node is None:
                continue
            if gpu_type and node.gpu_type and gpu_type != node.gpu_type:
                raise InputError(
                    f"node {name}: Type={gpu_type} here but Gres= in slurm.conf declares gpu:{node.gpu_type}",
                    path=str(path),
                    line=number,
                    field="Type",
                )
            if found is None:
                unknown.add(name)
            else:
                devices[name] = devices.get(name, 0) + found
            last_line[name] = (number, where)
            if not node.gpu_type and gpu_type:
                result[name] = replace(node, gpu_type=gpu_type)
    for name, found in devices.items():
        declared = nodes[name].gpus
        if declared and found != declared and name not in unknown:
            number, where = last_line[name]
            raise InputError(
                f"node {name} has {found} GPU devices in gres.conf but Gres= in slurm.conf declares {declared}"
                + (" (slurmctld would not use the node)" if found < declared else ""),
                path=str(path),
                line=number,
                field=where,
            )
    return result
