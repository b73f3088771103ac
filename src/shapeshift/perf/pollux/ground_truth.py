"""Simulation ground truth for Pollux jobs: measured step times and gradient statistics.

Policies never see this object (they get :mod:`.goodput`'s fitted model). It answers
the executor as the Pollux artifact's simulator charges a job (``simulator/simulator.py``,
``Job.step``), in closed form between epoch boundaries:

* work = examples at the job's initial batch until ``max_epochs`` epochs are trained;
* the batch a job runs at is the policy's choice for an adaptive job, else its own
  (``engine.batching.batch_of``), split over replicas with gradient accumulation
  (``split_batch``);
* step time = measured step of the placement at the atomic batch plus
  ``accum x (step - sync)`` for the accumulation micro-steps;
* rate = global batch x statistical efficiency at (batch, current epoch) / step time,
  valid until the next epoch boundary (``rate_at``), where the efficiency changes;
* on a cluster of several GPU types (the Sia artifact's simulator, ``sia-simulator/job.py``,
  ``Job.step``), step times come from the profile of the type the job runs on
  (``placements-<type>.csv``/``scalability-<type>.csv`` where they exist,
  :func:`.profiles.load_profile`); an allocation over several types runs on its majority
  type's profile (ties: the type of its first node); a local batch above what was
  measured on the placement accumulates (:meth:`.ApplicationProfile.local_cap`);
* ``calibrate``: the Sia artifact's calibration (``simulator_config.py``, ``SLOWDOWNS``:
  every application's goodput divided by a factor fitted to its real runs). Off by default,
  as in the Pollux simulator and the Sia artifact's homogeneous runs.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from shapeshift.engine.batching import batch_of, split_batch
from shapeshift.model import Allocation, BatchSpec, JobSpec
from shapeshift.perf.pollux.profiles import ApplicationProfile, app_name, efficiency, load_profile, load_profiles

#: Per-application slowdowns of the Sia artifact's calibration (``simulator_config.py``).
SIA_SLOWDOWNS: dict[str, float] = {
    "cifar10": 1.8,
    "imagenet": 1.2,
    "yolov3": 1.2,
    "bert": 1.2,
    "deepspeech2": 1.2,
    "ncf": 1.5,
}


def typed_limits(batch: BatchSpec, app: ApplicationProfile, shape: tuple[int, ...]) -> BatchSpec:
    """``batch`` with the per-GPU limit of a typed profile on ``shape`` (:meth:`.local_cap`)."""
    if app.gpu_type is None:
        return batch
    cap = app.local_cap(shape)
    return batch if cap == batch.max_local else replace(batch, max_local=cap, min_local=min(batch.min_local, cap))


class PolluxGroundTruth:
    """``ThroughputModel`` with progress-dependent rates (``rate_at``) for Pollux jobs."""

    def __init__(self, root: str | Path, node_types: tuple[str, ...] = (), calibrate: bool = False):
        self.root = str(Path(root).resolve())
        self.apps = load_profiles(self.root)
        self.node_types = node_types
        self.calibrate = calibrate

    def gpu_type(self, allocation: Allocation) -> str | None:
        """The type whose profile an allocation runs on (its majority type)."""
        if not self.node_types:
            return None
        counts: dict[str, int] = {}
        for n, r in allocation.placement:
            t = self.node_types[n] if n < len(self.node_types) else ""
            counts[t] = counts.get(t, 0) + r.gpus
        if not counts:
            return None
        first = self.node_types[allocation.placement[0][0]] if allocation.placement[0][0] < len(self.node_types) else ""
        best = max(counts.values())
        return first if counts.get(first) == best else min(t for t, c in counts.items() if c == best)

    def profile(self, job: JobSpec, gpu_type: str | None = None) -> ApplicationProfile:
        app = self.apps.get(app_name(job.model))
        if app is not None and gpu_type:
            app = load_profile(self.root, app.name, gpu_type) or app
        if app is None or job.batch is None:
            raise ValueError(
                f"job {job.job_id}: the pollux model needs a Pollux application with a batch size "
                f"(known: {', '.join(sorted(self.apps))}), got model {job.model!r}"
            )
        return app

    def total_work(self, job: JobSpec) -> float:
        app = self.profile(job)
        return app.total_steps * app.init_batch

    def target_rate(self, job: JobSpec) -> float | None:
        return None

    def rate(self, job: JobSpec, allocation: Allocation) -> float:
        return self.rate_at(job, allocation, 0.0)[0]

    def rate_at(self, job: JobSpec, allocation: Allocation, done: float) -> tuple[float, float]:
        """(examples/s at the initial batch, progress until which that rate holds)."""
        app = self.profile(job, self.gpu_type(allocation))
        assert job.batch is not None
        replicas = allocation.gpus
        if replicas < 1:
            return 0.0, math.inf
        shape = tuple(r.gpus for _, r in allocation.placement)
        batch = typed_limits(job.batch, app, shape)
        split = split_batch(batch, batch_of(batch, allocation), replicas)
        step, sync = app.step_sync(shape, split.atomic)
        seconds = step + split.accum * (step - sync)
        size = split.global_batch
        # 1e-9 steps of slack: a job exactly at a boundary (done = boundary x init, in
        # floating point) is in the next epoch.
        epoch = app.epoch_of(done / app.init_batch + 1e-9)
        sqr, var = app.grad_stats(size, epoch)
        rate = size * efficiency(sqr, var, size, app.init_batch) / seconds
        if self.calibrate:
            rate /= SIA_SLOWDOWNS.get(app.name, 1.0)
        horizon = app.boundaries[epoch + 1] * app.init_batch if epoch + 1 < app.max_epochs else math.inf
        return rate, horizon
