"""Synergy's published per-model sensitivity to CPUs and host memory (figures only).

Synergy (Mohan et al., OSDI 2022, Sec. 3 and 5.1) profiles each model's throughput per
GPU over CPUs and DRAM per GPU on V100 servers with 24 CPUs, 500 GB and 8 GPUs, so the
GPU-proportional share is 3 CPUs and 62.5 GB per GPU. Its simulator (msr-fiddle/synergy)
keeps one profile per model in ``simulator/models/<model>_1.py`` and uses it for every GPU
count (``jobs/model.py`` ``use_scores_from_tput``):

* ``tput``: throughput relative to the proportional share, rows = CPUs per GPU at
  :data:`CPU_GRID` (``jobs/job.py`` ``cpu_val``), columns = GB per GPU at
  :data:`MEM_GRID` (``mem_val``);
* ``cpus``, ``mem``: the job's demand per GPU (the fewest resources reaching its best
  throughput), and ``speedup``: its throughput there;
* ``iter_time``: seconds per iteration at the proportional share.

The numbers below are those files' figures, transcribed; each profile names its file.
Models whose matrix is all ones (gnmt, transformer, lstm, bert, vae) are insensitive:
their demand (1 CPU, ``int(62.5 / 3)`` = 20 GB per GPU) is below the proportional share, at the same speed.

Between grid points the speed is interpolated linearly in CPUs and in memory (Synergy's
own simulator interpolates linearly between the proportional share and the demand when a
demand is capped by the server, ``jobs/workload.py`` ``add_synergy_profile``); outside
the grid it is the nearest edge's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: CPUs per GPU of the profile rows (``jobs/job.py`` ``cpu_val``).
CPU_GRID: tuple[float, ...] = (1, 2, 3, 4, 5, 6, 9, 12, 24)
#: GB of host memory per GPU of the profile columns (``jobs/job.py`` ``mem_val``).
MEM_GRID: tuple[float, ...] = (20.83, 62.5, 125, 187.5, 250)
#: The GPU-proportional share per GPU on Synergy's servers (24 CPUs, 500 GB, 8 GPUs), at
#: which every profile's speed is 1 and its ``iter_time`` was measured.
PROPORTIONAL_CPUS_PER_GPU = 3.0
PROPORTIONAL_GB_PER_GPU = 62.5


@dataclass(frozen=True)
class SynergyProfile:
    """One model's profile (see module doc); ``rows`` follow :data:`CPU_GRID` and
    columns :data:`MEM_GRID`."""

    model: str
    iteration_seconds: float
    cpus_per_gpu: float
    gb_per_gpu: float
    speedup: float
    rows: tuple[tuple[float, ...], ...]
    source: str

    @property
    def sensitive(self) -> bool:
        return any(v != 1.0 for row in self.rows for v in row)

    def speed(self, cpus_per_gpu: float, gb_per_gpu: float) -> float:
        """Throughput per GPU with these resources, relative to the proportional share."""
        if not (math.isfinite(cpus_per_gpu) and math.isfinite(gb_per_gpu)):
            raise ValueError("CPUs and memory per GPU must be finite")
        table = np.asarray(self.rows, dtype=float)
        by_cpu = [float(np.interp(cpus_per_gpu, CPU_GRID, table[:, k])) for k in range(len(MEM_GRID))]
        return float(np.interp(gb_per_gpu, MEM_GRID, by_cpu))


def _flat(model: str, seconds: float) -> SynergyProfile:
    ones = tuple((1.0,) * len(MEM_GRID) for _ in CPU_GRID)
    return SynergyProfile(model, seconds, 1.0, 20.0, 1.0, ones, f"simulator/models/{model}_1.py")


def _rows(*rows: tuple[float, ...]) -> tuple[tuple[float, ...], ...]:
    assert len(rows) == len(CPU_GRID) and all(len(r) == len(MEM_GRID) for r in rows)
    return rows


def _same(*per_cpu: float) -> tuple[tuple[float, ...], ...]:
    """Rows whose speed is 0.1 at the smallest memory and the same at every other."""
    return _rows(*((0.1, v, v, v, v) for v in per_cpu))


def _memory_bound(best: float) -> tuple[tuple[float, ...], ...]:
    """alexnet's and shufflenet's shape: 2x at 9 CPUs per GPU, and ``best`` from 12 CPUs
    with at least 125 GB per GPU (2x with less)."""
    rows = _same(0.3, 0.66, 1, 1.25, 1.53, 1.75, 2, 2, 2)
    return (*rows[:7], *((0.1, 2.0, best, best, best) for _ in rows[7:]))


PROFILES: dict[str, SynergyProfile] = {
    p.model: p
    for p in (
        SynergyProfile(
            "alexnet", 0.6, 12, 125, 2.94,
            _memory_bound(2.94),
            "simulator/models/alexnet_1.py",
        ),
        SynergyProfile(
            "res18", 0.64, 9, 62.5, 2.4, _same(0.37, 0.72, 1, 1.3, 1.53, 1.75, 2.4, 2.4, 2.4),
            "simulator/models/res18_1.py",
        ),
        SynergyProfile(
            "res50", 0.78, 4, 62.5, 1.15, _same(0.4, 0.74, 1, 1.15, 1.15, 1.15, 1.15, 1.15, 1.15),
            "simulator/models/res50_1.py",
        ),
        SynergyProfile(
            "mobilenet", 0.71, 6, 62.5, 1.55, _same(0.37, 0.72, 1, 1.3, 1.49, 1.55, 1.55, 1.55, 1.55),
            "simulator/models/mobilenet_1.py",
        ),
        SynergyProfile(
            "shufflenet", 0.615, 12, 125, 2.89,
            _memory_bound(2.89),
            "simulator/models/shufflenet_1.py",
        ),
        SynergyProfile(
            "m5", 0.6, 6, 187.5, 2.5,
            _rows(
                (0.1, 0.3, 0.3, 0.3, 0.3), (0.1, 0.66, 0.66, 0.66, 0.66), (0.1, 1, 1, 1, 1),
                (0.1, 1.2, 1.2, 1.2, 1.2), (0.1, 1.4, 1.4, 1.4, 1.4), (0.1, 1.5, 2, 2.5, 2.5),
                (0.1, 1.5, 2, 2.5, 2.5), (0.1, 1.5, 2, 2.5, 2.5), (0.1, 1.5, 2, 2.5, 2.5),
            ),
            "simulator/models/m5_1.py",
        ),
        SynergyProfile(
            "deepspeech", 0.757, 3, 62.5, 1.0, _same(0.3, 0.66, 1, 1, 1, 1, 1, 1, 1),
            "simulator/models/deepspeech_1.py",
        ),
        _flat("gnmt", 0.12),
        _flat("transformer", 0.67),
        _flat("lstm", 0.011),
        _flat("bert", 0.011),
        _flat("vae", 0.011),
    )
}  # fmt: skip


def synergy_profile(model: str | None) -> SynergyProfile | None:
    """The profile of one of Synergy's models, by its trace name; ``None`` for others."""
    return PROFILES.get(model) if model else None
