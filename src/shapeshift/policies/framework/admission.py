"""Admission ``load-based``: hold new jobs while the cluster's GPU demand is above a
multiple of its capacity (Blox, Agarwal et al., EuroSys 2024, Sec. 4.1, "Accept 1.2x").

The rule, as in Blox's ``admission_control/load_based_accept.py``: jobs wait in a FIFO
overflow queue; at each decision, while the GPU demand of all *active* jobs (every
admitted job not yet finished: running, preempted or waiting for GPUs) is at most
``threshold`` x the partition's GPUs, the next held job is admitted. The test comes
before the job is added, so demand may cross the threshold by one job (the paper: jobs
are held "once the number of GPUs requested by admitted jobs crosses a threshold").

Demand counts every active job, not only those this admission let in: a job that is
running was admitted by whoever started it (after ``auto`` switches admission policies,
say), and ``adopt`` hands over jobs admitted but still waiting. Per decision the work is
O(running + admitted jobs).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from shapeshift.engine.state import JobState
from shapeshift.policies.framework.composed import ADMISSIONS, AcceptAll, Admission
from shapeshift.policies.framework.registry import PolicyParams

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


class LoadBasedAdmission:
    """Admit held jobs FIFO while active demand <= ``threshold`` x partition GPUs (Blox)."""

    name = "load-based"
    admits_all = False

    def __init__(self, threshold: float = 1.2):
        if threshold <= 0:
            raise ValueError("load-based admission threshold must be > 0")
        self.threshold = threshold
        #: Active (admitted, unfinished) jobs per partition: running, preempted or waiting.
        self._active: dict[str, dict[str, int]] = {}

    def adopt(self, view: ClusterView, job_ids: Iterable[str]) -> None:
        """Count ``job_ids`` (jobs a previous admission policy let in) as active."""
        for job_id in job_ids:
            status = view.job(job_id)
            self._active.setdefault(status.partition, {})[job_id] = status.spec.num_gpus

    def admit(self, view: ClusterView, partition: str) -> Iterable[str]:
        active = self._active.setdefault(partition, {})
        for job_id in view.running(partition):  # running jobs are active, whoever started them
            if job_id not in active:
                active[job_id] = view.job(job_id).spec.num_gpus
        for job_id in [j for j in active if view.job(j).state not in _ACTIVE_STATES]:
            del active[job_id]
        demand = sum(active.values())
        limit = self.threshold * view.capacity_gpus(partition)
        for job_id in view.pending(partition):
            if job_id in active:
                continue
            if demand > limit:
                break  # FIFO release: nobody overtakes the oldest held job
            active[job_id] = view.job(job_id).spec.num_gpus
            demand += active[job_id]
        return [j for j in view.pending(partition) if j in active]


_ACTIVE_STATES = (JobState.PENDING, JobState.RUNNING)


ADMISSIONS[LoadBasedAdmission.name] = LoadBasedAdmission


class AdmissionParams(PolicyParams):
    """Admission parameters shared by the composed policies of the library."""

    admission: Literal["accept-all", "load-based"] = "accept-all"
    load_threshold: float = Field(1.2, gt=0)


def make_admission(params: AdmissionParams) -> Admission:
    if params.admission == LoadBasedAdmission.name:
        return LoadBasedAdmission(params.load_threshold)
    return AcceptAll()
