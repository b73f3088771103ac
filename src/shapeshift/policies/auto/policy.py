"""``auto``: automatic policy synthesis (Blox, Agarwal et al., EuroSys 2024, Sec. 6).

No single ordering/admission pair wins on every load: shortest-first helps a queue of
mixed short and long jobs, while a wide short job at the head of a shortest-first queue
can block narrow jobs that would have filled the cluster. Blox decides online: every
``k`` scheduling rounds, simulate each candidate combination of an ordering and an
admission policy from the current state and switch to the one with the best target.

Defaults, as Blox (paper Sec. 6; ``blox_examples/blox_new_flow_dynamic_policy.py`` and
``simulator_runner/predict_simulation.py``):

* candidates {FIFO, SRTF, LAS} x {accept-all, load-based 1.2x, load-based 1.4x}
  (``load-based:X`` names any threshold);
* a decision every ``k = 10`` rounds of ``round = 300`` s, decisions only at rounds (the
  artifact's loop re-evaluates every round; the paper's figure is every 10);
* each candidate simulation runs until no job remains, starting from the attained
  service of every job and the admission state of waiting jobs (see
  ``candidates``); ``horizon = S`` stops it after S seconds instead (cheaper; jobs
  unfinished then count as finishing then).

The target is ``avg_jct`` (mean JCT from each job's real submit time) or ``weighted``
(``jct_weight * avg JCT + responsiveness_weight * avg time to first start`` over jobs
that have not started). Ties keep the current combination; ties among others are broken
by a generator seeded with ``seed``. ``workers > 1`` scores candidates in parallel
processes. When the admission policy changes, the jobs the old one admitted stay
admitted (``hand_over``).

Every evaluation is recorded in ``timeline`` (time, chosen combination, score, all
candidates' scores); the run writes it to ``auto_timeline.csv``.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, field_validator

from shapeshift.engine.replay import Replay, require
from shapeshift.model import Schedule
from shapeshift.policies.auto.candidates import (
    TRIGGERS,
    Combination,
    Settings,
    build_combination,
    candidate_orderings,
    expand_names,
    hand_over,
    score_task,
    take_snapshot,
)
from shapeshift.policies.framework.placement import PlacementName
from shapeshift.policies.framework.registry import PolicyParams, register

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

__all__ = ["AutoParams", "AutoPolicy", "Combination", "TimelineEntry", "hand_over", "write_timeline"]


class AutoParams(PolicyParams):
    #: Candidate orderings, comma-separated; ``all`` = every one ``auto`` knows.
    orderings: list[str] = Field(default_factory=lambda: ["fifo", "srtf", "las"], validate_default=True)
    #: Candidate admissions: ``accept-all``, ``load-based`` (1.2x) or ``load-based:X``.
    admissions: list[str] = Field(
        default_factory=lambda: ["accept-all", "load-based:1.2", "load-based:1.4"], validate_default=True
    )
    #: Re-evaluate every ``k`` rounds.
    k: int = Field(10, ge=1)
    #: Round length in seconds.
    round: float = Field(300.0, gt=0, allow_inf_nan=False)
    #: Seconds simulated per candidate; unset = until no job remains (Blox).
    horizon: float | None = Field(None, gt=0, allow_inf_nan=False)
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
        return expand_names(value, candidate_orderings(), "ordering")

    @field_validator("admissions", mode="before")
    @classmethod
    def _admissions(cls, value: Any) -> Any:
        return expand_names(value, None, "admission")


@dataclass(frozen=True)
class TimelineEntry:
    """One evaluation: when, what was chosen, its score and every candidate's score."""

    time: float
    chosen: Combination
    score: float
    switched: bool
    candidates: tuple[tuple[str, float], ...]


class AutoPolicy:
    """Delegates to the active combination; re-chooses it every ``k`` rounds."""

    name = "auto"
    triggers = TRIGGERS

    def __init__(self, params: AutoParams):
        self.params = params
        self.default_round: float | None = params.round
        self.combinations = tuple(Combination(o, a) for o in params.orderings for a in params.admissions)
        self.settings = Settings(
            placement=params.placement,
            backfill=params.backfill,
            round=params.round,
            horizon=params.horizon,
            target=params.target,
            jct_weight=params.jct_weight,
            responsiveness_weight=params.responsiveness_weight,
        )
        self.active = self.combinations[0]
        self._policy = build_combination(self.active, self.settings)
        self._next_eval = 0.0
        self._rng = np.random.default_rng(params.seed)
        self.timeline: list[TimelineEntry] = []
        self._replay: Replay | None = None

    def use_replay(self, replay: Replay) -> None:
        """The simulation that scores candidates (``shapeshift.engine.replay``)."""
        self._replay = replay

    @property
    def switches(self) -> int:
        return sum(1 for e in self.timeline if e.switched)

    def summary_fields(self) -> dict[str, int]:
        """How often the combination was evaluated and how often it changed."""
        return {"auto_switches": self.switches, "auto_evaluations": len(self.timeline)}

    def decide(self, view: ClusterView) -> Schedule:
        if view.now >= self._next_eval and len(self.combinations) > 1 and self._has_waiting(view):
            self._evaluate(view)
            self._next_eval = view.now + self.params.k * self.params.round
        return self._policy.decide(view)

    @staticmethod
    def _has_waiting(view: ClusterView) -> bool:
        return any(view.pending_count(p) for p in view.partitions)

    def _scores(self, view: ClusterView) -> list[float]:
        snapshot = take_snapshot(view, self._policy.admission, self.params.max_jobs)
        replay = require(self._replay, self.name)
        tasks = [(snapshot, combo, self.settings, replay) for combo in self.combinations]
        if self.params.workers > 1:
            with ProcessPoolExecutor(max_workers=min(self.params.workers, len(tasks))) as pool:
                return list(pool.map(score_task, tasks))
        return [score_task(t) for t in tasks]

    def _evaluate(self, view: ClusterView) -> None:
        scores = self._scores(view)
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
    "Blox automatic policy synthesis: every 10 rounds of 300 s, simulate each of {fifo, srtf, las} x {accept-all, "
    "load-based 1.2x, 1.4x} from the current state until no job remains, and switch to the best.",
    AutoParams,
)
def make_auto(params: AutoParams) -> AutoPolicy:
    return AutoPolicy(params)
