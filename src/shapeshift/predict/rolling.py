"""``rolling``: P_R, Helios' history-based duration predictor.

Hu et al. (SC 2021, §5) observe that a user tends to resubmit similar jobs with similar
run times. The estimate of a job is the first available of

1. the mean duration of the same user's finished jobs with a *similar name* (see
   ``similarity.NameClusters``: same digit-free stem, or ``difflib`` ratio >= ``cutoff``)
   and the same GPU demand;
2. the mean of the same user's finished jobs with the same GPU demand;
3. the mean of all finished jobs with the same GPU demand;
4. the mean of all finished jobs;
5. ``prior`` seconds (nothing has finished yet).

Every mean is *exponentially decayed towards recent jobs*: a job that finished at time
``t_i`` weighs ``2 ** (-(t - t_i) / half_life)`` at time ``t``, so behaviour from weeks
ago fades (users change models and datasets). Since all weights decay at the same rate,
the weighted mean does not depend on when it is read; it is kept as a running
(sum, weight) pair rescaled at each new observation, O(1) per finished job.

Estimates are fixed the first time a job is asked about (at its submission in a
simulation, the moment Helios assigns QSSF priorities). That makes the estimator
``static`` for the policies' incremental queues, and guarantees an estimate never uses a
job that finished after it was made. Finished jobs count with their recorded duration
(``spec.duration``, known once the job ended), or their run time when there is none.
Traces without users or names (Philly) simply fall through to levels 3-5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from shapeshift.engine.state import JobStatus
from shapeshift.predict.similarity import NameClusters


@dataclass(slots=True)
class DecayedMean:
    """Weighted mean with weights halving every ``half_life`` seconds of observation time."""

    half_life: float
    total: float = 0.0
    weight: float = 0.0
    t_ref: float = 0.0

    def add(self, value: float, t: float) -> None:
        if self.weight == 0.0:
            self.total, self.weight, self.t_ref = value, 1.0, t
            return
        if t >= self.t_ref:
            scale = 2.0 ** (-(t - self.t_ref) / self.half_life)
            self.total = self.total * scale + value
            self.weight = self.weight * scale + 1.0
            self.t_ref = t
        else:  # out of order: weigh the older observation down instead
            w = 2.0 ** (-(self.t_ref - t) / self.half_life)
            self.total += value * w
            self.weight += w

    @property
    def mean(self) -> float:
        return self.total / self.weight


def finished_duration(job: JobStatus) -> float:
    """What a finished job teaches: its recorded duration, else the time it held resources."""
    duration = job.spec.duration
    return float(duration) if duration is not None else float(job.run_seconds)


class RollingEstimator:
    """P_R: decayed means by (user, similar name, GPUs) -> (user, GPUs) -> (GPUs) -> all."""

    name: ClassVar[str] = "rolling"
    needs_history: ClassVar[bool] = True
    static: ClassVar[bool] = True

    def __init__(self, half_life: float = 7 * 86400.0, cutoff: float = 0.8, prior: float = 3600.0):
        if half_life <= 0 or prior <= 0:
            raise ValueError("half_life and prior must be > 0 seconds")
        self.half_life = half_life
        self.prior = prior
        self.names = NameClusters(cutoff)
        self._means: dict[tuple, DecayedMean] = {}
        self._memo: dict[str, float] = {}
        self.observed = 0

    def _keys(self, job: JobStatus) -> tuple[tuple | None, tuple | None, tuple, tuple]:
        spec = job.spec
        gpus = spec.num_gpus
        user_level = ("u", spec.user, gpus) if spec.user else None
        cluster = self.names.cluster(spec.user, spec.name)
        name_level = ("n", spec.user, cluster, gpus) if cluster >= 0 else None
        return name_level, user_level, ("g", gpus), ("all",)

    def observe(self, job: JobStatus) -> None:
        value = finished_duration(job)
        t = float(job.end_time) if job.end_time is not None else 0.0
        for key in self._keys(job):
            if key is None:
                continue
            stat = self._means.get(key)
            if stat is None:
                stat = self._means[key] = DecayedMean(self.half_life)
            stat.add(value, t)
        self.observed += 1

    def predict(self, job: JobStatus) -> float:
        """The estimate from the history observed so far (not memoized)."""
        for key in self._keys(job):
            if key is None:
                continue
            stat = self._means.get(key)
            if stat is not None:
                return stat.mean
        return self.prior

    def estimate(self, job: JobStatus) -> float:
        found = self._memo.get(job.job_id)
        if found is None:
            found = self._memo[job.job_id] = self.predict(job)
        return found
