"""``gres.conf``: the GPU devices of each node, checked against ``slurm.conf``'s ``Gres=``.

Lines ``NodeName=... Name=gpu [Type=T] (File=/dev/nvidia[0-3] | Count=N)``; a node may
have several lines (one per type or per device range), whose devices add up. slurmd
reports what gres.conf gives and slurmctld compares it with slurm.conf
(``src/common/gres.c``, ``_node_config_validate``, 22.05): a node with fewer GPUs than
configured is not usable (``gres/gpu count reported lower than configured``, unless
``SlurmdParameters=config_overrides``), so the replay refuses it with its line; devices
beyond the count are ignored ("Ignoring excess count"). A ``Type=`` other than the one
type ``Gres=`` names matches none of the node's GPUs and is refused; where ``Gres=``
names no type, or several, gres.conf's types stand (slurmctld adds them). ``AutoDetect``
(on a line of its own or with ``Name=gpu``) leaves the devices to the node's driver:
lines without ``File=`` or ``Count=`` then count nothing here.
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
    gres_types: tuple[str, ...]


Node = TypeVar("Node", bound=_Node)

#: gres.conf keys the replay reads; ``Cores``, ``Links``, ``Flags`` and the rest place
#: GPUs within a node, which the replay does not model.
MODELLED = frozenset({"nodename", "name", "type", "file", "count", "autodetect"})


def apply_gres(path: Path, nodes: dict[str, Node], ignored: set[str], *, overrides: bool = False) -> dict[str, Node]:
    """The nodes with the GPU type gres.conf gives where ``Gres=`` names none, after
    checking each node's GPUs there against ``Gres=`` (not with ``overrides``:
    ``SlurmdParameters=config_overrides``, under which slurmctld uses slurm.conf's
    counts); the keys not modelled join ``ignored`` (as ``gres.conf:KEY``)."""
    reader = Reader(path)
    result = dict(nodes)
    devices: dict[str, int] = {}
    unknown: set[str] = set()  # nodes with a line that counts nothing (``AutoDetect``)
    last_line: dict[str, tuple[int, str]] = {}
    detected = False  # an ``AutoDetect`` line without ``Name=``: for every later line
    for number, body in logical_lines(path):
        reader.line = number
        values = dict(reader.pairs(number, body))
        detects = values.get("autodetect", "off").lower() != "off"
        if "name" not in values:
            detected = detected or detects
            continue
        if values["name"].lower() != "gpu":
            continue
        ignored.update(f"gres.conf:{reader.name(k)}" for k in values if k not in MODELLED)
        names = reader.value("NodeName", values["nodename"], expand_hostlist) if "nodename" in values else list(nodes)
        where = reader.name("file") if "file" in values else reader.name("count")
        found: int | None
        if "file" in values:
            found = len(reader.value("File", values["file"], expand_hostlist))
        elif "count" in values or not (detected or detects):
            found = reader.value("Count", values.get("count", "1"), count)
        else:
            found = None  # the devices are detected on the node: not known here
        gpu_type = values.get("type", "")
        for name in names:
            node = result.get(name)
            if node is None:
                continue
            declared = nodes[name].gres_types
            if gpu_type and len(declared) == 1 and gpu_type != declared[0]:
                raise InputError(
                    f"node {name}: Type={gpu_type} here but Gres= in slurm.conf declares gpu:{declared[0]}",
                    path=str(path),
                    line=number,
                    field=reader.name("type"),
                )
            if found is None:
                unknown.add(name)
            else:
                devices[name] = devices.get(name, 0) + found
            last_line[name] = (number, where)
            if not node.gpu_type and gpu_type:
                result[name] = replace(node, gpu_type=gpu_type)
    for name, found in devices.items():
        declared_gpus = nodes[name].gpus
        if declared_gpus and found < declared_gpus and name not in unknown and not overrides:
            number, where = last_line[name]
            raise InputError(
                f"node {name} has {found} GPU devices in gres.conf but Gres= in slurm.conf declares "
                f"{declared_gpus}: slurmctld would not use the node",
                path=str(path),
                line=number,
                field=where,
            )
    return result
