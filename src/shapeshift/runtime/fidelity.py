"""Simulator fidelity: replay a live run in the simulator and compare job completion times.

The live controller records, per job, its submit time, end time and the iteration times
the job itself reported. Replaying the same jobs in the simulator with those measured
iteration times (work = iterations x mean iteration time) and the same policy tells how
far the simulator's JCTs are from reality; the gap is process start-up and polling,
which ``launch_delay`` can model.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shapeshift.engine.overheads import Overheads
from shapeshift.model import ClusterSpec, JobSpec
from shapeshift.runs import RunSpec, run
from shapeshift.workloads.workload import Workload


@dataclass(frozen=True)
class Fidelity:
    """Per-job live and simulated JCT (seconds) and the relative differences."""

    live: dict[str, float]
    simulated: dict[str, float]

    @property
    def errors(self) -> dict[str, float]:
        return {j: abs(self.simulated[j] - self.live[j]) / self.live[j] for j in self.live}

    @property
    def mean_error(self) -> float:
        return statistics.fmean(self.errors.values())


def measured_launch_delay(jobs: Sequence[dict[str, Any]]) -> float:
    """Median per-job overhead seen live: run time beyond the reported iterations
    (process start-up, imports, polling), as a ``launch_delay`` for the simulator."""
    return statistics.median(
        max(j["end_time"] - j["first_start"] - j["iterations"] * j["iter_time"], 0.0) for j in jobs
    )


def compare(
    jobs: Sequence[dict[str, Any]],
    cluster: ClusterSpec,
    policy: str,
    params: Mapping[str, Any] | None = None,
    launch_delay: float = 0.0,
) -> Fidelity:
    """``jobs``: completed job rows from the controller API (with ``iter_time`` measured),
    replayed under the registered ``policy`` with the simulator's one run path."""
    t0 = min(j["submit_time"] for j in jobs)
    specs = [
        JobSpec(
            job_id=j["id"],
            submit_time=j["submit_time"] - t0,
            num_gpus=j["gpus"] or 1,
            duration=j["iterations"] * j["iter_time"],
        )
        for j in sorted(jobs, key=lambda j: (j["submit_time"], int(j["id"])))
    ]
    spec = RunSpec(
        workload=Workload.from_jobs("live", specs),
        cluster=cluster,
        policy=policy,
        params=tuple((params or {}).items()),
        overheads=Overheads(launch_delay=launch_delay, restore_penalty=0.0),
    )
    result = run(spec).simulation
    simulated = {s.job_id: s.end_time - s.spec.submit_time for s in result.jobs}
    live = {j["id"]: j["end_time"] - j["submit_time"] for j in jobs}
    return Fidelity(live=live, simulated=simulated)
