"""``auto``: automatic policy synthesis (Blox, Agarwal et al., EuroSys 2024, section 6).

No single ordering/admission pair wins on every load: shortest-first helps a queue of
mixed short and long jobs, while a wide short job at the head of a shortest-first queue
can block narrow jobs that would have filled the cluster. Blox's answer is to decide
online: every ``k`` scheduling rounds, simulate each configured combination of an
ordering and an admission policy from the current state for a look-ahead window, and
switch to the one with the best target metric.

The simulation uses only what the scheduler knows now: the running and waiting jobs
(never future arrivals), each submitted at ``now`` with its remaining work as its
duration. Running jobs keep running under non-preemptive candidates (they are ranked
first), as the real engine would not evict them. Approximations, stated: attained
service restarts from zero in the snapshot, placement may differ from the live one,
and a job unfinished at the horizon counts as finishing at the horizon. At most
``max_jobs`` waiting jobs per partition (in queue order) are simulated, to bound the
cost of a decision on long queues.

Target metrics: ``avg_jct`` (mean JCT from each job's real submit time) or ``weighted``
(``jct_weight * avg JCT + responsiveness_weight * avg time to first start`` over jobs
that have not started yet). Ties keep the current combination (no needless switches);
ties among others are broken by a generator seeded with ``seed``, so runs are
deterministic. ``workers > 1`` scores candidates in parallel processes.

Every evaluation is recorded in ``timeline`` (time, chosen combination, score, all
candidates' scores); the experiment runner writes it to ``auto_timeline.csv``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, field_validator

from shapeshift.engine.state import JobState
from shapeshift.model import ClusterSpec, JobSpec, NodeSpec, Schedule
from shapeshift.policies.base import ARRIVAL, COMPLETION, ROUND
from shapeshift.policies.composed import ADMISSIONS, ORDERINGS, Admission, ComposedPolicy, Ordering
from shapeshift.policies.placement import PLACEMENTS, PlacementName
from shapeshift.policies.registry import PolicyParams, register

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

TRIGGERS = frozenset({ARRIVAL, COMPLETION, ROUND})


def _oracle(kind: str) -> Callable[[], Ordering] | None:
    try:
        from shapeshift.policies import sjf
        from shapeshift.policies.estimators import make_estimator
    except ImportError:  # pragma: no cover - the size-based orderings are not installed
        return None
    cls = sjf.ShortestJobFirst if kind == "sjf" else sjf.ShortestRemainingFirst
    return lambda: cls(make_estimator("oracle"))


def _las() -> Callable[[], Ordering] | None:
    try:
        from shapeshift.policies.las import LeastAttainedService
    except ImportError:  # pragma: no cover
        return None
    return LeastAttainedService


def candidate_orderings() -> dict[str, Callable[[], Ordering]]:
    """Orderings ``auto`` can combine: the ``ORDERINGS`` registry, plus the library's
    size- and service-based orderings (oracle durations) where their modules exist."""
    found: dict[str, Callable[[], Ordering]] = {}
    for name, factory in (("las", _las()), ("sjf", _oracle("sjf")), ("srtf", _oracle("srtf"))):
        if factory is not None:
            found[name] = factory
    found.update(ORDERINGS)
    return dict(sorted(found.items()))


def _names(value: Any) -> Any:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


class AutoParams(PolicyParams):
    #: Candidate orderings (names in ``ORDERINGS``), comma-separated; ``all`` = every registered one.
    orderings: list[str] = Field(default_factory=lambda: ["all"], validate_default=True)
    #: Candidate admission policies (names in ``ADMISSIONS``); ``all`` = every registered one.
    admissions: list[str] = Field(default_factory=lambda: ["accept-all"], validate_default=True)
    #: Re-evaluate every ``k`` rounds.
    k: int = Field(4, ge=1)
    #: Round length in seconds.
    round: float = Field(300.0, gt=0)
    #: Look-ahead window of each candidate simulation, seconds.
    lookahead: float = Field(6 * 3600.0, gt=0)
    #: Waiting jobs per partition included in a candidate simulation.
    max_jobs: int = Field(256, ge=1)
    target: Literal["avg_jct", "weighted"] = "avg_jct"
    jct_weight: float = Field(1.0, ge=0)
    responsiveness_weight: float = Field(1.0, ge=0)
    placement: PlacementName = "consolidated"
    #: Non-preemptive orderings: let later jobs start while the queue head waits.
    backfill: bool = False
    #: Processes scoring candidates in parallel (1 = in this process).
    workers: int = Field(1, ge=1)
    seed: int = 0

    @field_validator("orderings", mode="before")
    @classmethod
    def _orderings(cls, value: Any) -> Any:
        return _expand(_names(value), candidate_orderings(), "ordering")

    @field_validator("admissions", mode="before")
    @classmethod
    def _admissions(cls, value: Any) -> Any:
        return _expand(_names(value), ADMISSIONS, "admission")


def _expand(names: Any, known: Mapping[str, Any], kind: str) -> Any:
    if not isinstance(names, list):
        return names
    if names == ["all"]:
        return sorted(known)
    if not names:
        raise ValueError(f"give at least one {kind}")
    for name in names:
        if name not in known:
            raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(sorted(known))}")
    if len(set(names)) != len(names):
        raise ValueError(f"{kind}s listed twice")
    return names


@dataclass(frozen=True)
class Combination:
    ordering: str
    admission: str

    def __str__(self) -> str:
        return f"{self.ordering}+{self.admission}"


@dataclass(frozen=True)
class TimelineEntry:
    """One evaluation: when, what was chosen, its score and every candidate's score."""

    time: float
    chosen: Combination
    score: float
    switched: bool
    candidates: tuple[tuple[str, float], ...]


class _Pinned:
    """Ranks the jobs running at snapshot time first, then the candidate's order: what a
    non-preemptive scheduler does to jobs it already started."""

    def __init__(self, inner: Ordering, pinned: frozenset[str]):
        self.inner = inner
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.pinned = pinned

    def prepare(self, view: ClusterView) -> None:
        prepare = getattr(self.inner, "prepare", None)
        if prepare is not None:
            prepare(view)

    def order(self, view: ClusterView, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        jobs = list(jobs)
        first = [j for j in jobs if j in self.pinned]
        rest = [j for j in jobs if j not in self.pinned]
        return [*first, *self.inner.order(view, partition, rest)]


@dataclass(frozen=True)
class _Snapshot:
    """What a candidate simulation needs; picklable (``ClusterSpec`` is not)."""

    now: float
    jobs: tuple[JobSpec, ...]
    submitted: tuple[float, ...]
    started: frozenset[str]
    nodes: tuple[NodeSpec, ...]
    partitions: tuple[tuple[str, tuple[str, ...]], ...]
    tenants: tuple[tuple[str, int], ...]

    def cluster(self) -> ClusterSpec:
        return ClusterSpec(self.nodes, dict(self.partitions), dict(self.tenants))


@dataclass(frozen=True)
class _Settings:
    placement: str
    backfill: bool
    round: float
    lookahead: float
    target: str
    jct_weight: float
    responsiveness_weight: float


def build_combination(combo: Combination, settings: _Settings, pinned: frozenset[str] = frozenset()) -> ComposedPolicy:
    ordering: Ordering = candidate_orderings()[combo.ordering]()
    if pinned and not ordering.preemptive:
        ordering = _Pinned(ordering, pinned)
    return ComposedPolicy(
        name=f"auto[{combo}]",
        admission=ADMISSIONS[combo.admission](),
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
    adopt = getattr(new, "adopt", None)
    if adopt is not None:
        for partition in view.partitions:
            admitted = old.admit(view, partition)
            adopt(view, [j for j in admitted if view.job(j).spec.submit_time < view.now])
    return new


def score_candidate(snapshot: _Snapshot, combo: Combination, settings: _Settings) -> float:
    """The target metric of ``combo`` simulated from ``snapshot`` (lower is better)."""
    from shapeshift.sim.simulator import simulate  # policies never import the simulator at module level

    policy = build_combination(combo, settings, snapshot.started)
    result = simulate(list(snapshot.jobs), snapshot.cluster(), policy, round_seconds=settings.round)
    horizon = snapshot.now + settings.lookahead
    submitted = dict(zip((j.job_id for j in snapshot.jobs), snapshot.submitted, strict=True))
    jct: list[float] = []
    response: list[float] = []
    for status in result.jobs:
        origin = submitted[status.job_id]
        end = status.end_time if status.state is JobState.COMPLETED and status.end_time is not None else math.inf
        jct.append(min(end, horizon) - origin)
        if status.job_id not in snapshot.started:
            first = status.first_start if status.first_start is not None else math.inf
            response.append(min(first, horizon) - origin)
    avg_jct = float(np.mean(jct)) if jct else 0.0
    if settings.target == "avg_jct":
        return avg_jct
    avg_resp = float(np.mean(response)) if response else 0.0
    return settings.jct_weight * avg_jct + settings.responsiveness_weight * avg_resp


def _score_task(args: tuple[_Snapshot, Combination, _Settings]) -> float:
    return score_candidate(*args)


class AutoPolicy:
    """Delegates to the active combination; re-chooses it every ``k`` rounds."""

    name = "auto"
    triggers = TRIGGERS

    def __init__(self, params: AutoParams):
        self.params = params
        self.default_round: float | None = params.round
        self.combinations = tuple(Combination(o, a) for o in params.orderings for a in params.admissions)
        self.settings = _Settings(
            placement=params.placement,
            backfill=params.backfill,
            round=params.round,
            lookahead=params.lookahead,
            target=params.target,
            jct_weight=params.jct_weight,
            responsiveness_weight=params.responsiveness_weight,
        )
        self.active = self.combinations[0]
        self._policy = build_combination(self.active, self.settings)
        self._next_eval = 0.0
        self._rng = np.random.default_rng(params.seed)
        self.timeline: list[TimelineEntry] = []

    @property
    def switches(self) -> int:
        return sum(1 for e in self.timeline if e.switched)

    def decide(self, view: ClusterView) -> Schedule:
        if view.now >= self._next_eval and len(self.combinations) > 1 and self._has_waiting(view):
            self._evaluate(view)
            self._next_eval = view.now + self.params.k * self.params.round
        return self._policy.decide(view)

    @staticmethod
    def _has_waiting(view: ClusterView) -> bool:
        return any(view.pending_count(p) for p in view.partitions)

    def snapshot(self, view: ClusterView) -> _Snapshot:
        """Running and waiting jobs as fresh submissions at ``now`` with their remaining work."""
        now = view.now
        jobs: list[JobSpec] = []
        submitted: list[float] = []
        started: set[str] = set()
        for partition in sorted(view.partitions):
            waiting = list(view.pending(partition))[: self.params.max_jobs]
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
                submitted.append(status.spec.submit_time)
                if status.state is JobState.RUNNING:
                    started.add(job_id)
        cluster = view.cluster
        return _Snapshot(
            now=now,
            jobs=tuple(jobs),
            submitted=tuple(submitted),
            started=frozenset(started),
            nodes=cluster.nodes,
            partitions=tuple(sorted(cluster.partitions.items())),
            tenants=tuple(sorted(cluster.tenants.items())),
        )

    def _scores(self, snapshot: _Snapshot) -> list[float]:
        tasks = [(snapshot, combo, self.settings) for combo in self.combinations]
        if self.params.workers > 1:
            with ProcessPoolExecutor(max_workers=min(self.params.workers, len(tasks))) as pool:
                return list(pool.map(_score_task, tasks))
        return [_score_task(t) for t in tasks]

    def _evaluate(self, view: ClusterView) -> None:
        scores = self._scores(self.snapshot(view))
        best = min(scores)
        tolerance = 1e-9 * max(abs(best), 1.0)
        incumbent = self.combinations.index(self.active)
        if scores[incumbent] <= best + tolerance:
            choice = incumbent
        else:
            ties = [i for i, s in enumerate(scores) if s <= best + tolerance]
            choice = ties[int(self._rng.integers(len(ties)))] if len(ties) > 1 else ties[0]
        chosen = self.combinations[choice]
        switched = chosen != self.active
        if switched:
            self.active = chosen
            previous = self._policy.admission
            self._policy = build_combination(chosen, self.settings)
            self._policy.admission = hand_over(previous, self._policy.admission, view)
        candidates = tuple((str(c), round(s, 6)) for c, s in zip(self.combinations, scores, strict=True))
        self.timeline.append(TimelineEntry(view.now, chosen, round(scores[choice], 6), switched, candidates))

    def write_timeline(self, path: str | Path) -> None:
        write_timeline(self.timeline, path)


TIMELINE_COLUMNS = ("time", "ordering", "admission", "score", "switched", "candidates")


def write_timeline(timeline: Sequence[TimelineEntry], path: str | Path) -> None:
    with Path(path).open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(TIMELINE_COLUMNS)
        for e in timeline:
            scores = ";".join(f"{name}={score!r}" for name, score in e.candidates)
            writer.writerow(
                (repr(round(e.time, 6)), e.chosen.ordering, e.chosen.admission, repr(e.score), int(e.switched), scores)
            )


@register(
    "auto",
    "Blox automatic policy synthesis: every k rounds, simulate each ordering x admission combination from the "
    "current state for a look-ahead window and switch to the best (avg JCT or weighted JCT + responsiveness).",
    AutoParams,
)
def make_auto(params: AutoParams) -> AutoPolicy:
    return AutoPolicy(params)
