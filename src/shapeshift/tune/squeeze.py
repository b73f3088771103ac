"""Bubble squeezing in simulation: tuning jobs run in the idle share of pipeline jobs.

Why: a pipeline-parallel job with p stages and m micro-batches keeps each GPU busy for m
of every m+p-1 slots (GPipe's schedule; the Rubick performance model's pipeline term
``t_fwd * g/p * (m+p-1)`` in ``shapeshift/perf/rubick.py``), so a fraction
``(p-1)/(m+p-1)`` of its GPU time is bubble. Hydro squeezes tuning trials into those
bubbles (Hydro, OSDI'23 §5 "Bubble Squeezing"; Hu's thesis, chapter 3): in its
measurements a squeezed trial reached about 15% of its exclusive throughput, with no
evident slowdown of the host.

Built on the engine's shared-GPU support (``Allocation.devices``/``gpu_mem_gb``, the
``GpuLedger``, interference applied exactly between events; docs/sharing.md):

* ``BubbleInterference`` is the interference model: a tuning job (``JobSpec.tuning``)
  beside a pipeline host runs at ``share`` of its exclusive speed, the host at
  ``1 - host_slowdown``; every other pair falls back to the default model.
* ``BubbleSqueeze`` wraps any policy as the ``bubble`` placement option: it lets the
  inner policy decide, gives every pipeline job it launches a declared GPU memory
  (leaving ``tuning_mem_gb`` for a guest), and places tuning jobs the inner policy left
  waiting onto running hosts' GPUs, one guest per GPU. When the host leaves, the guest
  keeps its GPU and runs at full speed. With ``promote`` a squeezed job moves to a whole
  GPU as soon as the inner policy leaves one empty (paying the restart overhead).

| parameter | default | source |
| --- | --- | --- |
| ``share`` | 0.15 | thesis ch. 3 / OSDI'23 §5: ~15% of exclusive throughput |
| ``host_slowdown`` | 0.0 | same: no evident slowdown of the host |
| ``cap_at_bubble`` | False | ours: never faster than the idle share (p-1)/(m+p-1) |
| ``tuning_mem_gb`` | 8.0 | ours: GPU memory a squeezed tuning job needs |
| ``promote`` | False | ours: move a squeezed job to a whole GPU the inner policy left empty |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from shapeshift.engine.contract import Policy
from shapeshift.model import Allocation, ExecutionPlan, JobSpec, Resources, Schedule
from shapeshift.perf.colocation import InterferenceModel, UtilisationInterference

SQUEEZED_SHARE = 0.15
HOST_SLOWDOWN = 0.0


def bubble_fraction(plan: ExecutionPlan | None) -> float:
    """Idle share of a pipeline job's GPU time: (p-1)/(m+p-1); 0 without pipelining."""
    if plan is None or plan.pp <= 1:
        return 0.0
    return (plan.pp - 1) / (plan.micro_batches + plan.pp - 1)


def is_host(job: JobSpec) -> bool:
    return job.tuning is None and bubble_fraction(job.plan) > 0


@dataclass(frozen=True)
class BubbleInterference:
    """Pair speeds for squeezed tuning jobs and their pipeline hosts (module docstring)."""

    share: float = SQUEEZED_SHARE
    host_slowdown: float = HOST_SLOWDOWN
    cap_at_bubble: bool = False
    fallback: InterferenceModel = field(default_factory=UtilisationInterference)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.share) and 0 < self.share <= 1):
            raise ValueError(f"share must be in (0, 1], got {self.share}")
        if not (math.isfinite(self.host_slowdown) and 0 <= self.host_slowdown < 1):
            raise ValueError(f"host_slowdown must be in [0, 1), got {self.host_slowdown}")

    def pair_speed(self, job: JobSpec, partner: JobSpec) -> float:
        if job.tuning is not None and is_host(partner):
            return min(self.share, bubble_fraction(partner.plan)) if self.cap_at_bubble else self.share
        if partner.tuning is not None and is_host(job):
            return 1.0 - self.host_slowdown
        return self.fallback.pair_speed(job, partner)


class BubbleSqueeze:
    """The ``bubble`` placement option around any policy (module docstring).

    Contract: the inner policy's decisions stand; this wrapper only (1) adds a declared
    GPU memory to the allocations of pipeline jobs it launches, so a guest fits, and
    (2) launches waiting tuning jobs on hosts' GPUs with one tuning job per GPU. A
    tuning job it cannot place keeps the inner policy's reason. Needs a cluster with
    ``gpu_share_limit`` of at least 2; elsewhere it passes the inner schedule through.
    """

    def __init__(self, inner: Policy, tuning_mem_gb: float = 8.0, promote: bool = False):
        if not (math.isfinite(tuning_mem_gb) and tuning_mem_gb > 0):
            raise ValueError(f"tuning_mem_gb must be a finite number > 0, got {tuning_mem_gb}")
        self.inner = inner
        self.name = f"{inner.name}+bubble"
        self.triggers = inner.triggers
        self.default_round = inner.default_round
        self.tuning_mem_gb = tuning_mem_gb
        self.promote = promote
        self.squeezed = 0
        self.promoted = 0

    def decide(self, view) -> Schedule:
        schedule = self.inner.decide(view)
        ledger = view.sharing
        if ledger is None:
            return schedule
        changes = dict(schedule.changes)
        cluster = view.cluster
        launched_host = False
        for job_id, alloc in schedule.changes.items():
            if alloc is None or alloc.shares or job_id in view.allocations:
                continue
            if is_host(view.job(job_id).spec):
                node_mem = min(cluster.nodes[n].gpu_mem_gb for n, _ in alloc.placement)
                changes[job_id] = replace(alloc, gpu_mem_gb=node_mem - self.tuning_mem_gb)
                launched_host = True
        stopping = {j for j, a in schedule.changes.items() if a is None}
        guests = self._free_bubbles(view, ledger, stopping)
        for partition in view.partitions:
            for job_id in view.pending(partition):
                if not guests:
                    break
                spec = view.job(job_id).spec
                if spec.tuning is None or schedule.allocation(job_id) is not None:
                    continue
                node, gpu = guests.pop(0)
                changes[job_id] = Allocation(((node, Resources(1, spec.num_cpus, spec.mem_gb)),),
                                             devices=((node, gpu),), gpu_mem_gb=self.tuning_mem_gb)
                self.squeezed += 1
        promoted = self._promote(view, ledger, changes) if self.promote else False
        waiting_tuning = (launched_host or promoted) and any(
            view.job(j).spec.tuning is not None and j not in changes
            for p in view.partitions for j in view.pending(p))
        wake = schedule.wake_at
        if waiting_tuning:  # new hosts get their GPUs when applied: look again an instant later
            wake = view.now if wake is None else min(wake, view.now)
        return Schedule(base=schedule.base, changes=changes, reasons=schedule.reasons,
                        default_reason=schedule.default_reason, wake_at=wake)

    def _promote(self, view, ledger, changes: dict[str, Allocation | None]) -> bool:
        """Move squeezed tuning jobs onto whole GPUs the inner policy left empty."""
        free = view.scratch()
        for job_id, alloc in changes.items():
            if alloc is not None and alloc.devices is None and job_id not in view.allocations:
                free.take(alloc)
        moved = False
        for job_id in sorted(view.allocations):
            alloc = view.allocations[job_id]
            spec = view.job(job_id).spec
            if spec.tuning is None or alloc.devices is None or job_id in changes:
                continue
            if not any(len(ledger.occupants(n, g)) > 1 for n, g in ledger.devices.get(job_id, ())):
                continue  # already alone on its GPU (the host left)
            target = Allocation(((0, Resources(1, spec.num_cpus, spec.mem_gb)),))
            for node in range(len(free.gpus)):
                target = Allocation(((node, Resources(1, spec.num_cpus, spec.mem_gb)),))
                if free.fits(target):
                    break
            else:
                break
            free.take(target)
            changes[job_id] = target
            self.promoted += 1
            moved = True
        return moved

    def _free_bubbles(self, view, ledger, stopping: set[str]) -> list[tuple[int, int]]:
        """GPUs of running hosts with room for a guest and no guest yet, in a stable order."""
        found: list[tuple[int, int]] = []
        for job_id in sorted(view.allocations):
            alloc = view.allocations[job_id]
            if job_id in stopping or alloc.gpu_mem_gb is None or not is_host(view.job(job_id).spec):
                continue
            for node, gpu in ledger.devices.get(job_id, ()):
                occupants = ledger.occupants(node, gpu)
                if len(occupants) >= ledger.limit or ledger.free_memory(node, gpu) < self.tuning_mem_gb:
                    continue
                if any(view.job(j).spec.tuning is not None for j in occupants):
                    continue
                found.append((node, gpu))
        return found
