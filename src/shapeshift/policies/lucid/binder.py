"""Lucid's binder side: a job's partners, its pair allocation, its declared GPU memory.

Kept apart from ``policy.py`` so that module stays one job (the decision loop); the
``Lucid`` class mixes these in. The rules themselves are in ``packing.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from shapeshift.model import Allocation, JobSpec, Resources
from shapeshift.policies.lucid.packing import Candidate, PartnerIndex, sharing_score
from shapeshift.policies.lucid.speeds import FullSpeedPairs, runs_full_speed

if TYPE_CHECKING:
    from shapeshift.engine.state import FreeResources
    from shapeshift.engine.view import ClusterView
    from shapeshift.perf.colocation import InterferenceModel, SharingProfile
    from shapeshift.policies.lucid.params import LucidParams
    from shapeshift.policies.lucid.partners import RunningPartners


_NEW = "\0placed now"


def name_devices(view: ClusterView, changes: Mapping[str, Allocation | None], alloc: Allocation) -> Allocation:
    """``alloc`` naming the GPUs it will hold, so that a job placed alone may be joined in
    the same decision (``PartnerIndex.add``) on exactly its GPUs. They are the ones the
    engine would give it (``Engine.reconcile``: it frees the GPUs of every job whose
    allocation changes, holds moved jobs' new allocations, then launches, each in the
    order of ``changes``; an allocation naming no GPUs takes the lowest-numbered empty
    ones, ``GpuLedger.take``) once it is added after everything in ``changes``."""
    ledger = view.sharing
    assert ledger is not None
    running = view.allocations
    nodes = {node for node, _ in alloc.placement}
    held = {node: [set(jobs) for jobs in ledger.holders[node]] for node in nodes}
    for other in changes:
        if other in running:
            for node, gpu in ledger.devices.get(other, ()):
                if node in held:
                    held[node][gpu].discard(other)
    moves = [(j, a) for j, a in changes.items() if a is not None and j in running]
    launches = [(j, a) for j, a in changes.items() if a is not None and j not in running]
    for other, given in [*moves, *launches, (_NEW, alloc)]:
        for node, res in given.placement:
            if node not in held:
                continue
            if given.devices is not None:
                mine = [gpu for n, gpu in given.devices if n == node]
            else:
                mine = [gpu for gpu, jobs in enumerate(held[node]) if not jobs][: res.gpus]
            for gpu in mine:
                held[node][gpu].add(other)
    devices = tuple((node, gpu) for node, _ in alloc.placement for gpu, jobs in enumerate(held[node]) if _NEW in jobs)
    return replace(alloc, devices=devices)


class BinderMixin:
    """Partner look-ups for ``Lucid`` (which owns the attributes declared here)."""

    features: dict[str, SharingProfile]
    scores: dict[str, int]
    labels: dict[str, int]
    priority: dict[str, float]
    profiling: dict[str, float]
    running_partners: RunningPartners
    #: Live pairs: the newer job's partner, and the older job's newcomer.
    pair_of: dict[str, str]
    joined_by: dict[str, str]
    #: Running jobs never offered as a partner again (``pair_release="newer"``).
    locked: set[str]
    p: LucidParams
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

    def _partners(self, view: ClusterView, partition: str, changes: Mapping[str, object]) -> list[Candidate]:
        """Running jobs of the main queue that run alone on one node, in start order; not
        those this decision moves or stops (a job leaving the profiler now still holds its
        profiling GPUs in the ledger)."""
        running = self.running_partners.of(
            view, partition, self.profiling, self.features, self.priority, self._describer(view), self.locked
        )
        return [c for c in running if c.job_id not in changes] if changes else running

    def _describer(self, view: ClusterView):  # type: ignore[no-untyped-def]
        def describe(job_id: str, node: int, priority: float) -> Candidate:
            spec = view.job(job_id).spec
            return Candidate(job_id, spec.num_gpus, self._score(job_id), priority, self._memory(view, job_id, node))

        return describe

    def _pair(  # type: ignore[no-untyped-def]
        self,
        view: ClusterView,
        spec: JobSpec,
        partners: PartnerIndex,
        free: FreeResources,
        capacity: float,
        changes: dict[str, Allocation | None],
    ):
        """An allocation joining ``spec`` to a running partner, or to one placed earlier in
        this decision (``changes``), or ``None``; ``capacity`` is the smallest GPU memory of
        the partition's main nodes."""
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
        placed = partners.fresh.get(partner.job_id)
        node = ledger.devices[partner.job_id][0][0] if placed is None else placed[0]
        if free.cpus[node] + 1e-9 < spec.num_cpus or free.mem[node] + 1e-9 < spec.mem_gb:
            return None
        devices = ledger.devices[partner.job_id] if placed is None else changes[partner.job_id].devices
        free.cpus[node] -= spec.num_cpus
        free.mem[node] -= spec.mem_gb
        res = Resources(spec.num_gpus, spec.num_cpus, spec.mem_gb)
        self.pair_of[spec.job_id] = partner.job_id
        self.joined_by[partner.job_id] = spec.job_id
        return Allocation(((node, res),), devices=devices, gpu_mem_gb=me.gpu_mem)

    def interference_model(self, default: InterferenceModel) -> InterferenceModel:
        """How pairs run under Lucid: the run's ``default`` with the artifact's full-speed
        rule on top (``speeds.py``; ``default`` itself when ``full_speed_pair_models`` is empty)."""
        models = frozenset(self.p.full_speed_pair_models)
        return FullSpeedPairs(default, models, self.p.seed) if models else default

    def _runs_full_speed(self, view: ClusterView, job_id: str) -> bool:
        """Whether ``job_id``, just paired, runs at full speed with its partner under the rule."""
        models = frozenset(self.p.full_speed_pair_models)
        return runs_full_speed(view.job(job_id).spec, view.job(self.pair_of[job_id]).spec, models, self.p.seed)

    def _may_offer(self, spec: JobSpec, alloc: Allocation, largest: int) -> bool:
        """Whether a job just placed alone may take a partner later in the same decision
        (``partners_running_only`` keeps to jobs running before it). A placement that
        declared no GPU memory (a job measured only once placed, under
        ``pair_profiled_only``) holds its whole GPUs, so nobody may join it."""
        return (
            not self.p.partners_running_only
            and 0 < spec.num_gpus <= largest
            and len(alloc.placement) == 1
            and alloc.gpu_mem_gb is not None
            and spec.job_id in self.features
        )

    def _offer(self, view: ClusterView, partners: PartnerIndex, job_id: str, alloc: Allocation) -> None:
        """``job_id`` was just placed alone on one node: a partner for later jobs of this
        decision, as in the artifact's pass."""
        node = alloc.placement[0][0]
        candidate = self._describer(view)(job_id, node, self.priority[job_id])
        partners.add(candidate, node, view.cluster.nodes[node].gpu_mem_gb)

    def _release(self, view: ClusterView, job_id: str, ended: set[str], rule: str) -> None:
        """``job_id`` ended: its partner, if it had one, runs alone. Under the artifact's
        simulator's rule (``rule="newer"``) a newer partner left alone is locked: never
        offered as a partner again (its older partner, left alone, is free to take one)."""
        self.locked.discard(job_id)
        older = self.pair_of.pop(job_id, None)
        if older is not None:
            self.joined_by.pop(older, None)
        newer = self.joined_by.pop(job_id, None)
        if newer is None:
            return
        self.pair_of.pop(newer, None)
        if rule == "newer" and newer not in ended:
            self.locked.add(newer)
            self.running_partners.touch(view.job(newer).partition)

    def _declare_memory(self, view: ClusterView, spec: JobSpec, alloc: Allocation) -> Allocation:
        sharing = view.sharing
        if sharing is None or sharing.fractions or spec.job_id not in self.features or len(alloc.placement) != 1:
            return alloc
        node = alloc.placement[0][0]
        return Allocation(alloc.placement, alloc.plan, gpu_mem_gb=self._memory(view, spec.job_id, node))
