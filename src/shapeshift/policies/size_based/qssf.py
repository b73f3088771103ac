"""``qssf``: quasi-shortest-service-first with predicted durations (Helios).

Hu et al., "Characterization and Prediction of Deep Learning Workloads in Large-Scale
GPU Datacenters" (SC 2021), find that in production GPU clusters a few long, large jobs
take most of the GPU time while most jobs are short, and that a job's duration is
predictable from its user's history. QSSF ranks each waiting job by its predicted
*service*, GPUs x predicted duration, smallest first:

    priority = num_gpus x (lambda x P_R + (1 - lambda) x P_M)

with P_R the rolling per-user history estimate (``shapeshift.predict.rolling``), P_M the
LightGBM model (``shapeshift.predict.gbdt``) and ``lambda`` = 0.1 by default. It is
non-preemptive (a started job runs to completion), decides per VC (partition), places
jobs consolidated (fewest nodes, best fit), and lets a later job that fits start while a
larger one waits (``backfill``, on by default, as in Helios' simulator). Ties go to the
earlier submission.

``estimator`` picks the prediction: ``helios`` (the blend above), ``rolling`` (P_R
alone), ``gbdt`` (P_M alone), ``noise`` (recorded duration x a seeded random error,
for traces such as the Philly file that have no users or names to learn from: by default
Helios' measured error distribution, ``noise=lognormal`` for a log-normal error whose
median absolute percentage error is ``noise_ape``), ``oracle`` (the recorded
duration: shortest-service-first with perfect knowledge) or ``primo`` (an interpretable
PrAM/PrDT model in P_M's place, ``shapeshift.predict.primo_duration``; not Helios').

A job's priority is fixed at submission (the estimators fix each job's estimate the first
time they are asked), so waiting jobs live in an incremental per-VC heap. Learned
estimators are fed each finished job once, in end-time order, before any later decision,
from the engine's list of jobs finished since the last decision (``view.finished``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import ConfigDict, Field

from shapeshift.errors import InputError
from shapeshift.policies.framework.composed import AcceptAll, ComposedPolicy
from shapeshift.policies.framework.estimators import DurationEstimator, EstimatedOrdering, OracleEstimator
from shapeshift.policies.framework.placement import PLACEMENTS, PlacementName
from shapeshift.policies.framework.registry import PolicyParams, register
from shapeshift.predict.blend import HeliosEstimator
from shapeshift.predict.gbdt import GbdtEstimator
from shapeshift.predict.noise import NoiseEstimator
from shapeshift.predict.primo_duration import PrimoEstimator
from shapeshift.predict.rolling import RollingEstimator

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


class QssfOrdering(EstimatedOrdering):
    """GPUs x estimated duration, smallest first; non-preemptive."""

    name = "qssf"
    preemptive = False

    def priority(self, view: ClusterView, job_id: str) -> float:
        status = view.job(job_id)
        return status.spec.num_gpus * self.estimator.estimate(status)

    def key(self, view: ClusterView, job_id: str) -> tuple[float, float]:
        return (self.priority(view, job_id), view.job(job_id).spec.submit_time)


class QssfParams(PolicyParams):
    model_config = ConfigDict(populate_by_name=True)

    #: Weight of P_R in the blend (``lambda=0.1`` on the command line).
    lambda_: float = Field(0.1, alias="lambda", ge=0.0, le=1.0)
    estimator: Literal["helios", "rolling", "gbdt", "noise", "oracle", "primo"] = "helios"
    #: Error distribution of the ``noise`` estimator (``shapeshift.predict.noise``).
    noise: Literal["helios", "lognormal"] = "helios"
    noise_ape: float = Field(0.5, gt=0.0, lt=1.0)
    seed: int = 0
    #: P_R's form: artifact (plain means, names matched at difflib cutoff 0.6, as the Helios
    #: artifact's NaiveEstimator) or decayed (means decayed over a 7-day half-life).
    rolling: Literal["artifact", "decayed"] = "artifact"
    #: Helios Algorithm 1 line 11 (``break``) and the artifact's ``qssf.py``: no backfill.
    backfill: bool = False
    placement: PlacementName = "consolidated"


def qssf_estimator(params: QssfParams) -> DurationEstimator:
    """The estimator ``params`` selects, seeded."""
    try:
        if params.estimator == "helios":
            return HeliosEstimator(params.lambda_, rolling=RollingEstimator(params.rolling), seed=params.seed)
        if params.estimator == "rolling":
            return RollingEstimator(params.rolling)
        if params.estimator == "gbdt":
            return GbdtEstimator(seed=params.seed)
        if params.estimator == "primo":
            return PrimoEstimator(seed=params.seed)
        if params.estimator == "noise":
            return NoiseEstimator(params.noise, median_ape=params.noise_ape, seed=params.seed)
        return OracleEstimator()
    except ValueError as exc:
        raise InputError(f"policy qssf: {exc}", field="estimator") from None


@register(
    "qssf",
    "Quasi-shortest-service-first (Helios): GPUs x predicted duration, smallest first; non-preemptive, per VC. "
    "estimator=helios|rolling|gbdt|noise|oracle|primo, lambda=0.1, noise=helios|lognormal.",
    QssfParams,
)
def make_qssf(params: QssfParams) -> ComposedPolicy:
    return ComposedPolicy(
        name="qssf",
        admission=AcceptAll(),
        ordering=QssfOrdering(qssf_estimator(params)),
        placement=PLACEMENTS[params.placement](),
        head_of_line_blocking=not params.backfill,
    )
