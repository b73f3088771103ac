"""Batch-size arithmetic the engine and executors share (adaptive batch sizes).

A goodput policy (Pollux, Sia) may change only the batch size of a running job. That is
not a restart: the job keeps its GPUs and adapts in place, so the engine treats it apart
from a move. The split of a global batch over replicas (local batch, gradient
accumulation) follows the Pollux artifact (``simulator/simulator.py``,
``Job.update_local_bsz``), so simulated and policy-side arithmetic agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shapeshift.model import Allocation, BatchSpec

_EPS = 1e-8


def rebatch_only(previous: Allocation, desired: Allocation) -> bool:
    """True when ``desired`` differs from ``previous`` in its batch size alone."""
    return (
        previous.batch_size != desired.batch_size
        and previous.placement == desired.placement
        and previous.plan == desired.plan
    )


@dataclass(frozen=True, slots=True)
class BatchSplit:
    """How a global batch runs on ``replicas`` GPUs: ``atomic`` examples per GPU per
    micro-step, ``accum`` extra accumulation micro-steps per optimiser step."""

    replicas: int
    atomic: int
    accum: int

    @property
    def global_batch(self) -> int:
        return self.replicas * self.atomic * (self.accum + 1)


def split_batch(batch: BatchSpec, size: int, replicas: int) -> BatchSplit:
    """Local batch, gradient accumulation and atomic batch for a global ``size``.

    As the Pollux simulator does for a job with a target batch: the local batch is
    ``ceil(size / replicas)``; above ``max_local`` it is accumulated; a single GPU above
    the initial batch accumulates at least once (gradient statistics need two
    micro-batches); the atomic batch never lets the global batch pass ``max_size``.
    """
    local = math.ceil(size / replicas - _EPS)
    accum = math.ceil(local / batch.max_local - _EPS) - 1
    if replicas == 1 and size > batch.initial:
        accum = max(1, accum)
    atomic = math.ceil(local / (accum + 1) - _EPS)
    atomic = max(1, min(atomic, int(batch.max_size / (replicas * (accum + 1)))))
    return BatchSplit(replicas, atomic, accum)


def batch_of(batch: BatchSpec, allocation: Allocation) -> int:
    """The global batch a job runs at on ``allocation``: the policy's choice where it made
    one, else the job's own size.

    A policy chooses the batch of an adaptive job, and may choose one for a job its
    workload marks fixed where the system it follows tunes that job's batch (Sia's
    artifact tunes every job's, NCF's included, which the Pollux simulator fixes); a
    policy that leaves ``batch_size`` unset runs the job at its own size."""
    if allocation.batch_size is not None:
        return allocation.batch_size
    return batch.size
