"""``Workload.jobs()``: the table turned back into ``JobSpec`` objects, field for field."""

from __future__ import annotations

import pytest

from shapeshift.model import BatchSpec, ExecutionPlan, JobSpec, ModelError
from shapeshift.workloads.workload import Workload


def test_every_field_survives_the_table():
    # Each optional column set on some job and left empty on another: the table written
    # from these jobs must give back equal jobs, in submit order, every field typed alike.
    jobs = [
        JobSpec("a", 0.0, 2, 100.0, name="n", user="u", vc="v", tenant="t", guaranteed=True, model="m"),
        JobSpec("b", 1.5, 4, None, num_cpus=8.0, mem_gb=32.0, iterations=500, plan=ExecutionPlan.parse("dp=2,tp=2")),
        JobSpec(
            "c", 2.0, 1, 50.0, batch=BatchSpec.parse("size=64,adaptive=1"), gpu_speed=(("a100", 2.0), ("v100", 1.0))
        ),
        JobSpec("d", 3.0, 1, 10.0, time_limit=60.0, qos="high", gpu_milli=250, gpu_types=frozenset({"a100", "t4"})),
        JobSpec("e", 4.0, 4, 10.0, namespace="ns", queue_name="q", priority_class="p", pods=2),
        JobSpec("f", 5.0, 0, 1.0, num_cpus=1.0),
    ]
    back = Workload.from_jobs("all", jobs).jobs()
    assert back == jobs
    for got, want in zip(back, jobs, strict=True):
        for name in ("duration", "iterations", "time_limit", "num_cpus", "gpu_milli", "pods"):
            assert type(getattr(got, name)) is type(getattr(want, name)), name


def test_the_first_bad_row_is_the_one_refused():
    # Row "a" breaks a JobSpec rule (negative duration) and row "b", later, holds a plan
    # that does not parse: the refusal names row "a", as a row-by-row reading would.
    frame = Workload.from_jobs("w", [JobSpec("a", 0.0, 1, 10.0), JobSpec("b", 1.0, 1, 10.0)]).frame.copy()
    frame.loc[0, "duration"] = -1.0
    frame.loc[1, "plan"] = "nonsense"
    with pytest.raises(ModelError, match="job a: duration must be >= 0"):
        Workload.from_frame("w", frame).jobs()
    frame.loc[0, "duration"] = 10.0
    with pytest.raises(ModelError, match="bad plan item"):
        Workload.from_frame("w", frame).jobs()
