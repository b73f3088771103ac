"""The cluster YAML format (see ``../shared/examples``): node groups, partitions and tenant
quotas, validated with pydantic; every problem is an ``InputError`` naming the file, the
line and the key.

Bandwidths are written with units as on a spec sheet (``"400 GB/s"``, ``"100 Gb/s"``)
because a bare number is ambiguous between bits and bytes, a classic factor-of-8
mistake, so it is refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shapeshift.cluster_limits import MAX_GPUS_PER_NODE, MAX_NODES, MAX_TOTAL_GPUS, check_cluster_size
from shapeshift.errors import InputError
from shapeshift.model import DEFAULT_CPUS_PER_GPU, DEFAULT_MEM_GB_PER_GPU, ClusterSpec, ModelError, NodeSpec
from shapeshift.yaml_lines import line_of, safe_load

_BANDWIDTH = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(B|b)(?:/s|ps)\s*$")
_SCALE = {"": 1e-9, "K": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3}


def parse_bandwidth(value: Any) -> float:
    """Parse ``"400 GB/s"`` or ``"100 Gb/s"`` into GB/s. Bytes are ``B``, bits are ``b``."""
    if isinstance(value, (bool, int | float)):
        raise ValueError(f'bandwidth {value!r} has no unit; write it with units, e.g. "400 GB/s" or "100 Gb/s"')
    match = _BANDWIDTH.match(str(value))
    if not match:
        raise ValueError(f'cannot read bandwidth {value!r}; write e.g. "400 GB/s" (bytes) or "100 Gb/s" (bits)')
    number, prefix, unit = match.groups()
    gb_s = float(number) * _SCALE[prefix]
    if unit == "b":
        gb_s /= 8.0
    if gb_s <= 0:
        raise ValueError(f"bandwidth {value!r} must be positive")
    return gb_s


def _no_bool(value: Any) -> Any:
    """YAML's ``true`` would pass as the number 1 (``gpus: true`` as one GPU): refuse it."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()} (true/false is not a number)")
    return value


class _NodeGroup(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    count: int = Field(1, ge=1, le=MAX_NODES)
    gpus: int = Field(..., ge=0, le=MAX_GPUS_PER_NODE)
    cpus: float | None = Field(None, ge=0)
    mem_gb: float | None = Field(None, ge=0)
    gpu_type: str = "generic"
    gpu_mem_gb: float = Field(80.0, gt=0)
    intra_node_bandwidth: float = 300.0
    inter_node_bandwidth: float = 12.5
    pcie_bandwidth: float = 32.0
    name: str | None = None
    #: Kubernetes node labels (what Kueue ResourceFlavors select with ``nodeLabels``).
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels", mode="before")
    @classmethod
    def _label_text(cls, value: Any) -> Any:
        # Kubernetes label values are strings; YAML would read ``true`` or ``8`` as others.
        if not isinstance(value, dict):
            raise ValueError("labels must be a mapping of label names to values")
        out = {}
        for key, item in value.items():
            if isinstance(item, (dict, list)) or item is None:
                raise ValueError(f"label {key!r} must have a text value, got {item!r}")
            out[str(key)] = str(item).lower() if isinstance(item, bool) else str(item)
        return out

    @field_validator("count", "gpus", "cpus", "mem_gb", "gpu_mem_gb", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        return _no_bool(value)

    @field_validator("intra_node_bandwidth", "inter_node_bandwidth", "pcie_bandwidth", mode="before")
    @classmethod
    def _bandwidth(cls, value: Any) -> float:
        return parse_bandwidth(value)


class _ClusterFile(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    nodes: list[_NodeGroup] = Field(..., min_length=1)
    partitions: dict[str, int | list[str]] = Field(default_factory=dict)
    tenants: dict[str, int] = Field(default_factory=dict)
    #: Jobs that may hold one GPU at once (1 = whole GPUs only).
    gpu_share_limit: int = Field(1, ge=1)

    @field_validator("partitions", "tenants", mode="before")
    @classmethod
    def _string_keys(cls, value: Any) -> Any:
        # YAML reads a hex-looking VC id such as 103959 as an int; names are strings.
        if not isinstance(value, dict):
            return value
        return {str(k): _no_bool(v) for k, v in value.items()}

    @field_validator("gpu_share_limit", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        return _no_bool(value)


def load_cluster_file(path: str | Path) -> ClusterSpec:
    """Read and validate a cluster YAML file; every problem becomes an ``InputError``."""
    path = Path(path)
    try:
        raw = safe_load(path.read_text())
    except FileNotFoundError:
        raise InputError("cluster file not found", path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read cluster file: {exc.strerror}", path=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(
            f"not valid YAML: {getattr(exc, 'problem', exc)}",
            path=str(path),
            line=mark.line + 1 if mark else None,
        ) from None
    if not isinstance(raw, dict):
        raise InputError("a cluster file must be a mapping with a 'nodes' list", path=str(path))
    try:
        parsed = _ClusterFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        raise InputError(
            message, path=str(path), line=line_of(path.read_text(), loc), field=".".join(str(p) for p in loc)
        ) from None
    try:
        return _build_cluster(parsed, str(path))
    except ModelError as exc:
        raise InputError(str(exc), path=str(path)) from None


def _build_cluster(parsed: _ClusterFile, path: str) -> ClusterSpec:
    total_nodes = sum(group.count for group in parsed.nodes)
    total_gpus = sum(group.count * group.gpus for group in parsed.nodes)
    check_cluster_size(total_nodes, 1, path, "nodes")  # before any node is built
    if total_gpus > MAX_TOTAL_GPUS:
        raise InputError(f"{total_gpus} GPUs is more than the {MAX_TOTAL_GPUS:,} a cluster may have", path=path)
    nodes: list[NodeSpec] = []
    for group in parsed.nodes:
        base = group.name or (group.gpu_type.lower() if len(parsed.nodes) > 1 else "node")
        for _ in range(group.count):
            nodes.append(
                NodeSpec(
                    name=f"{base}{len(nodes):03d}",
                    gpus=group.gpus,
                    cpus=group.cpus if group.cpus is not None else DEFAULT_CPUS_PER_GPU * group.gpus,
                    mem_gb=group.mem_gb if group.mem_gb is not None else DEFAULT_MEM_GB_PER_GPU * group.gpus,
                    gpu_type=group.gpu_type,
                    gpu_mem_gb=group.gpu_mem_gb,
                    intra_bw_gb_s=group.intra_node_bandwidth,
                    inter_bw_gb_s=group.inter_node_bandwidth,
                    pcie_bw_gb_s=group.pcie_bandwidth,
                    labels=tuple(group.labels.items()),
                )
            )
    partitions: dict[str, tuple[str, ...]] = {}
    cursor = 0
    for name, members in parsed.partitions.items():
        if isinstance(members, int):
            if members < 1:
                raise ModelError(f"partition {name!r} needs at least one node")
            if cursor + members > len(nodes):
                raise ModelError(
                    f"partitions ask for more nodes than the cluster has ({cursor + members} > {len(nodes)})"
                )
            partitions[name] = tuple(n.name for n in nodes[cursor : cursor + members])
            cursor += members
        else:
            partitions[name] = tuple(members)
    return ClusterSpec(tuple(nodes), partitions, dict(parsed.tenants), parsed.gpu_share_limit)
