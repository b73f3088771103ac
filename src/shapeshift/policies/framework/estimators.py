"""Duration estimators: how long a job will run, for size-based policies (SJF, SRTF).

SJF and SRTF are only as good as their idea of a job's length. The oracle reads the
trace's recorded duration, which no real scheduler knows; Helios-style predictors
(noise-perturbed oracle, rolling per-user history, GBDT) learn from jobs that already
finished. Keeping the estimate behind a small protocol lets those plug into the same
policies by name (``estimator=NAME``) without touching them.

Contract for an estimator:

* ``estimate(job)`` is the expected run time in seconds at the job's requested
  resources. It may read ``job.spec`` (submit time, user, name, GPUs, model...) and the
  job's own progress; only the ``oracle`` may read ``spec.duration``.
* ``observe(job)`` is called once for every job of the run that finished, with its
  final status (``end_time``, ``run_seconds``, ``spec``), before any later estimate;
  history-based estimators learn here. Policies call it only when ``needs_history``.
* ``static`` says that the estimate of a job never changes while it waits (true for the
  oracle, false for an estimator whose estimates move as history grows). Policies use it
  to keep waiting jobs in an incremental priority queue instead of re-sorting them.

Register new estimators with ``@register_estimator("name")`` on a zero-argument factory;
``make_estimator`` builds a fresh (stateful) instance per policy instance.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from shapeshift.engine.state import JobStatus
from shapeshift.errors import InputError
from shapeshift.policies.framework.base import PartTraits

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


@runtime_checkable
class DurationEstimator(Protocol):
    name: str
    #: True when ``observe`` must be fed finished jobs.
    needs_history: bool
    #: True when a waiting job's estimate never changes.
    static: bool

    def estimate(self, job: JobStatus) -> float:
        """Expected run time (seconds at the requested resources) of ``job``."""
        ...

    def observe(self, job: JobStatus) -> None:
        """Learn from a finished job."""
        ...


class OracleEstimator:
    """The trace's recorded duration (perfect knowledge; the upper bound for SJF/SRTF).

    Jobs given in iterations rather than seconds fall back to their total work units."""

    name = "oracle"
    needs_history = False
    static = True

    def estimate(self, job: JobStatus) -> float:
        duration = job.spec.duration
        return float(duration) if duration is not None else float(job.work_total)

    def observe(self, job: JobStatus) -> None:
        return None


ESTIMATORS: dict[str, Callable[[], DurationEstimator]] = {}


def register_estimator(name: str) -> Callable[[Callable[[], DurationEstimator]], Callable[[], DurationEstimator]]:
    def wrap(factory: Callable[[], DurationEstimator]) -> Callable[[], DurationEstimator]:
        if name in ESTIMATORS:
            raise ValueError(f"estimator {name!r} registered twice")
        ESTIMATORS[name] = factory
        return factory

    return wrap


register_estimator(OracleEstimator.name)(OracleEstimator)


def check_estimator(name: str) -> str:
    """Validate an estimator name (for policy parameter models)."""
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; known: {', '.join(sorted(ESTIMATORS))}")
    return name


def make_estimator(name: str) -> DurationEstimator:
    try:
        return ESTIMATORS[check_estimator(name)]()
    except ValueError as exc:
        raise InputError(str(exc), field="estimator") from None


def finished_jobs(view: ClusterView) -> list[JobStatus]:
    """Jobs that completed since the previous decision, oldest end time first: the order in
    which history-based estimators must learn them (never a job that ends later)."""
    done = [view.job(j) for j in view.finished]
    return sorted(done, key=lambda s: (s.end_time or 0.0, s.job_id))


class EstimatedOrdering:
    """Base of the orderings that rank jobs by an estimator (SJF, SRTF, QSSF).

    Holds the estimator, feeds it the jobs finished since the last decision when it
    learns from them, and sorts by ``key`` (ties by job id). Subclasses define ``key``."""

    name = "estimated"
    preemptive = False

    def __init__(self, estimator: DurationEstimator):
        self.estimator = estimator
        #: An estimator that learns from finished jobs learns from every partition's.
        self.traits = PartTraits(partition_local=not estimator.needs_history, static_keys=estimator.static)

    def prepare(self, view: ClusterView) -> None:
        """Feed the estimator the jobs that finished since the last decision, oldest end first."""
        if self.estimator.needs_history:
            for status in finished_jobs(view):
                self.estimator.observe(status)

    def key(self, view: ClusterView, job_id: str) -> tuple[float, float]:
        raise NotImplementedError

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        return sorted(jobs, key=lambda j: (self.key(view, j), j))


def _register_predictors() -> None:
    """The predictors of ``shapeshift.predict``: Helios' ``noise``, ``rolling``, ``gbdt``, ``helios``,
    and Primo's interpretable ``primo``."""
    from shapeshift.predict.blend import HeliosEstimator
    from shapeshift.predict.gbdt import GbdtEstimator
    from shapeshift.predict.noise import NoiseEstimator
    from shapeshift.predict.primo_duration import PrimoEstimator
    from shapeshift.predict.rolling import RollingEstimator

    for factory in (NoiseEstimator, RollingEstimator, GbdtEstimator, HeliosEstimator, PrimoEstimator):
        register_estimator(factory.name)(factory)


_register_predictors()
