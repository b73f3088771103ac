"""What every placement does for jobs of a particular GPU shape: a GPU-type constraint
keeps a job on the nodes of the types it allows, and a fraction of one GPU (on a cluster
of fractional GPUs) goes to one GPU that still has that share free.
"""

from __future__ import annotations

import numpy as np

from shapeshift.engine.fractions import choose_gpus, type_mask
from shapeshift.engine.state import FreeResources
from shapeshift.model import GPU_MILLI, Allocation, JobSpec, Resources


def host_fits(job: JobSpec, node: int, free: FreeResources) -> bool:
    """Whether ``node`` has the job's CPUs and memory free."""
    return free.cpus.item(node) + 1e-9 >= job.num_cpus and free.mem.item(node) + 1e-9 >= job.mem_gb


#: Nodes of a partition a type-constrained job may use, by (partition array, allowed
#: types): the partition arrays are the same objects on every decision.
_ELIGIBLE: dict[tuple[int, frozenset[str]], tuple[np.ndarray, np.ndarray]] = {}


def eligible(job: JobSpec, nodes: np.ndarray, free: FreeResources) -> np.ndarray:
    """``nodes`` whose GPU type ``job`` allows (``nodes`` itself when it names no type)."""
    if not job.gpu_types or not job.num_gpus:
        return nodes
    key = (id(nodes), job.gpu_types)
    hit = _ELIGIBLE.get(key)
    if hit is None or hit[0] is not nodes:
        mask = np.array(type_mask(job, nodes.tolist(), free.node_types), dtype=bool)
        if len(_ELIGIBLE) > 1000:
            _ELIGIBLE.clear()
        hit = _ELIGIBLE[key] = (nodes, nodes[mask])
    return hit[1]


def fraction_find(job: JobSpec, nodes: np.ndarray, free: FreeResources, rule: str) -> Allocation | None:
    """A fractional job (``gpu_milli``) on a fractional cluster: among ``nodes`` with a GPU
    holding the share and room for the job's CPUs and memory, the node by ``rule``:
    ``tight`` (the least free share on the GPU it would take, as best fit), ``loose``
    (the most) or ``first`` (index order); ties go to the lowest index. The GPU on that
    node is the engine's choice (``shapeshift.engine.fractions``)."""
    assert free.milli is not None and job.gpu_milli
    rows = free.usable_milli(nodes)
    share = job.gpu_milli
    fitting = np.where(rows >= share, rows, GPU_MILLI + 1).min(axis=1)
    candidates = np.flatnonzero(fitting <= GPU_MILLI)
    if rule == "tight":
        candidates = candidates[np.argsort(fitting[candidates], kind="stable")]
    elif rule == "loose":
        candidates = candidates[np.argsort(-fitting[candidates], kind="stable")]
    for i in candidates.tolist():
        node = nodes.item(i)
        if host_fits(job, node, free):
            (gpu,) = choose_gpus(rows[i].tolist(), 1, share) or ()
            res = Resources(1, job.num_cpus, job.mem_gb)
            return Allocation(((node, res),), devices=((node, gpu),), gpu_milli=share)
    return None
