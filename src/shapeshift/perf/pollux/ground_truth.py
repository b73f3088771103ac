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
  valid until the next epoch boundary (``rate_at``), where the efficiency changes.
"""

from __future__ import annotations

import math
from pathlib import Path

from shapeshift.engine.batching import batch_of, split_batch
from shapeshift.model import Allocation, JobSpec
from shapeshift.perf.pollux.profiles import ApplicationProfile, app_name, efficiency, load_profiles


class PolluxGroundTruth:
    """``ThroughputModel`` with progress-dependent rates (``rate_at``) for Pollux jobs."""

    def __init__(self, root: str | Path):
        self.root = str(Path(root).resolve())
        self.apps = load_profiles(self.root)

    def profile(self, job: JobSpec) -> ApplicationProfile:
        app = self.apps.get(app_name(job.model))
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
        app = self.profile(job)
        assert job.batch is not None
        replicas = allocation.gpus
        if replicas < 1:
            return 0.0, math.inf
        split = split_batch(job.batch, batch_of(job.batch, allocation), replicas)
        step, sync = app.step_sync(tuple(r.gpus for _, r in allocation.placement), split.atomic)
        seconds = step + split.accum * (step - sync)
        size = split.global_batch
        # 1e-9 steps of slack: a job exactly at a boundary (done = boundary x init, in
        # floating point) is in the next epoch.
        epoch = app.epoch_of(done / app.init_batch + 1e-9)
        sqr, var = app.grad_stats(size, epoch)
        rate = size * efficiency(sqr, var, size, app.init_batch) / seconds
        horizon = app.boundaries[epoch + 1] * app.init_batch if epoch + 1 < app.max_epochs else math.inf
        return rate, horizon
