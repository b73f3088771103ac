"""Reader of Alibaba's openb node and pod lists (cluster-trace-gpu-v2023).

Node list columns: ``sn, cpu_milli, memory_mib, gpu, model`` (``model`` empty on CPU-only
nodes). Pod list columns: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` and, where
present, ``gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time`` (the
``multigpuNN`` variants carry only the first five). The meaning of each field follows the
authors' converter ``data/pod_csv_to_yaml.py`` of hkust-adsl/kubernetes-scheduler-simulator:
a pod with ``num_gpu == 0`` asks for no GPU whatever its ``gpu_milli`` says; ``gpu_spec``
is a ``|``-separated list of allowed GPU models with empty parts dropped (empty = any
model). Pods needing no GPU are kept: they take CPU and memory.

Columns are held as numpy arrays so the fill replay can index them without Python objects.
Bad input (a missing column, a non-number, a negative amount, a pod asking for several
partial GPUs, which the reference cannot represent) raises ``InputError`` naming the file,
line and field.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shapeshift.errors import InputError

MILLI = 1000
#: The reference's largest node (``MaxNumGpuPerNode`` in pkg/type/const.go).
MAX_GPUS_PER_NODE = 8

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
POD_OPTIONAL = ("gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")


@dataclass(frozen=True, eq=False)
class NodeList:
    """A heterogeneous cluster: one entry per node, in file order."""

    names: tuple[str, ...]
    cpu_milli: np.ndarray  # int64
    memory_mib: np.ndarray  # int64
    gpus: np.ndarray  # int64, 0..8
    model: tuple[str, ...]  # GPU model per node, "" on CPU-only nodes

    def __len__(self) -> int:
        return len(self.names)

    @property
    def total_gpus(self) -> int:
        return int(self.gpus.sum())


@dataclass(frozen=True, eq=False)
class PodList:
    """Pods in file order. ``gpu_spec`` is the normalised allowed-model string ("" = any)."""

    names: tuple[str, ...]
    cpu_milli: np.ndarray  # int64
    memory_mib: np.ndarray  # int64
    num_gpu: np.ndarray  # int64, GPUs asked for
    gpu_milli: np.ndarray  # int64, milli per GPU (0 for CPU-only pods)
    gpu_spec: tuple[str, ...]
    qos: tuple[str, ...]
    creation_time: np.ndarray  # float64, NaN where absent
    deletion_time: np.ndarray
    scheduled_time: np.ndarray

    def __len__(self) -> int:
        return len(self.names)

    @property
    def total_milli_gpu(self) -> np.ndarray:
        return self.num_gpu * self.gpu_milli

    def allowed_models(self, i: int) -> frozenset[str]:
        """The GPU models pod ``i`` may use; empty means any."""
        return frozenset(p for p in self.gpu_spec[i].split("|") if p)


def _rows(path: Path, required: tuple[str, ...]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = [h.strip() for h in (reader.fieldnames or [])]
            missing = [c for c in required if c not in header]
            if missing:
                raise InputError(f"missing column(s) {', '.join(missing)}", path=str(path), line=1, field=missing[0])
            reader.fieldnames = header
            rows = [(reader.line_num, row) for row in reader]
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", path=str(path)) from None
    if not rows:
        raise InputError("no rows", path=str(path))
    return header, rows


def _int(row: dict[str, str], field: str, path: Path, line: int, *, low: int = 0, high: int | None = None) -> int:
    text = (row.get(field) or "").strip()
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"not a number: {text!r}", path=str(path), line=line, field=field) from None
    if not math.isfinite(value) or value != int(value):
        raise InputError(f"must be a finite whole number, got {text!r}", path=str(path), line=line, field=field)
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise InputError(f"must be {bound}, got {text}", path=str(path), line=line, field=field)
    return int(value)


def _time(row: dict[str, str], field: str, path: Path, line: int) -> float:
    text = (row.get(field) or "").strip()
    if not text:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"not a number: {text!r}", path=str(path), line=line, field=field) from None
    if not math.isfinite(value):
        raise InputError(f"must be finite, got {text!r}", path=str(path), line=line, field=field)
    return value


def read_nodes(path: str | Path) -> NodeList:
    """Read an openb node list (``openb_node_list_*.csv``)."""
    path = Path(path)
    _, rows = _rows(path, NODE_COLUMNS)
    names, cpu, mem, gpus, model = [], [], [], [], []
    for line, row in rows:
        name = (row.get("sn") or "").strip()
        if not name:
            raise InputError("empty node name", path=str(path), line=line, field="sn")
        names.append(name)
        cpu.append(_int(row, "cpu_milli", path, line))
        mem.append(_int(row, "memory_mib", path, line))
        g = _int(row, "gpu", path, line, high=MAX_GPUS_PER_NODE)
        gpus.append(g)
        m = (row.get("model") or "").strip()
        if g > 0 and not m:
            raise InputError("a node with GPUs needs its GPU model", path=str(path), line=line, field="model")
        model.append(m if g > 0 else "")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(f"node name {dup!r} appears twice", path=str(path), field="sn")
    return NodeList(
        tuple(names), np.array(cpu, np.int64), np.array(mem, np.int64), np.array(gpus, np.int64), tuple(model)
    )


def read_pods(path: str | Path) -> PodList:
    """Read an openb pod list (``openb_pod_list_*.csv``), any of its variants."""
    path = Path(path)
    _, rows = _rows(path, POD_COLUMNS)
    names, cpu, mem, num, milli, spec, qos = [], [], [], [], [], [], []
    created, deleted, scheduled = [], [], []
    for line, row in rows:
        name = (row.get("name") or "").strip()
        if not name:
            raise InputError("empty pod name", path=str(path), line=line, field="name")
        names.append(name)
        cpu.append(_int(row, "cpu_milli", path, line))
        mem.append(_int(row, "memory_mib", path, line))
        n = _int(row, "num_gpu", path, line, high=MAX_GPUS_PER_NODE)
        if n > 0:
            m = _int(row, "gpu_milli", path, line, low=1, high=MILLI)
            if n > 1 and m < MILLI:
                raise InputError(
                    f"a pod asking for {n} GPUs must ask for whole ones (gpu_milli 1000), got {m}",
                    path=str(path),
                    line=line,
                    field="gpu_milli",
                )
        else:
            m = 0
        num.append(n)
        milli.append(m)
        spec.append("|".join(p.strip() for p in (row.get("gpu_spec") or "").split("|") if p.strip()) if n else "")
        qos.append((row.get("qos") or "").strip())
        created.append(_time(row, "creation_time", path, line))
        deleted.append(_time(row, "deletion_time", path, line))
        scheduled.append(_time(row, "scheduled_time", path, line))
    return PodList(
        tuple(names),
        np.array(cpu, np.int64),
        np.array(mem, np.int64),
        np.array(num, np.int64),
        np.array(milli, np.int64),
        tuple(spec),
        tuple(qos),
        np.array(created, np.float64),
        np.array(deleted, np.float64),
        np.array(scheduled, np.float64),
    )
