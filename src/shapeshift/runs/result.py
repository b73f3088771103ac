"""``RunResult`` and ``Comparison``: what a run gives back, in memory and on disk.

A result holds the ``summary.json`` mapping (the project's output contract), the engine's
per-job records, the rejections and the optional recordings. ``write(dir)`` produces the
files every front door writes: ``summary.json``, ``jobs.csv``, ``rejected.csv``, plus
``intervals.csv`` and ``auto_timeline.csv`` when they were recorded.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shapeshift.analysis.metrics import JOB_COLUMNS, job_rows, write_job_files
from shapeshift.engine.contract import KeepsTimeline
from shapeshift.engine.engine import Rejection
from shapeshift.runs.recording import Interval, write_intervals
from shapeshift.runs.result_columns import COMPARE_KEYS
from shapeshift.sim.simulator import SimulationResult

if TYPE_CHECKING:
    import pandas as pd

    from shapeshift.runs.spec import RunSpec



@dataclass(frozen=True)
class RunResult:
    """The outcome of :func:`shapeshift.runs.run`.

    ``summary`` is the ``summary.json`` mapping; ``jobs`` the per-job table of
    ``jobs.csv``; ``simulation`` the engine's own records (every ``JobStatus``).
    ``policy`` and ``throughput`` are the live objects the run used, for inspection in a
    notebook (a learned model's refits, a ground-truth model's look-up counts); they do
    not travel between processes.
    """

    spec: RunSpec
    summary: dict[str, Any]
    simulation: SimulationResult
    intervals: tuple[Interval, ...] | None = None
    energy: dict[str, Any] | None = None
    policy: Any = field(default=None, compare=False, repr=False)
    throughput: Any = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        # Policies and speed models may hold unpicklable state (learned models, caches):
        # a result sent back from a worker process keeps everything else.
        state = {f: getattr(self, f) for f in self.__dataclass_fields__}
        state["policy"] = state["throughput"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)

    @property
    def rejections(self) -> list[Rejection]:
        return list(self.simulation.rejections)

    @property
    def jobs(self) -> pd.DataFrame:
        """One row per job, the columns of ``jobs.csv`` (times in seconds, ``NaN`` where a
        job never started or did not finish)."""
        import pandas as pd

        return pd.DataFrame(job_rows(self.simulation), columns=list(JOB_COLUMNS))

    @property
    def timeline(self) -> list[Any] | None:
        """The ``auto`` policy's evaluations (``None`` for other policies)."""
        return self.policy.timeline if isinstance(self.policy, KeepsTimeline) else None

    def compare(self, *others: RunResult) -> Comparison:
        """This run and ``others`` side by side, labelled by policy name."""
        return Comparison.of([self, *others])

    def write(self, out: str | Path, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Write this run's files into ``out`` and return the summary written (``extra``
        fields appended, e.g. an experiment's run id)."""
        out = Path(out)
        summary = {**self.summary, **(extra or {})}
        write_job_files(self.simulation, out)
        if "explanations" in self.spec.record:  # shapeshift simulate --explain (estimator=primo)
            from shapeshift.predict.primo_duration import append_explanations

            append_explanations(out / "jobs.csv", self.policy)
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        if self.intervals is not None:
            write_intervals(list(self.intervals), out / "intervals.csv")
        if isinstance(self.policy, KeepsTimeline):
            self.policy.write_timeline(out / "auto_timeline.csv")
        return summary


@dataclass(frozen=True)
class Comparison(Mapping[str, RunResult]):
    """Several runs on the same inputs, keyed by label (the policy name unless given)."""

    results: tuple[tuple[str, RunResult], ...]

    @classmethod
    def of(cls, results: list[RunResult], labels: list[str] | None = None) -> Comparison:
        labels = labels or [r.spec.policy for r in results]
        if len(set(labels)) != len(labels):
            raise ValueError("comparison labels must be distinct; give each run a label")
        return cls(tuple(zip(labels, results, strict=True)))

    def __getitem__(self, label: str) -> RunResult:
        for name, result in self.results:
            if name == label:
                return result
        raise KeyError(label)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.results)

    def __len__(self) -> int:
        return len(self.results)

    def table(self) -> pd.DataFrame:
        """One row per run: the ``COMPARE_KEYS`` of its summary (``compare.csv``)."""
        import pandas as pd

        rows = [{"policy": name, **{k: r.summary.get(k) for k in COMPARE_KEYS}} for name, r in self.results]
        return pd.DataFrame(rows, columns=["policy", *COMPARE_KEYS]).set_index("policy")

    def write(self, out: str | Path) -> None:
        """``compare.csv`` plus one folder of run files per label."""
        out = Path(out)
        for name, result in self.results:
            result.write(out / name)
        write_compare_csv(out / "compare.csv", {name: r.summary for name, r in self.results})


def write_compare_csv(path: Path, summaries: Mapping[str, Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(("policy", *COMPARE_KEYS))
        for policy, summary in summaries.items():
            writer.writerow((policy, *("" if summary.get(k) is None else summary[k] for k in COMPARE_KEYS)))
