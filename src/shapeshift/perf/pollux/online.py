"""A job's throughput model learnt from what it has run, per GPU type.

The Sia artifact keeps, for every job and GPU type, the step and sync times of each
distinct (nodes, replicas, local batch) the job ran there and refits the Pollux
throughput model on them after every new one (``sia-simulator/job.py``,
``Job.update_params`` and ``optimize_perf_params``, with ``fit_perf_params``' rules for
kinds of rows not seen yet). A job reports what it measured: here the step and sync times
of the type's profile at the job's placement and per-replica batch, the figures the
artifact's simulator hands its jobs (``Application.get_throughput``).

Until a job has run on a type it has no model there; until it has run anywhere, none at
all (the policy then values every type's 1-GPU configuration alike). The largest replica
count it has run on, over all types, bounds how far it may grow (the artifact's
``max_profiled_replicas`` with ``--share_max_replicas``).

The Pollux artifact keeps one model per job, fitted the same way on every distinct
configuration the job ran (petuum/adaptdl ``osdi21-artifact``, ``simulator/simulator.py``,
``Job.update_params``), and the Sia artifact's heterogeneity-unaware Pollux one per job
over the rows of every type it ran on (``job.py``, ``h_unaware``: a configuration
recorded on one type is not recorded again on another): ``merged`` keeps that single
model, each row's times still those of the type it ran on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shapeshift.engine.batching import batch_of, split_batch
from shapeshift.model import Allocation, JobSpec
from shapeshift.perf.pollux.goodput import PerfParams, fit_perf_params
from shapeshift.perf.pollux.ground_truth import typed_limits
from shapeshift.perf.pollux.profiles import Row, app_name, load_profile

#: The optimiser's tolerance of the Sia artifact's per-job fits (``goodput.py``
#: ``fit_perf_params``, ``minimize(..., tol=1e-5)``).
FIT_TOL = 1e-5
#: The Pollux artifact's per-job fits pass no tolerance (``simulator/goodput.py``
#: ``fit_perf_params``): scipy's L-BFGS-B defaults, ``ftol`` and ``gtol``.
POLLUX_FIT_TOL = (2.220446049250313e-09, 1e-05)
#: (nodes, replicas, per-replica batch) of one observation.
Key = tuple[int, int, int]


@dataclass
class _Seen:
    rows: dict[Key, Row] = field(default_factory=dict)
    params: PerfParams | None = None


class OnlineFits:
    """Per (job, GPU type): the rows the job ran and the model fitted on them."""

    def __init__(self, root: str, tol: float | tuple[float, float] = FIT_TOL, merged: bool = False) -> None:
        self.root = root
        self.tol = tol
        self.merged = merged
        self._seen: dict[tuple[str, str], _Seen] = {}
        self._types: dict[str, list[str]] = {}  # types each job has observations on, in order
        self._most: dict[str, int] = {}  # the most replicas each job has run on, any type

    def observe(self, spec: JobSpec, allocation: Allocation, gpu_type: str) -> None:
        """Record one step of ``spec`` on ``allocation`` (on ``gpu_type``'s profile)."""
        if spec.batch is None or allocation.gpus < 1:
            return
        profile = load_profile(self.root, app_name(spec.model), gpu_type or None)
        if profile is None:
            return
        shape = tuple(r.gpus for _, r in allocation.placement)
        batch = typed_limits(spec.batch, profile, shape)
        split = split_batch(batch, batch_of(batch, allocation), allocation.gpus)
        key = (len(shape), allocation.gpus, int(split.atomic))
        seen = self._seen.setdefault((spec.job_id, self._key(gpu_type)), _Seen())
        if key in seen.rows:
            return
        step, sync = profile.step_sync(shape, split.atomic)
        seen.rows[key] = Row(key[0], key[1], float(key[2]), step, sync)
        seen.params = None
        self._most[spec.job_id] = max(self._most.get(spec.job_id, 0), allocation.gpus)
        ran = self._types.setdefault(spec.job_id, [])
        if gpu_type not in ran:
            ran.append(gpu_type)

    def params(self, job_id: str, gpu_type: str) -> PerfParams | None:
        """The model fitted on what ``job_id`` ran on ``gpu_type`` (on any type when
        ``merged``); None before its first run there."""
        seen = self._seen.get((job_id, self._key(gpu_type)))
        if seen is None or not seen.rows:
            return None
        if seen.params is None:
            seen.params = fit_perf_params(list(seen.rows.values()), tol=self.tol)
        return seen.params

    def _key(self, gpu_type: str) -> str:
        return "" if self.merged else gpu_type

    def types(self, job_id: str) -> list[str]:
        """The GPU types ``job_id`` has run on, in the order it first ran there."""
        return list(self._types.get(job_id, []))

    def max_replicas(self, job_id: str) -> int:
        """The most replicas ``job_id`` has run on, over every type (0 before its first run)."""
        return self._most.get(job_id, 0)
