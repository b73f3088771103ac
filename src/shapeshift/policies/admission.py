"""Admission ``load-based``: admit while the admitted GPU demand stays under a multiple of capacity.

Blox (Agarwal et al., EuroSys 2024) composes schedulers from admission, ordering and
placement, and shows that admission alone changes JCT a lot: its "Accept 1.2x" policy
admits a job only while the GPU demand of all admitted, unfinished jobs is at most
``threshold`` x the cluster's GPUs, and releases held jobs first come, first served as
admitted jobs finish. Admitted jobs never leave the admitted set until they finish
(a preempted job stays admitted), so a preemptive ordering only reorders what was let in.

Per decision the work is O(admitted jobs): the admitted set is bounded by the threshold,
and the scan over the held queue stops at the first job that does not fit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from shapeshift.engine.state import JobState
from shapeshift.policies.composed import ADMISSIONS, AcceptAll, Admission
from shapeshift.policies.registry import PolicyParams

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


class LoadBasedAdmission:
    """Admit waiting jobs FIFO while admitted demand <= ``threshold`` x partition GPUs."""

    name = "load-based"
    admits_all = False

    def __init__(self, threshold: float = 1.2):
        if threshold <= 0:
            raise ValueError("load-based admission threshold must be > 0")
        self.threshold = threshold
        self._admitted: dict[str, dict[str, int]] = {}
        self._demand: dict[str, int] = {}

    def admit(self, view: ClusterView, partition: str) -> Iterable[str]:
        admitted = self._admitted.setdefault(partition, {})
        demand = self._demand.get(partition, 0)
        finished = [j for j in admitted if view.job(j).state is JobState.COMPLETED]
        for job_id in finished:
            demand -= admitted.pop(job_id)
        limit = self.threshold * view.capacity_gpus(partition)
        pending = view.pending(partition)
        for job_id in pending:
            if job_id in admitted:
                continue
            gpus = view.job(job_id).spec.num_gpus
            if demand > 0 and demand + gpus > limit:
                break  # FIFO release: nobody overtakes the oldest held job
            admitted[job_id] = gpus
            demand += gpus
        self._demand[partition] = demand
        return [j for j in admitted if j in pending]


ADMISSIONS[LoadBasedAdmission.name] = LoadBasedAdmission


class AdmissionParams(PolicyParams):
    """Admission parameters shared by the composed policies of the library."""

    admission: Literal["accept-all", "load-based"] = "accept-all"
    load_threshold: float = Field(1.2, gt=0)


def make_admission(params: AdmissionParams) -> Admission:
    if params.admission == LoadBasedAdmission.name:
        return LoadBasedAdmission(params.load_threshold)
    return AcceptAll()
