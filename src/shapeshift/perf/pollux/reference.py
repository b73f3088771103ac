"""A Pollux job's length at what it asked for, computed from the application's profile.

The Pollux workload files (``name, time, application, num_replicas, batch_size``) carry
no durations: the Pollux simulator trains every job to the end of its application's
training trace. A duration-based replay needs each job's length at its own GPU count
and batch, which the artifact's workload generator estimates the same way
(``get_configurations`` in ``simulator/applications.py`` of petuum/adaptdl): the job runs
at its batch on its replicas packed 4 per node (the 16 x 4-GPU cluster) until
``max_epochs`` are trained, epoch by epoch as :class:`.ground_truth.PolluxGroundTruth`
charges it. Computed for any combination (the ground truth clamps a local batch outside
the measured range to it), so every row of a workload file has a length.
"""

from __future__ import annotations

import functools
from pathlib import Path

from shapeshift.engine.batching import split_batch
from shapeshift.model import Allocation, BatchSpec, JobSpec, Resources
from shapeshift.perf.pollux.profiles import NAMESPACE, ApplicationProfile, load_profiles

GPUS_PER_NODE = 4


def packed(replicas: int, per_node: int = GPUS_PER_NODE) -> tuple[int, ...]:
    """Replicas filled ``per_node`` to a node: 10 -> (4, 4, 2)."""
    placement: tuple[int, ...] = ()
    while sum(placement) < replicas:
        placement = (*placement, min(replicas - sum(placement), per_node))
    return placement


def batch_spec(profile: ApplicationProfile, size: int) -> BatchSpec:
    """A job's batch: ``size`` within the application's validated range, adaptive except
    NCF's (the Pollux simulator pins NCF's batch, ``simulator/simulator.py``)."""
    return BatchSpec(
        size,
        profile.init_batch,
        profile.max_batch,
        profile.min_local,
        profile.max_local,
        adaptive=profile.name != "ncf",
    )


@functools.lru_cache(maxsize=4096)
def run_length(root: str, app: str, replicas: int, size: int) -> tuple[int, float]:
    """(optimiser steps, seconds) for ``app`` at global batch ``size`` on ``replicas``
    GPUs packed 4 per node, trained to ``max_epochs`` at that fixed batch."""
    from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth

    profile = load_profiles(root)[app]
    batch = BatchSpec(size, profile.init_batch, profile.max_batch, profile.min_local, profile.max_local)
    placement = packed(replicas)
    truth = PolluxGroundTruth(Path(root))
    job = JobSpec("reference", 0.0, replicas, iterations=0, model=f"{NAMESPACE}{app}", batch=batch)
    alloc = Allocation(tuple((i, Resources(g)) for i, g in enumerate(placement)))
    total = truth.total_work(job)
    split = split_batch(batch, size, replicas)
    step, sync = profile.step_sync(placement, split.atomic)
    per_step = step + split.accum * (step - sync)
    done = seconds = 0.0
    while done < total:
        rate, horizon = truth.rate_at(job, alloc, done)
        end = min(horizon, total)
        seconds += (end - done) / rate
        done = end
    return round(seconds / per_step), seconds


def fixed_batch_throughput(root: str, app: str, gpu_type: str | None, gpus: int, per_node: int, size: int) -> float:
    """Examples/s of ``app`` at a fixed global batch ``size`` on ``gpus`` GPUs of
    ``gpu_type`` packed ``per_node`` to a node, from that type's profile, as the Sia
    artifact rates a job for Gavel (``gavel.py``, ``predict_xput``): the batch split with
    the placement's per-GPU limit (``get_max_local_bsz``,
    :meth:`.ApplicationProfile.local_cap`), one accumulation at least on a single GPU, measured step
    plus ``accum x (step - sync)``. Statistical efficiency is left out (the batch is fixed)."""
    import math

    from shapeshift.perf.pollux.profiles import load_profile

    profile = load_profile(root, app, gpu_type)
    if profile is None:
        return 0.0
    placement = packed(gpus, per_node)
    local = math.ceil(size / gpus - 1e-8)
    accum = math.ceil(local / profile.local_cap(placement) - 1e-8) - 1
    if gpus == 1:
        accum = max(1, accum)
    atomic = math.ceil(local / (accum + 1) - 1e-8)
    atomic = max(1, min(atomic, int(profile.max_batch / (gpus * (accum + 1)))))
    step, sync = profile.step_sync(placement, atomic)
    return size / (step + accum * (step - sync))
