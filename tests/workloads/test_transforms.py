"""Transformations on hand-built workloads with hand-computed results."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from shapeshift.errors import InputError
from shapeshift.workloads import transforms
from shapeshift.workloads.workload import Workload


def _workload(rows, **extra) -> Workload:
    frame = pd.DataFrame(rows, columns=["job_id", "submit_time", "num_gpus", "duration", *extra])
    return Workload.from_frame("t", frame)


FOUR = [("a", 0.0, 1, 100.0), ("b", 10.0, 2, 100.0), ("c", 20.0, 4, 100.0), ("d", 30.0, 8, 100.0)]


def test_time_window_keeps_half_open_interval_and_restarts_the_clock():
    out = transforms.time_window(_workload(FOUR), 10.0, 30.0).frame
    assert out["job_id"].tolist() == ["b", "c"] and out["submit_time"].tolist() == [0.0, 10.0]
    assert transforms.time_window(_workload(FOUR), None, 15.0).frame["job_id"].tolist() == ["a", "b"]
    assert transforms.time_window(_workload(FOUR), 25.0).frame["submit_time"].tolist() == [5.0]
    with pytest.raises(InputError, match="must be after its start"):
        transforms.time_window(_workload(FOUR), 30.0, 10.0)


def test_time_window_shifts_log_times_too():
    frame = pd.DataFrame(
        {"job_id": ["a", "b"], "submit_time": [100.0, 200.0], "num_gpus": [1, 1], "duration": [5.0, 5.0]}
    )
    frame["start_time"] = [150.0, math.nan]
    frame["end_time"] = [155.0, math.nan]
    out = transforms.time_window(Workload.from_frame("x", frame), 100.0).frame
    assert out["start_time"].iloc[0] == 50.0 and out["end_time"].iloc[0] == 55.0 and math.isnan(out["start_time"][1])


def test_filter_vc():
    w = _workload([(*r, vc) for r, vc in zip(FOUR, ["x", "y", "x", "z"], strict=True)], vc=None)
    assert transforms.filter_vc(w, ["x", "z"]).frame["job_id"].tolist() == ["a", "c", "d"]
    with pytest.raises(InputError, match=r"unknown virtual cluster\(s\) nope.*'x', 'y', 'z'"):
        transforms.filter_vc(w, ["x", "nope"])


def test_scale_load_compresses_and_stretches_arrivals():
    assert transforms.scale_load(_workload(FOUR), 2.0).frame["submit_time"].tolist() == [0.0, 5.0, 10.0, 15.0]
    stretched = transforms.scale_load(_workload(FOUR), 0.5).frame
    assert stretched["submit_time"].tolist() == [0.0, 20.0, 40.0, 60.0]
    assert stretched["duration"].tolist() == [100.0] * 4
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(InputError, match="positive number"):
            transforms.scale_load(_workload(FOUR), bad)


def test_busiest_window_counts_requested_gpus():
    rows = [("a", 0.0, 1, 1.0), ("b", 3600.0, 8, 1.0), ("c", 7000.0, 8, 1.0), ("d", 7300.0, 1, 1.0)]
    # 1-hour windows from each submission: a: 1 GPU; b: 8 + 8 = 16 (c at 7000 < 7200); c: 9; d: 1
    assert transforms.busiest_window(_workload(rows), 1.0) == (3600.0, 7200.0)


def test_downsample_keeps_each_job_with_the_gpu_ratio():
    n = 10000
    w = _workload([(f"j{i}", float(i), 1, 10.0) for i in range(n)])
    kept = transforms.downsample(w, 64, 256, seed=7)
    assert len(kept) == pytest.approx(n / 4, rel=0.05)
    pd.testing.assert_frame_equal(kept.frame, transforms.downsample(w, 64, 256, seed=7).frame)
    assert not kept.frame.equals(transforms.downsample(w, 64, 256, seed=8).frame)
    assert len(transforms.downsample(w, 256, 256)) == n
    with pytest.raises(InputError, match="more GPUs"):
        transforms.downsample(w, 512, 256)


def test_downsample_with_hours_takes_the_busiest_window_first():
    rows = [("a", 0.0, 1, 1.0), ("b", 3600.0, 8, 1.0), ("c", 7000.0, 8, 1.0), ("d", 7300.0, 1, 1.0)]
    out = transforms.downsample(_workload(rows), 10, 10, hours=1.0).frame
    assert out["job_id"].tolist() == ["b", "c"] and out["submit_time"].tolist() == [0.0, 3400.0]


def test_replace_infeasible_gpus_keeps_gpu_hours():
    rows = [
        ("a", 0.0, 3, 100.0, "m", "dp=3"),
        ("b", 1.0, 6, 100.0, "m", "dp=1,tp=3,pp=2"),
        ("c", 2.0, 5, 100.0, "m", ""),
        ("d", 3.0, 4, 100.0, "m", ""),
        ("e", 4.0, 3, 100.0, "other", ""),
        ("f", 5.0, 3, 100.0, "", ""),
    ]
    w = _workload(rows, model=None, plan=None)
    out = transforms.replace_infeasible_gpus(w, {"m": [1, 2, 4, 8]}).frame.set_index("job_id")
    # 3 -> 2 (tie with 4: the smaller), 6 -> 4 (tie with 8), 5 -> 4, 4 stays; others untouched
    assert out["num_gpus"].to_dict() == {"a": 2, "b": 4, "c": 4, "d": 4, "e": 3, "f": 3}
    assert out["duration"].to_dict() == {"a": 150.0, "b": 150.0, "c": 125.0, "d": 100.0, "e": 100.0, "f": 100.0}
    assert out.loc["a", "plan"] == "dp=2,tp=1,pp=1,zero=none,ga=1,gc=0,mb=1"  # data parallel: resized
    assert out.loc["b", "plan"] == ""  # a 3D plan cannot follow: dropped
    before = (w.frame["num_gpus"] * w.frame["duration"]).sum()
    assert (out["num_gpus"] * out["duration"]).sum() == pytest.approx(before)
    # a callable works the same; None = unknown model
    again = transforms.replace_infeasible_gpus(w, lambda m: [1, 2, 4, 8] if m == "m" else None)
    assert again.frame["num_gpus"].tolist() == [2, 4, 4, 4, 3, 3]
    with pytest.raises(InputError, match=">= 1"):
        transforms.replace_infeasible_gpus(w, {"m": [0, 2]})


def test_cpu_job_modes():
    w = _workload([("a", 0.0, 0, 5.0, True), ("b", 1.0, 1, 5.0, False)], cpu_only=None)
    assert [j.job_id for j in transforms.cpu_jobs(w, "keep").jobs()] == ["b"]
    assert transforms.cpu_jobs(w, "drop").frame["job_id"].tolist() == ["b"]
    assert [j.job_id for j in transforms.cpu_jobs(w, "include").jobs()] == ["a", "b"]
    with pytest.raises(InputError, match="unknown CPU-job mode"):
        transforms.cpu_jobs(w, "maybe")


def test_transforms_do_not_modify_their_input():
    w = _workload(FOUR)
    before = w.frame.copy()
    transforms.scale_load(w, 3.0)
    transforms.time_window(w, 5.0)
    transforms.replace_infeasible_gpus(_workload([(*r, "m") for r in FOUR], model=None), {"m": [16]})
    pd.testing.assert_frame_equal(w.frame, before)
    assert np.array_equal(w.frame["submit_time"], [0.0, 10.0, 20.0, 30.0])
