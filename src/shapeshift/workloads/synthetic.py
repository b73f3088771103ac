"""Seeded synthetic workloads, so every command runs without any trace file.

The job-size mix and the log-normal durations are shaped like the Philly trace (most
jobs use one GPU and run under an hour; a heavy tail runs for days), which is what
makes queueing policies differ. Same seed, same workload, on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shapeshift.errors import InputError
from shapeshift.model import JobSpec
from shapeshift.workloads.workload import MAX_JOBS, Workload

#: GPU counts and their shares of jobs: shaped like Philly (82k jobs: 93% 1-GPU,
#: 2% 2, 2% 4, 2% 8, rest larger), with larger jobs a bit more common so that a small
#: demo cluster shows fragmentation and head-of-line blocking.
DEFAULT_SIZE_MIX: tuple[tuple[int, float], ...] = ((1, 0.70), (2, 0.10), (4, 0.10), (8, 0.08), (16, 0.02))


@dataclass(frozen=True)
class PoissonSpec:
    """Poisson arrivals with log-normal durations (seconds)."""

    jobs: int = 300
    rate_per_hour: float = 12.0
    median_duration: float = 1800.0
    duration_sigma: float = 1.5
    max_duration: float = 7 * 24 * 3600.0
    size_mix: tuple[tuple[int, float], ...] = DEFAULT_SIZE_MIX
    seed: int = 0


def poisson_workload(spec: PoissonSpec = PoissonSpec(), name: str = "synthetic-poisson") -> Workload:
    """Generate ``spec.jobs`` jobs; every random draw comes from one seeded generator."""
    if spec.jobs > MAX_JOBS:
        raise InputError(f"jobs must be at most {MAX_JOBS:,}, got {spec.jobs}", field="jobs")
    if spec.jobs < 0 or spec.rate_per_hour <= 0 or spec.median_duration <= 0:
        raise ValueError("jobs must be >= 0 and rate_per_hour, median_duration > 0")
    rng = np.random.default_rng(spec.seed)
    gaps = rng.exponential(3600.0 / spec.rate_per_hour, size=spec.jobs)
    submit = np.round(np.cumsum(gaps) - (gaps[0] if spec.jobs else 0.0), 3)
    sizes, weights = zip(*spec.size_mix, strict=True)
    probs = np.asarray(weights, dtype=float) / float(np.sum(weights))
    gpus = rng.choice(np.asarray(sizes), size=spec.jobs, p=probs)
    duration = rng.lognormal(np.log(spec.median_duration), spec.duration_sigma, size=spec.jobs)
    duration = np.round(np.clip(duration, 10.0, spec.max_duration), 1)
    jobs = [
        JobSpec(job_id=f"j{i:05d}", submit_time=t, num_gpus=g, duration=d)
        for i, (t, g, d) in enumerate(zip(submit.tolist(), gpus.tolist(), duration.tolist(), strict=True))
    ]
    return Workload.of_jobs(name, jobs)
