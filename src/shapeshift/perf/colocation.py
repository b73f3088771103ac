"""How fast jobs run when they share a GPU: sharing profiles and interference models.

**Sharing profile** of a job: its GPU (SM) utilisation, its memory-bandwidth
utilisation (nvidia-smi's "memory utilisation", the share of time the memory controller
is busy) and the GPU memory it needs, each as measured running alone. The built-in
figures per catalog model are rounded means of the Lucid artifact's profiling data
(``simulation/analyzer/single_data.csv``, RTX 3090, commit 63685a3 of
S-Lab-System-Group/Lucid), mapped to the closest profiled model (named in
``PROFILE_SOURCE``). A job without a catalogued model (every Philly job) draws one of
the profiled models by a hash of its id and the seed, so the draw is reproducible and
independent of the order of jobs. Profiles get seeded measurement noise where a
profiler reads them (``noisy``).

**Default interference model** (``UtilisationInterference``): job ``a`` beside job ``b``
runs at ``1 / (1 + alpha * u_a * u_b + beta * m_a * m_b)`` of its speed alone, where
``u`` is GPU utilisation and ``m`` memory-bandwidth utilisation (fractions). The form
follows what the co-location studies report: jobs that leave the GPU mostly idle barely
notice each other (Gandiva, Xiao et al. OSDI 2018, its packing mechanism), compute- or
bandwidth-bound jobs time-slice and both slow down (AntMan, Xiao et al. OSDI 2020, its
motivation study of co-located jobs), and GPU utilisation and memory-bandwidth use are
the profiled features that predict co-location slowdown (Lucid, Hu et al. ASPLOS 2023;
Hu's thesis, chapter 4). We could not check those papers' figure numbers from here, so
the constants are not read off their figures: they are least-squares fits to the 2,776
directed pairs of the Lucid artifact's measured co-location speeds
(``simulation/data/colocate_info.csv`` joined with ``single_data.csv``): ``alpha = 0.28``,
``beta = 0.43``; RMSE 0.098 against 0.125 for a constant (the measured speeds carry noise
of their own: more than 10% of pairs read above 1.0). See ``docs/sharing.md``.

**Measured table** (``PairTable``): a CSV with columns ``model_a, model_b, speed_a,
speed_b`` replaces the formula for the pairs it lists; other pairs fall back to it.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from shapeshift.errors import InputError
from shapeshift.model import JobSpec

ALPHA_GPU = 0.28
BETA_MEMBW = 0.43

LUCID_PROFILES = "Lucid artifact simulation/analyzer/single_data.csv (RTX 3090), model means, rounded"


@dataclass(frozen=True, slots=True)
class SharingProfile:
    """A job's resource use running alone: fractions of the GPU, and GB of GPU memory."""

    gpu_util: float
    mem_bw: float
    gpu_mem_gb: float
    profiled_as: str = ""

    def __post_init__(self) -> None:
        for value in (self.gpu_util, self.mem_bw, self.gpu_mem_gb):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"sharing profile figures must be finite and >= 0, got {self}")


#: Profiled models (Lucid artifact, means over batch sizes and AMP): util, mem-bw, GB.
PROFILED: Mapping[str, SharingProfile] = {
    "BERT": SharingProfile(0.996, 0.684, 18.2, "BERT"),
    "DCGAN": SharingProfile(0.622, 0.256, 2.6, "DCGAN"),
    "EfficientNet": SharingProfile(0.307, 0.065, 2.4, "EfficientNet"),
    "LSTM": SharingProfile(0.776, 0.636, 4.6, "LSTM"),
    "MobileNetV2": SharingProfile(0.563, 0.289, 2.9, "MobileNetV2"),
    "MobileNetV3": SharingProfile(0.666, 0.308, 3.1, "MobileNetV3"),
    "NeuMF": SharingProfile(0.101, 0.020, 2.1, "NeuMF"),
    "PPO": SharingProfile(0.131, 0.0, 2.1, "PPO"),
    "PointNet": SharingProfile(0.078, 0.066, 5.9, "PointNet"),
    "ResNet18": SharingProfile(0.694, 0.395, 3.0, "ResNet18"),
    "ResNet50": SharingProfile(0.989, 0.774, 7.4, "ResNet50"),
    "TD3": SharingProfile(0.134, 0.0, 2.1, "TD3"),
    "Transformer": SharingProfile(0.644, 0.245, 11.9, "Transformer"),
    "VGG": SharingProfile(0.452, 0.241, 3.3, "VGG"),
}
_PROFILED_NAMES = tuple(sorted(PROFILED))

#: Catalog model -> closest profiled model. The Rubick transformer models fill an A800
#: (they are sized to it), so they profile as fully busy and never fit beside anyone.
PROFILE_SOURCE: Mapping[str, str] = {
    "resnet18": "ResNet18",
    "cifar10": "ResNet18",
    "resnet50": "ResNet50",
    "resnet101": "ResNet50",
    "imagenet": "ResNet50",
    "inception3": "ResNet50",
    "googlenet": "MobileNetV3",
    "yolov3": "ResNet50",
    "vgg16": "VGG",
    "vgg19": "VGG",
    "alexnet": "VGG",
    "cyclegan": "DCGAN",
    "transformer": "Transformer",
    "bert-base": "BERT",
    "lstm": "LSTM",
    "deepspeech2": "LSTM",
    "a3c": "PPO",
    "recommendation": "NeuMF",
    "ncf": "NeuMF",
}
_FULL_GPU = SharingProfile(1.0, 0.8, 80.0, "whole GPU (large transformer)")
_LARGE = {"vit", "roberta", "bert", "t5", "gpt2", "llama7", "llama30"}


def _unit_hash(*parts: object) -> float:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def profile_of(job: JobSpec, seed: int = 0) -> SharingProfile:
    """The job's sharing profile as it would run alone (no noise)."""
    key = job.model.strip().lower()
    if key in PROFILE_SOURCE:
        return PROFILED[PROFILE_SOURCE[key]]
    if key in _LARGE:
        return _FULL_GPU
    if job.model in PROFILED:
        return PROFILED[job.model]
    return PROFILED[_drawn_profile(seed, job.job_id)]


@functools.lru_cache(maxsize=1 << 16)
def _drawn_profile(seed: int, job_id: str) -> str:
    """The profiled model a job of unknown model is given (asked at every change of its
    GPU partners, so the hash is kept)."""
    pick = int(_unit_hash("profile", seed, job_id) * len(_PROFILED_NAMES))
    return _PROFILED_NAMES[min(pick, len(_PROFILED_NAMES) - 1)]


def noisy(profile: SharingProfile, job_id: str, seed: int, relative: float = 0.05) -> SharingProfile:
    """The profile as a profiler reads it: each figure times ``1 + U(-relative, relative)``,
    seeded by job id (sampling noise of nvidia-smi-style counters), clipped to [0, 1]."""

    def jitter(value: float, what: str, top: float) -> float:
        factor = 1.0 + relative * (2.0 * _unit_hash("noise", seed, job_id, what) - 1.0)
        return min(max(value * factor, 0.0), top)

    return SharingProfile(
        jitter(profile.gpu_util, "util", 1.0),
        jitter(profile.mem_bw, "bw", 1.0),
        jitter(profile.gpu_mem_gb, "mem", math.inf),
        profile.profiled_as,
    )


class InterferenceModel(Protocol):
    def pair_speed(self, job: JobSpec, partner: JobSpec) -> float:
        """Speed of ``job`` beside ``partner`` relative to running alone (0 < speed <= 1.5)."""
        ...


@dataclass(frozen=True)
class UtilisationInterference:
    """``1 / (1 + alpha * u_a * u_b + beta * m_a * m_b)``; see the module docstring."""

    alpha: float = ALPHA_GPU
    beta: float = BETA_MEMBW
    seed: int = 0

    def pair_speed(self, job: JobSpec, partner: JobSpec) -> float:
        a, b = profile_of(job, self.seed), profile_of(partner, self.seed)
        return self.speed_beside(a.gpu_util, a.mem_bw, b.gpu_util, b.mem_bw)

    def speed_beside(self, gpu_util: float, mem_bw: float, partner_gpu_util: float, partner_mem_bw: float) -> float:
        """The formula on utilisations measured alone (fractions), e.g. a measurement's
        (``scripts/measure_colocation.py``) rather than a catalogued profile."""
        return 1.0 / (1.0 + self.alpha * gpu_util * partner_gpu_util + self.beta * mem_bw * partner_mem_bw)


@dataclass(frozen=True)
class PairTable:
    """Measured pair speeds by model name; pairs it lacks use ``fallback``."""

    speeds: Mapping[tuple[str, str], float]
    fallback: InterferenceModel

    def pair_speed(self, job: JobSpec, partner: JobSpec) -> float:
        found = self.speeds.get((job.model.lower(), partner.model.lower()))
        return found if found is not None else self.fallback.pair_speed(job, partner)

    @classmethod
    def from_csv(cls, path: str | Path, fallback: InterferenceModel | None = None) -> PairTable:
        """Read ``model_a,model_b,speed_a,speed_b``; bad rows are an ``InputError`` with the line."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise InputError(f"cannot read interference table: {exc.strerror}", path=str(path)) from None
        rows = csv.DictReader(text.splitlines())
        missing = {"model_a", "model_b", "speed_a", "speed_b"} - set(rows.fieldnames or ())
        if missing:
            raise InputError(f"interference table lacks columns {sorted(missing)}", path=str(path), line=1)
        speeds: dict[tuple[str, str], float] = {}
        for line, row in enumerate(rows, start=2):
            a, b = (row["model_a"] or "").strip().lower(), (row["model_b"] or "").strip().lower()
            if not a or not b:
                raise InputError("model names must not be empty", path=str(path), line=line, field="model_a")
            for field_name, key in (("speed_a", (a, b)), ("speed_b", (b, a))):
                try:
                    value = float(row[field_name] or "")
                except ValueError:
                    value = math.nan
                if not (math.isfinite(value) and 0 < value <= 1.5):
                    raise InputError(
                        f"speed must be a number in (0, 1.5], got {row[field_name]!r}",
                        path=str(path),
                        line=line,
                        field=field_name,
                    )
                speeds[key] = value
        return cls(speeds, fallback or UtilisationInterference())
