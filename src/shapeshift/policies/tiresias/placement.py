"""Placement rules of Tiresias and of Blox's "Tiresias+" (see ``policy.py``).

* ``ModelAwarePlacement`` ("Tiresias+" in Blox Sec. 4.3): consolidate placement-sensitive
  models by the catalog's flag (unknown models count as sensitive), place others anywhere;
* ``TensorSkewPlacement``: the Tiresias paper's profiler rule (Sec. 3.3), by tensor skew;
* ``AnyFit``: the loose placement both use for jobs they do not consolidate.
"""

from __future__ import annotations

import numpy as np

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, JobSpec
from shapeshift.policies.framework.gpu_shapes import eligible
from shapeshift.policies.framework.placement import Consolidated, allocation_for
from shapeshift.workloads.catalog import lookup


class AnyFit:
    """Best single-node fit if there is one, else GPUs from the nodes with the most free
    GPUs first (fewest nodes, no whole-node requirement)."""

    name = "any-fit"

    def find(self, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
        single = Consolidated().find(job, nodes, free)
        if single is not None or job.num_gpus == 0 or (job.gpu_milli and free.milli is not None):
            return single  # a share of one GPU is on one node or nowhere
        nodes = eligible(job, nodes, free)
        fg = free.gpus[nodes]
        if int(fg.sum()) < job.num_gpus:
            return None
        picked: dict[int, int] = {}
        need = job.num_gpus
        for i in np.argsort(-fg, kind="stable").tolist():
            if need == 0 or fg[i] == 0:
                break
            take = min(int(fg[i]), need)
            picked[int(nodes[i])] = take
            need -= take
        return allocation_for(job, dict(sorted(picked.items())), free) if need == 0 else None


class ModelAwarePlacement:
    """Consolidate placement-sensitive (and unknown) models; place the others anywhere."""

    name = "model-aware"

    def __init__(self) -> None:
        self._packed = Consolidated()
        self._loose = AnyFit()

    def find(self, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
        info = lookup(job.model)
        sensitive = info is None or info.placement_sensitive
        return (self._packed if sensitive else self._loose).find(job, nodes, free)


class TensorSkewPlacement:
    """Tiresias's own rule (paper Sec. 3.3): its profiler consolidates a job when the
    model's tensor sizes are skewed (largest tensor / model size at least ``threshold``;
    the catalog holds the skew of the nine models the reference simulator profiles). A
    model it has not profiled is taken as Inception-3, as the reference's ``get_model``
    does, and is not consolidated. ``threshold`` is ours: any value from 0.14 to 0.61
    classifies the profiled models the same way (VGG and AlexNet consolidated)."""

    name = "skew"

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold
        self._packed = Consolidated()
        self._loose = AnyFit()

    def find(self, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
        info = lookup(job.model)
        skew = info.tensor_skew if info is not None and info.tensor_skew is not None else _UNPROFILED_SKEW
        return (self._packed if skew >= self.threshold else self._loose).find(job, nodes, free)


#: The reference simulator takes a model it has not profiled as Inception-3.
_UNPROFILED_SKEW = 0.138
