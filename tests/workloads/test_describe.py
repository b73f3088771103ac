"""``describe`` statistics on a hand-built workload."""

from __future__ import annotations

import pandas as pd
import pytest

from shapeshift.workloads.describe import describe, size_bucket
from shapeshift.workloads.workload import Workload


@pytest.mark.parametrize(
    ("gpus", "bucket"),
    [(0, (0, 0)), (1, (1, 1)), (2, (2, 2)), (3, (3, 4)), (4, (3, 4)), (5, (5, 8)), (16, (9, 16)), (17, (17, 32))],
)
def test_size_buckets(gpus, bucket):
    assert size_bucket(gpus) == bucket


def _workload() -> Workload:
    frame = pd.DataFrame(
        {
            "job_id": ["a", "b", "c", "d"],
            "submit_time": [0.0, 1800.0, 3600.0, 3600.0],
            "num_gpus": [1, 2, 8, 0],
            "duration": [3600.0, 1800.0, 900.0, 100.0],
            "vc": ["x", "y", "x", "x"],
            "tenant": ["A", "B", "A", "A"],
            "cpu_only": [False, False, False, True],
        }
    )
    return Workload.from_frame("hand", frame)


def test_describe_hand_computed():
    stats = describe(_workload())
    assert stats["jobs"] == 4 and stats["cpu_only_jobs"] == 1
    assert stats["time_span"]["span_s"] == 3600.0
    assert stats["arrival_rate_per_hour"] == pytest.approx(3.0)  # 3 gaps in one hour
    # GPU-hours: 1 x 1 h + 2 x 0.5 h + 8 x 0.25 h + 0 = 4
    assert stats["total_gpu_hours"] == pytest.approx(4.0)
    assert [(r["bucket"], r["jobs"], r["gpu_hours"]) for r in stats["gpu_demand"]] == [
        ("0 (CPU)", 1, 0.0),
        ("1", 1, 1.0),
        ("2", 1, 1.0),
        ("5-8", 1, 2.0),
    ]
    assert stats["gpu_demand"][3]["gpu_hour_share"] == pytest.approx(0.5)
    # durations 100, 900, 1800, 3600: median (900 + 1800) / 2
    assert stats["duration_s"]["p50"] == pytest.approx(1350.0) and stats["duration_s"]["max"] == 3600.0
    assert stats["per_vc"] == [
        {"name": "x", "jobs": 3, "gpu_hours": pytest.approx(3.0)},
        {"name": "y", "jobs": 1, "gpu_hours": pytest.approx(1.0)},
    ]
    assert [r["name"] for r in stats["per_tenant"]] == ["A", "B"]
    assert stats["models"] == [] and stats["states"] == []


def test_describe_empty_and_single_job():
    empty = describe(Workload.from_frame("e", pd.DataFrame(columns=["job_id", "submit_time", "num_gpus", "duration"])))
    assert empty["jobs"] == 0 and empty["arrival_rate_per_hour"] is None and empty["duration_s"] is None
    one = describe(Workload.from_frame("o", pd.DataFrame([("a", 5.0, 1, 10.0)], columns=empty_columns())))
    assert one["arrival_rate_per_hour"] is None and one["time_span"]["span_s"] == 0.0


def empty_columns() -> list[str]:
    return ["job_id", "submit_time", "num_gpus", "duration"]
