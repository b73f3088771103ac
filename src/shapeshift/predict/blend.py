"""``helios``: QSSF's duration predictor, ``lambda * P_R + (1 - lambda) * P_M``.

Hu et al. (SC 2021, §5) combine the rolling history estimate P_R (``rolling.py``) with
the learned model P_M (``gbdt.py``): the history is sharp for a user's repeated jobs, the
model generalizes across users and calendar. ``lam`` (lambda, default 0.1) is the weight
of P_R. Until P_M has its first model it answers with P_R, so the blend equals P_R on a
cold start. One P_R instance serves both roles and is fed once per finished job.
"""

from __future__ import annotations

from typing import ClassVar

from shapeshift.engine.state import JobStatus
from shapeshift.predict.gbdt import GbdtEstimator
from shapeshift.predict.rolling import RollingEstimator


class HeliosEstimator:
    """``lam * P_R + (1 - lam) * P_M``, fixed per job at its first estimate."""

    name: ClassVar[str] = "helios"
    needs_history: ClassVar[bool] = True
    static: ClassVar[bool] = True

    def __init__(self, lam: float = 0.1, *, rolling: RollingEstimator | None = None, **gbdt_args: object):
        if not 0.0 <= lam <= 1.0:
            raise ValueError("lambda must be in [0, 1]")
        self.lam = lam
        self.rolling = rolling if rolling is not None else RollingEstimator()
        self.gbdt = GbdtEstimator(fallback=self.rolling, **gbdt_args)  # type: ignore[arg-type]
        self._memo: dict[str, float] = {}

    def observe(self, job: JobStatus) -> None:
        self.rolling.observe(job)
        self.gbdt.observe(job)

    def predict(self, job: JobStatus) -> float:
        return self.lam * self.rolling.predict(job) + (1.0 - self.lam) * self.gbdt.predict(job)

    def estimate(self, job: JobStatus) -> float:
        found = self._memo.get(job.job_id)
        if found is None:
            found = self._memo[job.job_id] = self.predict(job)
        return found
