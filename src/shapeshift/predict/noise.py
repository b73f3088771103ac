"""``noise``: the recorded duration times a seeded random error.

Traces without users or job names (the Philly file has only a VC) give a learned
predictor nothing to learn from, yet QSSF's point is scheduling on an *imperfect*
estimate. This estimator models that imperfection explicitly: the estimate of job ``j``
is ``duration_j * exp(sigma * Z_j)`` with ``Z_j ~ N(0, 1)``, a log-normal multiplicative
error with median 1 (unbiased in log space), always positive.

``sigma`` is set from a target *median absolute percentage error* (``median_ape``): the
median of ``|exp(sigma Z) - 1|``. The default, 0.5, is our own documented choice (not a
figure from the Helios paper): a predictor that is off by half or more on the median job,
deliberately pessimistic so that QSSF's gain over FIFO is not an artefact of near-oracle
knowledge. ``sigma_for_median_ape(0.5)`` is about 0.80.

``Z_j`` comes from a hash of ``(seed, job_id)`` through the normal inverse CDF, so a job's
error does not depend on which jobs were estimated before it or how often it is asked.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import ClassVar

from shapeshift.engine.state import JobStatus
from shapeshift.errors import InputError

_STD_NORMAL = NormalDist()


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


def standard_normal(seed: int, job_id: str) -> float:
    """A standard normal draw determined by ``(seed, job_id)`` alone."""
    digest = hashlib.blake2b(f"{seed}\x00{job_id}".encode(), digest_size=8).digest()
    u = (int.from_bytes(digest, "big") + 0.5) / 2.0**64  # strictly inside (0, 1)
    return _STD_NORMAL.inv_cdf(u)


@dataclass(frozen=True)
class NoiseEstimator:
    """Recorded duration x ``exp(sigma Z)``, ``Z`` seeded per job; never negative."""

    median_ape: float = 0.5
    seed: int = 0
    sigma: float = field(init=False)

    name: ClassVar[str] = "noise"
    needs_history: ClassVar[bool] = False
    static: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", sigma_for_median_ape(self.median_ape))

    def factor(self, job_id: str) -> float:
        """The multiplicative error of ``job_id`` (> 0)."""
        return math.exp(self.sigma * standard_normal(self.seed, job_id))

    def estimate(self, job: JobStatus) -> float:
        duration = job.spec.duration
        base = float(duration) if duration is not None else float(job.work_total)
        return max(base, 0.0) * self.factor(job.job_id)

    def observe(self, job: JobStatus) -> None:
        return None
