"""Lucid's non-intrusive profiler: a small partition where new jobs run first.

Hu's thesis chapter 4 and the Lucid artifact (``simulation/profiler/lgf.py``,
``utils.profiler_config``): a few nodes are set aside as the profiling cluster. A new
job that asks for at most ``max_gpus`` GPUs runs there exclusively, for at most
``seconds`` (T_prof). The queue is least-GPU-first, and the scan stops at the first job
that does not fit. A job that ends within T_prof completes there. Any other job is
stopped at T_prof and goes to the main queue with its measured features: GPU
utilisation, memory-bandwidth use and GPU memory. Larger jobs skip profiling, and their
features are measured once they run.

Defaults and their sources:

* T_prof: 200 s (thesis; artifact Venus; the artifact's Philly setting is 80 s);
* ``max_gpus``: 8 (artifact Venus: factor 4 x scale 2; Philly 2 x 2 = 4);
* profiler nodes: the artifact takes 2 nodes out of its one Philly VC, and 1 node out
  of each of two Venus VCs, and profiles every job of the cluster there. Our engine
  keeps each job inside its VC, so we take ``nodes`` (default 1) nodes out of every VC
  that has more. This is a named deviation (see the README fidelity table).

In simulation the measured features are the job's sharing profile
(``shapeshift.perf.colocation``), read as it is: the artifact's profiler and scorer read
the same measured figures of each configuration. ``noise`` > 0 (``profile_noise``, ours)
multiplies each figure by ``1 + U(-noise, noise)``, seeded per job.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shapeshift.model import JobSpec
from shapeshift.perf.colocation import SharingProfile, noisy, profile_of


@dataclass(frozen=True)
class ProfilerSettings:
    nodes: int = 1
    seconds: float = 200.0
    max_gpus: int = 8


def split_partition(nodes: np.ndarray, settings: ProfilerSettings) -> tuple[np.ndarray, np.ndarray]:
    """(profiler nodes, main nodes) of a partition: the first ``settings.nodes`` nodes,
    when the partition keeps at least one node for its main queue."""
    if settings.nodes <= 0 or len(nodes) <= settings.nodes:
        return nodes[:0], nodes
    return nodes[: settings.nodes], nodes[settings.nodes :]


def read(profile: SharingProfile, spec: JobSpec, seed: int, noise: float) -> SharingProfile:
    """What the profiler reads of ``profile`` for ``spec``: the figures themselves, or
    each times ``1 + U(-noise, noise)`` (seeded by job id) when ``noise`` > 0."""
    return noisy(profile, spec.job_id, seed, relative=noise) if noise > 0 else profile


def measure(spec: JobSpec, seed: int, noise: float = 0.0) -> SharingProfile:
    """What the profiler reads for a job in simulation: its sharing profile."""
    return read(profile_of(spec, seed), spec, seed, noise)


def wants_profiling(spec: JobSpec, settings: ProfilerSettings, profiler_gpus: int) -> bool:
    """Jobs of at most ``max_gpus`` GPUs that the profiling nodes can hold."""
    return 0 < spec.num_gpus <= min(settings.max_gpus, profiler_gpus)
