"""``tiresias``: discretized two-dimensional LAS with model-aware consolidation.

Tiresias (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning",
NSDI 2019) schedules without knowing job durations:

* **2D-LAS, discretized.** A job's attained service is GPUs x time (GPU-seconds). Jobs
  sit in K priority queues; a job starts in queue 0 and moves down to queue i once its
  service passes threshold i (``threshold`` for the first boundary, each next one
  ``threshold_growth`` times higher). Higher queues run first; within a queue jobs run
  in FIFO order of submission, which avoids the thrashing of continuous LAS. The policy
  is preemptive: a job demoted below a waiting job's queue gives up its GPUs (paying the
  checkpoint-restore penalty when it resumes).
* **Starvation promotion.** A job that has waited ``promote_after`` seconds since it
  last entered the queue is promoted to queue 0 and its service count restarts from
  there (0 disables promotion).
* **Model-aware placement.** Only models whose performance depends on consolidation
  (the catalog's ``placement_sensitive`` flag; unknown models count as sensitive) are
  packed onto as few nodes as possible; insensitive ones take any free GPUs.

Demotion happens as service accrues, not at events, so the policy also decides every
round (``--round``, default 60 s) on top of arrivals and completions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, JobSpec
from shapeshift.policies.admission import AdmissionParams, make_admission
from shapeshift.policies.base import ARRIVAL, COMPLETION, ROUND
from shapeshift.policies.composed import ComposedPolicy
from shapeshift.policies.placement import Consolidated, allocation_for
from shapeshift.policies.registry import register
from shapeshift.workloads.catalog import lookup

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


class AnyFit:
    """Best single-node fit if there is one, else GPUs from the nodes with the most free
    GPUs first (fewest nodes, no whole-node requirement)."""

    name = "any-fit"

    def find(self, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
        single = Consolidated().find(job, nodes, free)
        if single is not None or job.num_gpus == 0:
            return single
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


class DiscretizedLas:
    """Priority = (queue index, submit time); queue index from service since the last promotion."""

    name = "tiresias"
    preemptive = True

    def __init__(self, thresholds: tuple[float, ...], promote_after: float):
        self.thresholds = thresholds
        self.promote_after = promote_after
        #: job -> (queued_since at promotion, attained at promotion)
        self._promoted: dict[str, tuple[float, float]] = {}

    def prepare(self, view: ClusterView) -> None:
        if self.promote_after <= 0:
            return
        limit = view.now - self.promote_after
        for partition in sorted(view.dirty_partitions):
            # The queue is in order of (re-)entry, so the starving jobs are a prefix.
            for job_id in view.pending(partition):
                status = view.job(job_id)
                if status.queued_since > limit:
                    break
                mark = self._promoted.get(job_id)
                if mark is None or mark[0] != status.queued_since:
                    self._promoted[job_id] = (status.queued_since, view.attained(job_id))

    def queue_of(self, view: ClusterView, job_id: str) -> int:
        service = view.attained(job_id)
        mark = self._promoted.get(job_id)
        if mark is not None:
            service -= mark[1]
        level = 0
        for bound in self.thresholds:
            if service < bound:
                break
            level += 1
        return level

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        def key(job_id: str) -> tuple[int, float, str]:
            return (self.queue_of(view, job_id), view.job(job_id).spec.submit_time, job_id)

        return sorted(jobs, key=key)


class TiresiasParams(AdmissionParams):
    queues: int = Field(2, ge=1, le=16)
    threshold: float = Field(3600.0, gt=0)
    threshold_growth: float = Field(10.0, ge=1)
    promote_after: float = Field(14400.0, ge=0)
    round: float = Field(60.0, gt=0)


@register(
    "tiresias",
    "Discretized 2D-LAS: K queues by GPU-seconds, FIFO within a queue, starvation promotion, "
    "consolidates placement-sensitive models only.",
    TiresiasParams,
)
def make_tiresias(params: TiresiasParams) -> ComposedPolicy:
    thresholds = tuple(params.threshold * params.threshold_growth**i for i in range(params.queues - 1))
    return ComposedPolicy(
        name="tiresias",
        admission=make_admission(params),
        ordering=DiscretizedLas(thresholds, params.promote_after),
        placement=ModelAwarePlacement(),
        triggers=frozenset({ARRIVAL, COMPLETION, ROUND}),
        default_round=params.round,
    )
