"""Lucid's system tuner: choose T_prof and the binder threshold by simulating recent history.

Hu's thesis (chapter 4, "system tuner") and Lucid (ASPLOS 2023) keep Lucid's two main
knobs current: the tuner replays recent history in Lucid's own simulator under every
candidate setting of the profiling time limit T_prof and the affine-pair threshold, and
adopts the setting with the lowest average JCT. The artifact ships no tuner code (its
simulator takes both knobs as arguments), so the rules below are ours where the thesis
is silent, each a ``LucidParams`` field:

* **when**: every ``tuner_every_days`` (default 7, the cadence of Lucid's other
  retraining) once ``tuner_jobs`` jobs have finished;
* **history**: the ``tuner_jobs`` (default 300) most recently finished jobs, with their
  recorded durations, resubmitted at their own submit times (shifted to start at 0) on
  the same cluster: only the past is replayed, so nothing leaks from the future;
* **candidates**: T_prof in ``TUNER_PROFILE_SECONDS`` and thresholds in
  ``TUNER_THRESHOLDS``, around the thesis's defaults (200 s, 2);
* **replays** run Lucid without the tuner and without learned duration models (the
  running mean; a nested PrAM fit per candidate would cost minutes), so the replay
  measures the knobs, not the model's training;
* **choice**: the lowest average JCT; ties keep the current setting, then the smaller
  values. Every sweep is kept (``TunerChoice.table``) so the choice can be explained.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from shapeshift.engine.contract import Policy
from shapeshift.engine.replay import Replay
from shapeshift.engine.state import JobState
from shapeshift.model import ClusterSpec, JobSpec

TUNER_PROFILE_SECONDS = (100.0, 200.0, 400.0)
TUNER_THRESHOLDS = (1, 2, 3)


@dataclass(frozen=True)
class TunerChoice:
    """One sweep: when, on how many jobs, every candidate's average JCT, and the pick."""

    at: float
    jobs: int
    table: tuple[tuple[float, int, float], ...]  # (T_prof, threshold, avg JCT in s)
    profile_seconds: float
    threshold: int

    def explain(self) -> str:
        rows = ", ".join(f"T_prof {t:g} s / threshold {k}: {jct:,.0f} s" for t, k, jct in self.table)
        return (
            f"at {self.at:,.0f} s on the last {self.jobs} finished jobs: {rows}; "
            f"chose T_prof {self.profile_seconds:g} s, threshold {self.threshold} (lowest average JCT)"
        )


def replay_jobs(history: Sequence[JobSpec]) -> list[JobSpec]:
    """The finished jobs resubmitted in their own order, the first at time 0."""
    ordered = sorted(history, key=lambda j: (j.submit_time, j.job_id))
    start = ordered[0].submit_time if ordered else 0.0
    return [replace(j, submit_time=j.submit_time - start) for j in ordered]


def average_jct(jobs: Sequence[JobSpec], cluster: ClusterSpec, policy: Policy, replay: Replay) -> float:
    done = [s.end_time - s.spec.submit_time for s in replay(jobs, cluster, policy) if s.state is JobState.COMPLETED]
    # A setting that leaves jobs unfinished on its own history is never preferred.
    return sum(done) / len(done) if len(done) == len(jobs) and done else float("inf")


def sweep(
    now: float,
    history: Sequence[JobSpec],
    cluster: ClusterSpec,
    make: Callable[[float, int], Policy],
    current: tuple[float, int],
    replay: Replay,
    profile_seconds: Sequence[float] = TUNER_PROFILE_SECONDS,
    thresholds: Sequence[int] = TUNER_THRESHOLDS,
) -> TunerChoice:
    """Replay ``history`` with ``replay`` under every candidate (``make(T_prof, threshold)``
    builds the policy) and pick the lowest average JCT (ties: the current setting, then smaller)."""
    jobs = replay_jobs(history)
    table = tuple((t, k, average_jct(jobs, cluster, make(t, k), replay)) for t in profile_seconds for k in thresholds)
    best = min(table, key=lambda row: (row[2], (row[0], row[1]) != current, row[0], row[1]))
    return TunerChoice(now, len(jobs), table, best[0], best[1])


def retune(
    now: float,
    history: Sequence[JobSpec],
    cluster: ClusterSpec,
    build: Callable[[dict[str, Any]], Policy],
    sharing: str,
    current: tuple[float, int],
    replay: Replay,
) -> TunerChoice:
    """The sweep of the module docstring: ``build(updates)`` makes a Lucid whose parameters
    are the running one's with ``updates`` (no tuner, no learned durations, and sharing
    whenever the binder allows when the running Lucid uses the forecaster's switch)."""
    replay_sharing = "always" if sharing == "adaptive" else sharing

    def make(seconds: float, threshold: int) -> Policy:
        return build(
            {
                "profile_seconds": seconds,
                "share_threshold": threshold,
                "system_tuner": False,
                "min_train_jobs": 10**9,
                "sharing": replay_sharing,
            }
        )

    return sweep(now, history, cluster, make, current, replay)
