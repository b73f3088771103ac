"""Experiment workloads: the daily spike generator and the transformations."""

from __future__ import annotations

import numpy as np
import pytest

from shapeshift.experiments.workloads import WorkloadSpec, build_workload, content_hash


def poisson(**params) -> WorkloadSpec:
    return WorkloadSpec(name="w", generator="poisson", params=tuple(sorted(params.items())), seed=0)


def test_daily_spike_concentrates_arrivals_in_the_spike_hours():
    plain = build_workload(poisson(jobs=2000, rate=4))
    spiky = build_workload(poisson(jobs=2000, rate=4, daily_spike={"start_hour": 10, "hours": 2, "factor": 6}))
    hour = (spiky.frame["submit_time"].to_numpy() % 86400) // 3600
    in_spike = np.isin(hour, [10, 11]).mean()
    # rate 6x for 2 of 24 hours: expected share 12 / (22 + 12) = 0.35 (vs 2/24 = 0.083 without)
    assert in_spike == pytest.approx(12 / 34, abs=0.04)
    plain_hour = (plain.frame["submit_time"].to_numpy() % 86400) // 3600
    assert np.isin(plain_hour, [10, 11]).mean() == pytest.approx(2 / 24, abs=0.03)
    # same sizes and durations, paired runs
    assert (spiky.frame["duration"].to_numpy() == plain.frame["duration"].to_numpy()).all()
    assert (spiky.frame["submit_time"].diff().dropna() >= 0).all()


def test_generators_are_seeded():
    a, b = build_workload(poisson(jobs=50)), build_workload(poisson(jobs=50))
    assert content_hash(a) == content_hash(b)
    c = build_workload(WorkloadSpec(name="w", generator="poisson", params=(("jobs", 50),), seed=1))
    assert content_hash(c) != content_hash(a)


def test_transformations(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,num_gpus,duration\n" + "".join(f"j{i},{10 * i},1,100\n" for i in range(6)))
    spec = WorkloadSpec(
        name="t", file=str(trace), transforms=(("head", 4), ("load_scale", 2), ("duration_scale", {"factor": 0.5}))
    )
    data = build_workload(spec)
    assert data.frame["submit_time"].tolist() == [0, 5, 10, 15]
    assert data.frame["duration"].tolist() == [50] * 4
    assert data.name == "t"


def test_trace_transformations_from_the_workloads_package(tmp_path):
    # 8 jobs, 10 s apart, alternating between vc a and vc b.
    trace = tmp_path / "t.csv"
    rows = "".join(f"j{i},{10 * i},1,100,{'ab'[i % 2]}\n" for i in range(8))
    trace.write_text("job_id,submit_time,num_gpus,duration,vc\n" + rows)
    spec = WorkloadSpec(name="t", file=str(trace), transforms=(("window", {"start": 20, "end": 60}), ("vc", ["a"])))
    data = build_workload(spec)
    # window keeps submits 20..50 (j2..j5) re-based to 0; vc a keeps j2 and j4.
    assert data.frame["job_id"].tolist() == ["j2", "j4"]
    assert data.frame["submit_time"].tolist() == [0, 20]
    half = build_workload(
        WorkloadSpec(name="t", file=str(trace), transforms=(("downsample", {"target_gpus": 1, "source_gpus": 2}),))
    )
    again = build_workload(
        WorkloadSpec(name="t", file=str(trace), transforms=(("downsample", {"target_gpus": 1, "source_gpus": 2}),))
    )
    assert 0 < len(half) < 8 and half.frame["job_id"].tolist() == again.frame["job_id"].tolist()
