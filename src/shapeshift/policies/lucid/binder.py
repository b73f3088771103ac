"""Lucid's binder side: a job's partners, its pair allocation, its declared GPU memory.

Kept apart from ``policy.py`` so that module stays one job (the decision loop); the
``Lucid`` class mixes these in. The rules themselves are in ``packing.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from shapeshift.model import Allocation, JobSpec, Resources
from shapeshift.policies.lucid.packing import Candidate, PartnerIndex, sharing_score

if TYPE_CHECKING:
    from shapeshift.engine.state import FreeResources
    from shapeshift.engine.view import ClusterView
    from shapeshift.perf.colocation import SharingProfile
    from shapeshift.policies.lucid.partners import RunningPartners


class BinderMixin:
    """Partner look-ups for ``Lucid`` (which owns the attributes declared here)."""

    features: dict[str, SharingProfile]
    scores: dict[str, int]
    labels: dict[str, int]
    priority: dict[str, float]
    profiling: dict[str, float]
    running_partners: RunningPartners
    packing: object
    _shapes: dict[int, tuple[np.ndarray, tuple[int, int, float]]]

    def _main_shape(self, view: ClusterView, nodes: np.ndarray) -> tuple[int, int, float]:
        """(largest node's GPUs, GPUs, smallest GPU memory) of the main nodes: fixed for a
        node set, so looked up once per set (profiler scaling hands a new array)."""
        hit = self._shapes.get(id(nodes))
        if hit is None or hit[0] is not nodes:
            if len(self._shapes) > 64:  # node sets profiler scaling made and dropped
                self._shapes.clear()
            capacity = view.free().gpu_capacity[nodes]
            largest = int(capacity.max()) if len(nodes) else 0
            gpu_mem = min((view.cluster.nodes[int(n)].gpu_mem_gb for n in nodes), default=0.0)
            hit = self._shapes[id(nodes)] = (nodes, (largest, int(capacity.sum()), gpu_mem))
        return hit[1]

    def _score(self, job_id: str) -> int:
        """The job's configuration's label where the profile file gives one, else the
        packing model's score of its measured features."""
        score = self.scores.get(job_id)
        if score is None:
            label = self.labels.get(job_id)
            score = label if label is not None else sharing_score(self.packing, self.features[job_id])
            self.scores[job_id] = score
        return score

    def _memory(self, view: ClusterView, job_id: str, node: int) -> float:
        capacity = view.cluster.nodes[node].gpu_mem_gb
        profile = self.features.get(job_id)
        return capacity if profile is None else min(profile.gpu_mem_gb, capacity)

    def _partners(self, view: ClusterView, partition: str) -> list[Candidate]:
        """Running jobs of the main queue that run alone on one node, in start order."""
        return self.running_partners.of(
            view, partition, self.profiling, self.features, self.priority, self._describer(view)
        )

    def _describer(self, view: ClusterView):  # type: ignore[no-untyped-def]
        def describe(job_id: str, node: int, priority: float) -> Candidate:
            spec = view.job(job_id).spec
            return Candidate(job_id, spec.num_gpus, self._score(job_id), priority, self._memory(view, job_id, node))

        return describe

    def _pair(self, view: ClusterView, spec: JobSpec, partners: PartnerIndex, free: FreeResources, capacity: float):  # type: ignore[no-untyped-def]
        """An allocation joining ``spec`` to a running partner, or ``None``; ``capacity``
        is the smallest GPU memory of the partition's main nodes."""
        ledger = view.sharing
        assert ledger is not None
        profile = self.features[spec.job_id]
        me = Candidate(
            spec.job_id,
            spec.num_gpus,
            self._score(spec.job_id),
            self.priority[spec.job_id],
            min(profile.gpu_mem_gb, capacity),
        )
        partner = partners.pick(ledger, me)
        if partner is None:
            return None
        devices = ledger.devices[partner.job_id]
        node = devices[0][0]
        if free.cpus[node] + 1e-9 < spec.num_cpus or free.mem[node] + 1e-9 < spec.mem_gb:
            return None
        free.cpus[node] -= spec.num_cpus
        free.mem[node] -= spec.mem_gb
        res = Resources(spec.num_gpus, spec.num_cpus, spec.mem_gb)
        return Allocation(((node, res),), devices=devices, gpu_mem_gb=me.gpu_mem)

    def _declare_memory(self, view: ClusterView, spec: JobSpec, alloc: Allocation) -> Allocation:
        sharing = view.sharing
        if sharing is None or sharing.fractions or spec.job_id not in self.features or len(alloc.placement) != 1:
            return alloc
        node = alloc.placement[0][0]
        return Allocation(alloc.placement, alloc.plan, gpu_mem_gb=self._memory(view, spec.job_id, node))
