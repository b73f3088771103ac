"""What ``auto`` chooses among, and how it scores a candidate: a simulation of the current
jobs under that candidate, from now until no job remains (Blox,
``simulator_runner/predict_simulation.py``: "run simulation until no job remains").

A candidate is an ordering x an admission policy. The snapshot holds the running and
waiting jobs (never future arrivals), each resubmitted at ``now`` with its remaining work,
*with the service it has attained so far* (Blox deep-copies its job state, attained
service included, into every candidate simulation), and with the waiting jobs the live
admission had already let in counted as admitted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from shapeshift.engine.state import JobState
from shapeshift.model import ClusterSpec, JobSpec, NodeSpec, Schedule
from shapeshift.policies.framework.base import ROUND, Adopts, Prepares
from shapeshift.policies.framework.composed import ADMISSIONS, ORDERINGS, Admission, ComposedPolicy, Ordering
from shapeshift.policies.framework.placement import PLACEMENTS

if TYPE_CHECKING:
    from shapeshift.engine.replay import Replay
    from shapeshift.engine.view import ClusterView

#: ``auto`` and its candidates decide once a round, as Blox's scheduler loop does.
TRIGGERS = frozenset({ROUND})


def candidate_orderings() -> dict[str, Callable[[], Ordering]]:
    """Orderings ``auto`` can combine: ``fifo``, ``sjf``/``srtf`` with oracle durations,
    ``las`` as Blox runs it (service in seconds held), and the ``ORDERINGS`` registry."""
    from shapeshift.policies.framework.estimators import make_estimator
    from shapeshift.policies.size_based import sjf
    from shapeshift.policies.size_based.las import LeastAttainedService

    found: dict[str, Callable[[], Ordering]] = {
        "las": lambda: LeastAttainedService(gpu_time=False),
        "sjf": lambda: sjf.ShortestJobFirst(make_estimator("oracle")),
        "srtf": lambda: sjf.ShortestRemainingFirst(make_estimator("oracle")),
    }
    found.update(ORDERINGS)
    return dict(sorted(found.items()))


def make_candidate_admission(name: str) -> Admission:
    """``accept-all``, ``load-based`` (1.2x) or ``load-based:X`` (threshold X)."""
    base, _, threshold = name.partition(":")
    if base == "load-based":
        from shapeshift.policies.framework.admission import LoadBasedAdmission

        return LoadBasedAdmission(float(threshold) if threshold else 1.2)
    return ADMISSIONS[base]()


def check_admission_name(name: str) -> str:
    base, sep, threshold = name.partition(":")
    if base not in ADMISSIONS:
        raise ValueError(f"unknown admission {base!r}; known: {', '.join(sorted(ADMISSIONS))}")
    if sep:
        if base != "load-based":
            raise ValueError(f"admission {base} takes no threshold")
        try:
            value = float(threshold)
        except ValueError:
            raise ValueError(f"load-based threshold must be a number, got {threshold!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"load-based threshold must be > 0, got {threshold!r}")
    return name


@dataclass(frozen=True)
class Combination:
    ordering: str
    admission: str

    def __str__(self) -> str:
        return f"{self.ordering}+{self.admission}"


@dataclass(frozen=True)
class Settings:
    placement: str
    backfill: bool
    round: float
    #: Seconds simulated per candidate; ``None`` = until no job remains (Blox).
    horizon: float | None
    target: str
    jct_weight: float
    responsiveness_weight: float


class _Pinned:
    """Ranks the jobs running at snapshot time first, then the candidate's order: what a
    non-preemptive scheduler does to jobs it already started."""

    def __init__(self, inner: Ordering, pinned: frozenset[str]):
        self.inner = inner
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.pinned = pinned
        self._prepare = inner.prepare if isinstance(inner, Prepares) else None

    def prepare(self, view: ClusterView) -> None:
        if self._prepare is not None:
            self._prepare(view)

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        jobs = list(jobs)
        first = [j for j in jobs if j in self.pinned]
        rest = [j for j in jobs if j not in self.pinned]
        return [*first, *self.inner.order(view, partition, rest)]


def build_combination(combo: Combination, settings: Settings, pinned: frozenset[str] = frozenset()) -> ComposedPolicy:
    ordering: Ordering = candidate_orderings()[combo.ordering]()
    if pinned and not ordering.preemptive:
        ordering = _Pinned(ordering, pinned)
    return ComposedPolicy(
        name=f"auto[{combo}]",
        admission=make_candidate_admission(combo.admission),
        ordering=ordering,
        placement=PLACEMENTS[settings.placement](),
        head_of_line_blocking=not settings.backfill,
        triggers=TRIGGERS,
        default_round=settings.round,
    )


def hand_over(old: Admission, new: Admission, view: ClusterView) -> Admission:
    """Switch admission policies without forgetting who was let in (Blox counts demand over
    every active job): the waiting jobs ``old`` had admitted before now become active in
    ``new``; running jobs count as active in any admission."""
    if isinstance(new, Adopts):
        for partition in view.partitions:
            admitted = old.admit(view, partition)
            new.adopt(view, [j for j in admitted if view.job(j).spec.submit_time < view.now])
    return new


@dataclass(frozen=True)
class Snapshot:
    """What a candidate simulation needs, as plain picklable values."""

    now: float
    jobs: tuple[JobSpec, ...]
    submitted: tuple[float, ...]
    started: frozenset[str]
    #: Per job: (GPU-seconds attained, seconds held) so far.
    service: tuple[tuple[str, float, float], ...]
    #: Waiting jobs the live admission had already admitted.
    admitted: frozenset[str]
    nodes: tuple[NodeSpec, ...]
    partitions: tuple[tuple[str, tuple[str, ...]], ...]
    tenants: tuple[tuple[str, int], ...]
    gpu_share_limit: int = 1
    gpu_fractions: bool = False

    def cluster(self) -> ClusterSpec:
        parts, tenants = dict(self.partitions), dict(self.tenants)
        return ClusterSpec(self.nodes, parts, tenants, self.gpu_share_limit, self.gpu_fractions)


def take_snapshot(view: ClusterView, admission: Admission, max_jobs: int) -> Snapshot:
    """Running and waiting jobs as fresh submissions at ``now`` with their remaining work."""
    from dataclasses import replace

    now = view.now
    jobs: list[JobSpec] = []
    submitted: list[float] = []
    started: set[str] = set()
    service: list[tuple[str, float, float]] = []
    admitted: set[str] = set()
    kept: set[str] = set()
    for partition in sorted(view.partitions):
        waiting = list(view.pending(partition))[:max_jobs]
        admitted.update(j for j in admission.admit(view, partition) if j in set(waiting))
        for job_id in [*view.running(partition), *waiting]:
            status = view.job(job_id)
            remaining = view.remaining(job_id)
            if remaining <= 1e-9:
                continue
            spec = status.spec
            if spec.duration is not None:
                spec = replace(spec, submit_time=now, duration=remaining, iterations=None)
            else:
                spec = replace(spec, submit_time=now, iterations=max(1, math.ceil(remaining)))
            jobs.append(spec)
            kept.add(job_id)
            submitted.append(status.spec.submit_time)
            held = status.run_seconds + (now - status.last_update if status.state is JobState.RUNNING else 0.0)
            service.append((job_id, view.attained(job_id), held))
            if status.state is JobState.RUNNING:
                started.add(job_id)
    # A job with no work left is not resubmitted, so the candidate must not adopt it.
    admitted &= kept
    cluster = view.cluster
    return Snapshot(
        now=now,
        jobs=tuple(jobs),
        submitted=tuple(submitted),
        started=frozenset(started),
        service=tuple(service),
        admitted=frozenset(admitted),
        nodes=cluster.nodes,
        partitions=tuple(sorted(cluster.partitions.items())),
        tenants=tuple(sorted(cluster.tenants.items())),
        gpu_share_limit=cluster.gpu_share_limit,
        gpu_fractions=cluster.gpu_fractions,
    )


class _Seeded:
    """The candidate policy, with the snapshot's history restored before its first decision:
    each job's attained service, and the admission state of waiting jobs."""

    def __init__(self, inner: ComposedPolicy, snapshot: Snapshot):
        self.inner = inner
        self.name = inner.name
        self.triggers = inner.triggers
        self.default_round = inner.default_round
        self._snapshot: Snapshot | None = snapshot

    def decide(self, view: ClusterView) -> Schedule:
        if self._snapshot is not None:
            snapshot, self._snapshot = self._snapshot, None
            for job_id, gpu_seconds, seconds in snapshot.service:
                status = view.job(job_id)
                status.attained, status.run_seconds = gpu_seconds, seconds
            admission = self.inner.admission
            if isinstance(admission, Adopts):
                admission.adopt(view, sorted(snapshot.admitted | snapshot.started))
        return self.inner.decide(view)


def score_candidate(snapshot: Snapshot, combo: Combination, settings: Settings, replay: Replay) -> float:
    """The target metric of ``combo`` simulated by ``replay`` from ``snapshot`` (lower is better)."""
    policy = _Seeded(build_combination(combo, settings, snapshot.started), snapshot)
    jobs = replay(snapshot.jobs, snapshot.cluster(), policy, round_seconds=settings.round)
    horizon = snapshot.now + settings.horizon if settings.horizon is not None else math.inf
    submitted = dict(zip((j.job_id for j in snapshot.jobs), snapshot.submitted, strict=True))
    jct: list[float] = []
    response: list[float] = []
    last = max((s.end_time for s in jobs if s.end_time is not None), default=snapshot.now)
    for status in jobs:
        origin = submitted[status.job_id]
        end = status.end_time if status.state is JobState.COMPLETED and status.end_time is not None else last
        jct.append(min(end, horizon) - origin)
        if status.job_id not in snapshot.started:
            first = status.first_start if status.first_start is not None else last
            response.append(min(first, horizon) - origin)
    avg_jct = float(np.mean(jct)) if jct else 0.0
    if settings.target == "avg_jct":
        return avg_jct
    avg_resp = float(np.mean(response)) if response else 0.0
    return settings.jct_weight * avg_jct + settings.responsiveness_weight * avg_resp


def score_task(args: tuple[Snapshot, Combination, Settings, Replay]) -> float:
    return score_candidate(*args)


def expand_names(names: Any, known: Mapping[str, Any] | None, kind: str) -> Any:
    """``all`` -> every known name; otherwise check each (admissions may carry ``:X``)."""
    if isinstance(names, str):
        names = [v.strip() for v in names.split(",") if v.strip()]
    if not isinstance(names, list):
        return names
    if known is not None and names == ["all"]:
        return sorted(known)
    if not names:
        raise ValueError(f"give at least one {kind}")
    for name in names:
        if kind == "admission":
            check_admission_name(name)
        elif known is not None and name not in known:
            raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(sorted(known))}")
    if len(set(names)) != len(names):
        raise ValueError(f"{kind}s listed twice")
    return names
