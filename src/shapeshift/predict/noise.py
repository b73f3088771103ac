"""``noise``: the recorded duration times a seeded random error.

Traces without users or job names (the Philly file has only a VC) give a learned
predictor nothing to learn from, yet QSSF's point is scheduling on an *imperfect*
estimate. This estimator models that imperfection explicitly, with one of two stated
error distributions (``distribution``):

``helios`` (the default): the error distribution Hu et al. measured for their Helios
predictor and reused to give Philly jobs estimates in their artifact. The relative error
``e`` falls in these bands, uniformly inside each band:

    ======================  ===========
    relative error ``e``    share of jobs
    ======================  ===========
    0 - 10%                 10%
    10 - 50%                40%
    50 - 100%               20%
    100 - 1,000%            20%
    1,000 - 10,000%         10%
    ======================  ===========

so the median job is off by 50% and one job in ten by more than 10x. Half the jobs are
over-estimated (``duration x (1 + e)``) and half under-estimated. Helios' artifact
under-estimates as ``duration x (1 - e)``, which turns negative for ``e > 1`` and sends
those jobs to the head of the queue; here an under-estimate is ``duration / (1 + e)``,
the mirror image in log space, so an estimate is never negative and over- and
under-estimates are equally likely at every magnitude.

``lognormal``: ``duration x exp(sigma Z)``, ``Z ~ N(0, 1)``, unbiased in log space, with
``sigma`` set from a target *median absolute percentage error* (``median_ape``, default
0.5): the median of ``|exp(sigma Z) - 1|``. Lighter-tailed than ``helios``: at the same
median, almost no job is off by 10x.

Every random draw comes from a hash of ``(seed, job_id)`` (through the normal inverse CDF
for ``lognormal``), so a job's error does not depend on which jobs were estimated before
it or how often it is asked.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import ClassVar, Literal

from shapeshift.engine.state import JobStatus
from shapeshift.errors import InputError

_STD_NORMAL = NormalDist()

#: (share of jobs, lowest relative error, highest relative error) of Helios' measured
#: prediction errors, as used for Philly in the Helios artifact.
HELIOS_ERROR_BANDS: tuple[tuple[float, float, float], ...] = (
    (0.1, 0.0, 0.1),
    (0.4, 0.1, 0.5),
    (0.2, 0.5, 1.0),
    (0.2, 1.0, 10.0),
    (0.1, 10.0, 100.0),
)

NoiseDistribution = Literal["helios", "lognormal"]


def sigma_for_median_ape(median_ape: float) -> float:
    """The log-normal ``sigma`` whose median of ``|exp(sigma Z) - 1|`` is ``median_ape`` (0 < m < 1).

    ``P(|e^{sZ} - 1| <= m) = Phi(ln(1 + m) / s) - Phi(ln(1 - m) / s)`` falls as ``s`` grows;
    bisection finds where it equals 1/2."""
    if not 0.0 < median_ape < 1.0:
        raise InputError(f"median absolute percentage error must be in (0, 1), got {median_ape}", field="median_ape")
    hi_log, lo_log = math.log1p(median_ape), math.log1p(-median_ape)

    def coverage(s: float) -> float:
        return _STD_NORMAL.cdf(hi_log / s) - _STD_NORMAL.cdf(lo_log / s)

    lo, hi = 1e-9, 50.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if coverage(mid) > 0.5:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def uniform(seed: int, job_id: str, salt: str = "") -> float:
    """A uniform draw strictly inside (0, 1) determined by ``(seed, job_id, salt)`` alone."""
    digest = hashlib.blake2b(f"{seed}\x00{job_id}\x00{salt}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 0.5) / 2.0**64


def standard_normal(seed: int, job_id: str) -> float:
    """A standard normal draw determined by ``(seed, job_id)`` alone."""
    return _STD_NORMAL.inv_cdf(uniform(seed, job_id))


def helios_relative_error(seed: int, job_id: str) -> float:
    """The relative error ``e >= 0`` of ``job_id`` under ``HELIOS_ERROR_BANDS``."""
    pick = uniform(seed, job_id, "band")
    cumulative = 0.0
    low, high = HELIOS_ERROR_BANDS[-1][1:]  # float rounding can leave pick above the last sum
    for share, band_low, band_high in HELIOS_ERROR_BANDS:
        cumulative += share
        if pick <= cumulative:
            low, high = band_low, band_high
            break
    return low + (high - low) * uniform(seed, job_id, "magnitude")


@dataclass(frozen=True)
class NoiseEstimator:
    """Recorded duration x a seeded per-job error factor (> 0); never negative."""

    distribution: NoiseDistribution = "helios"
    median_ape: float = 0.5
    seed: int = 0
    sigma: float = field(init=False)

    name: ClassVar[str] = "noise"
    needs_history: ClassVar[bool] = False
    static: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.distribution not in ("helios", "lognormal"):
            raise InputError(
                f"noise distribution must be helios or lognormal, got {self.distribution!r}", field="noise"
            )
        object.__setattr__(self, "sigma", sigma_for_median_ape(self.median_ape))

    def factor(self, job_id: str) -> float:
        """The multiplicative error of ``job_id`` (> 0)."""
        if self.distribution == "lognormal":
            return math.exp(self.sigma * standard_normal(self.seed, job_id))
        grow = 1.0 + helios_relative_error(self.seed, job_id)
        return grow if uniform(self.seed, job_id, "sign") < 0.5 else 1.0 / grow

    def estimate(self, job: JobStatus) -> float:
        duration = job.spec.duration
        base = float(duration) if duration is not None else float(job.work_total)
        return max(base, 0.0) * self.factor(job.job_id)

    def observe(self, job: JobStatus) -> None:
        return None
