"""``rolling``: P_R, Helios' history-based duration predictor.

Hu et al. (SC 2021, Sec. 5) observe that a user tends to resubmit similar jobs with
similar run times. By default the estimate follows the Helios artifact's
``NaiveEstimator`` (``framework/QSSF Service/estimators/estimator.py``): plain means, job
names matched by ``difflib`` at cutoff 0.6, first available of

1. the same user's finished jobs with a similar name and the same GPU demand;
2. the same user's finished jobs with a similar name;
3. every user's finished jobs with a similar name;
4. the same user's finished jobs;
5. all finished jobs;
6. ``prior`` seconds (nothing has finished yet).

(The artifact compares a new name with every name seen with ``get_close_matches``; here
names are grouped once, when first seen, by ``similarity.NameClusters`` with the same
cutoff, so each name costs a bounded number of comparisons.)

``variant="decayed"`` is the first Shapeshift release's predictor: means exponentially
decayed towards recent jobs (a job that finished at ``t_i`` weighs
``2 ** (-(t - t_i) / half_life)``), names clustered per user at cutoff 0.8, levels
(user, similar name, GPUs) -> (user, GPUs) -> (GPUs) -> all.

Estimates are fixed the first time a job is asked about (at its submission in a
simulation, the moment Helios assigns QSSF priorities). That makes the estimator
``static`` for the policies' incremental queues, and guarantees an estimate never uses a
job that finished after it was made. Finished jobs count with their recorded duration
(``spec.duration``, known once the job ended), or their run time when there is none.
Traces without users or names (Philly) fall through to the GPU or global levels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from shapeshift.engine.state import JobStatus
from shapeshift.predict.similarity import NameClusters


@dataclass(slots=True)
class PlainMean:
    """Running mean (the artifact's ``agg_method = 'mean'``)."""

    total: float = 0.0
    weight: float = 0.0

    def add(self, value: float, t: float) -> None:
        self.total += value
        self.weight += 1.0

    @property
    def mean(self) -> float:
        return self.total / self.weight


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
    """P_R: per-level means of finished jobs (see the module docstring for the levels)."""

    name: ClassVar[str] = "rolling"
    needs_history: ClassVar[bool] = True
    static: ClassVar[bool] = True

    def __init__(
        self,
        variant: Literal["artifact", "decayed"] = "artifact",
        *,
        half_life: float = 7 * 86400.0,
        cutoff: float | None = None,
        prior: float = 3600.0,
    ):
        if half_life <= 0 or prior <= 0:
            raise ValueError("half_life and prior must be > 0 seconds")
        if variant not in ("artifact", "decayed"):
            raise ValueError(f"unknown rolling variant {variant!r}; use artifact or decayed")
        self.variant = variant
        self.half_life = half_life
        self.prior = prior
        self.names = NameClusters(cutoff if cutoff is not None else (0.6 if variant == "artifact" else 0.8))
        self._means: dict[tuple, PlainMean | DecayedMean] = {}
        self._memo: dict[str, float] = {}
        self.observed = 0

    def _keys(self, job: JobStatus) -> tuple[tuple | None, ...]:
        spec = job.spec
        gpus = spec.num_gpus
        if self.variant == "artifact":
            # Names are compared across users (the artifact matches against every name).
            cluster = self.names.cluster("", spec.name)
            named = cluster >= 0
            return (
                ("un", spec.user, cluster, gpus) if named and spec.user else None,
                ("un", spec.user, cluster) if named and spec.user else None,
                ("n", cluster) if named else None,
                ("u", spec.user) if spec.user else None,
                ("all",),
            )
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
                stat = self._means[key] = PlainMean() if self.variant == "artifact" else DecayedMean(self.half_life)
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
