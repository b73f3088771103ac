"""Alibaba's GPU-sharing trace of 2023 ("openb", cluster-trace-gpu-v2023; Weng et al.,
USENIX ATC'23): its pod list as a workload and its node list as a cluster.

Fields mean what the FGD authors' converter ``data/pod_csv_to_yaml.py``
(hkust-adsl/kubernetes-scheduler-simulator) makes of them; the parsing and its checks are
``shapeshift.gpushare.openb``'s, shared with ``shapeshift fill``:

* a pod is a job, pods asking for no GPU included (they take CPU and memory);
* ``gpu_milli`` below 1000 on a one-GPU pod is a share of one GPU (``JobSpec.gpu_milli``);
  1000 is a whole GPU; ``gpu_spec`` (``|``-separated models) is the job's type constraint;
* ``creation_time`` is the submission and ``deletion_time - creation_time`` the run time
  (the pod's lifetime: the trace records no other), both in seconds; submissions are
  shifted so the first is at 0, and ``scheduled_time``/``deletion_time`` become the
  recorded ``start_time``/``end_time`` on that clock;
* ``cpu_milli`` / 1000 CPUs, ``memory_mib`` MiB (converted to GB of 10^9 bytes).

Node list: one node per row with its GPU model, CPUs and memory; the cluster lets jobs
take fractions of GPUs (``ClusterSpec.gpu_fractions``), any number of them per GPU while
their shares fit. GPU memory is not in the trace: a share of a GPU is a share of its
memory, so the size never binds and the model default stays.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.errors import InputError
from shapeshift.gpushare.openb import MILLI, NODE_COLUMNS, POD_COLUMNS, read_nodes, read_pods
from shapeshift.model import ClusterSpec, NodeSpec
from shapeshift.workloads.workload import Workload

OPENB_POD_COLUMNS = POD_COLUMNS
OPENB_NODE_COLUMNS = NODE_COLUMNS
#: GB (10^9 bytes) per MiB.
_GB_PER_MIB = 2**20 / 1e9


def read_openb(path: str | Path) -> Workload:
    """An openb pod list (``openb_pod_list_*.csv``) as a workload (see the module doc).
    A list without ``creation_time``/``deletion_time`` (the ``multigpuNN`` variants) has
    no durations to simulate and is refused; ``shapeshift fill`` replays it."""
    path = Path(path)
    pods = read_pods(path)
    created, deleted = pods.creation_time, pods.deletion_time
    missing = np.isnan(created) | np.isnan(deleted)
    if missing.any():
        line = int(np.flatnonzero(missing)[0]) + 2
        field = "creation_time" if np.isnan(created[line - 2]) else "deletion_time"
        raise InputError(
            "no creation/deletion time, so no duration to simulate (shapeshift fill replays pods without them)",
            path=str(path),
            line=line,
            field=field,
        )
    if (deleted < created).any():
        line = int(np.flatnonzero(deleted < created)[0]) + 2
        raise InputError("deletion_time is before creation_time", path=str(path), line=line, field="deletion_time")
    origin = float(created.min())
    fraction = (pods.num_gpu == 1) & (pods.gpu_milli < MILLI)
    frame = pd.DataFrame(
        {
            "job_id": list(pods.names),
            "submit_time": created - origin,
            "num_gpus": pods.num_gpu,
            "duration": deleted - created,
            "num_cpus": pods.cpu_milli / 1000.0,
            "mem_gb": pods.memory_mib * _GB_PER_MIB,
            "qos": list(pods.qos),
            "gpu_milli": np.where(fraction, pods.gpu_milli, 0),
            "gpu_types": list(pods.gpu_spec),
            "start_time": pods.scheduled_time - origin,
            "end_time": deleted - origin,
        }
    )
    return Workload.from_frame(path.stem, frame)


def openb_cluster(path: str | Path) -> ClusterSpec:
    """An openb node list (``openb_node_list_*.csv``) as a heterogeneous cluster whose
    GPUs take fractional jobs (see the module doc)."""
    nodes = read_nodes(path)
    specs = tuple(
        NodeSpec(
            name=name,
            gpus=int(gpus),
            cpus=int(cpu) / 1000.0,
            mem_gb=int(mem) * _GB_PER_MIB,
            gpu_type=model or "none",
        )
        for name, cpu, mem, gpus, model in zip(
            nodes.names, nodes.cpu_milli, nodes.memory_mib, nodes.gpus, nodes.model, strict=True
        )
    )
    # No per-GPU job limit (gpu_share_limit 1 = not set on a fractional cluster): the shares
    # bound a GPU, and policies that pair whole GPUs (gpu_share_limit >= 2) keep them whole.
    return ClusterSpec(specs, gpu_fractions=True)


def is_openb_node_list(path: str | Path) -> bool:
    """Whether ``path`` is a CSV file whose header has the openb node list's columns."""
    path = Path(path)
    if path.suffix.lower() != ".csv" or not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8") as handle:
            header = {c.strip() for c in handle.readline().split(",")}
    except (OSError, UnicodeDecodeError):
        return False
    return set(NODE_COLUMNS) <= header
