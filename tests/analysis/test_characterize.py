"""Trace characterization on small hand-built traces with known statistics."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from shapeshift.analysis.characterize import busy_curve, characterize, top_share, trace_origin
from shapeshift.cluster import shorthand_cluster
from shapeshift.workloads.workload import Workload
from tests.conftest import bundled

MONDAY = pd.Timestamp("2024-01-01 00:00:00")  # a Monday


def workload(rows: list[dict], name: str = "fixture", **extra: list) -> Workload:
    """A workload from rows; ``extra`` columns (state, queue, start/end) are added as given."""
    frame = pd.DataFrame(rows)
    frame["job_id"] = [str(i) for i in range(len(frame))]
    w = Workload.from_frame(name, frame)
    if extra:
        w = Workload(name=name, frame=w.frame.assign(**{k: v for k, v in extra.items()}))
    return w


def mixed() -> Workload:
    """5 GPU jobs and 1 CPU job in two VCs, submitted at known hours of a Monday."""
    rows = [
        {"submit_time": 1800.0, "num_gpus": 1, "duration": 100.0, "vc": "a", "user": "u1"},
        {"submit_time": 1900.0, "num_gpus": 1, "duration": 200.0, "vc": "a", "user": "u1"},
        {"submit_time": 5400.0, "num_gpus": 1, "duration": 300.0, "vc": "b", "user": "u2"},
        {"submit_time": 88200.0, "num_gpus": 8, "duration": 1000.0, "vc": "b", "user": "u3"},
        {"submit_time": 3.0, "num_gpus": 16, "duration": 50.0, "vc": "a", "user": "u3"},
        {"submit_time": 7.0, "num_gpus": 0, "duration": 10.0, "vc": "a", "user": "u2"},
    ]
    return workload(rows)


def test_duration_medians_for_gpu_and_cpu_jobs():
    stats = characterize(mixed(), origin=MONDAY).stats
    assert stats["gpu_jobs"] == 5 and stats["cpu_jobs"] == 1
    assert stats["durations"]["gpu"]["median_s"] == 200.0  # median of 50, 100, 200, 300, 1000
    assert stats["durations"]["gpu"]["mean_s"] == pytest.approx(330.0)
    assert stats["durations"]["cpu"]["median_s"] == 10.0


def test_job_size_shares_by_count_and_gpu_time():
    size = characterize(mixed(), origin=MONDAY).stats["job_size"]
    # GPU time: 100 + 200 + 300 (1-GPU) + 8000 (8 GPUs) + 800 (16 GPUs) = 9400.
    assert size["single_gpu_job_share"] == pytest.approx(3 / 5)
    assert size["single_gpu_time_share"] == pytest.approx(600 / 9400)
    assert size["ge8_gpu_job_share"] == pytest.approx(2 / 5)
    assert size["ge8_gpu_time_share"] == pytest.approx(8800 / 9400)
    buckets = {b["bucket"]: b for b in size["by_bucket"]}
    assert buckets["9-16"]["jobs"] == 1 and buckets["9-16"]["gpu_time_share"] == pytest.approx(800 / 9400)
    assert sum(b["jobs"] for b in size["by_bucket"]) == 5


def test_diurnal_means_per_hour_of_day_and_weekday():
    stats = characterize(mixed(), origin=MONDAY).stats["diurnal"]
    by_hour = {r["hour"]: r for r in stats["by_hour_of_day"]}
    # Hourly bins span Monday 00:00 .. Tuesday 00:00 (25 bins): hour 0 occurs twice
    # (Mon: jobs at 3 s, 7 s, 1800 s, 1900 s = 4 jobs; Tue: 1 job at 88200 s), hour 1 once (1 job).
    assert by_hour[0]["submissions_per_hour"] == pytest.approx((4 + 1) / 2)
    assert by_hour[0]["gpus_requested_per_hour"] == pytest.approx((16 + 0 + 1 + 1 + 8) / 2)
    assert by_hour[1]["submissions_per_hour"] == pytest.approx(1.0)
    assert by_hour[5]["submissions_per_hour"] == 0.0
    by_day = {r["weekday"]: r for r in stats["by_weekday"]}
    assert by_day["Mon"]["submissions_per_day"] == 5 and by_day["Tue"]["submissions_per_day"] == 1
    assert by_day["Wed"]["submissions_per_day"] is None


def test_relative_times_omit_weekday_with_a_note():
    ch = characterize(mixed(), origin=None)
    assert "by_weekday" not in ch.stats["diurnal"]
    assert "diurnal.by_weekday" in ch.omitted


def test_ideal_utilization_curve_is_exact():
    rows = [
        {"submit_time": 0.0, "num_gpus": 2, "duration": 3600.0},
        {"submit_time": 1800.0, "num_gpus": 4, "duration": 3600.0},
    ]
    ch = characterize(workload(rows), origin=MONDAY, cluster=None)
    util = ch.stats["utilization"]
    assert util["method"].startswith("ideal")
    # Hour 0: 2 GPUs all hour + 4 GPUs half the hour = 4; hour 1: 4 GPUs half the hour = 2.
    assert ch.curves["utilization"].tolist() == pytest.approx([4.0, 2.0])
    assert util["peak_gpus_in_use_hourly"] == pytest.approx(4.0) and util["capacity_gpus"] is None


def test_busy_curve_integrates_intervals():
    times, busy = busy_curve(np.array([0.0, 10.0]), np.array([20.0, 30.0]), np.array([1, 3]), step=10.0)
    assert times.tolist() == [0.0, 10.0, 20.0] and busy.tolist() == pytest.approx([1.0, 4.0, 3.0])


def test_start_end_times_and_queue_column_are_used():
    rows = [
        {"submit_time": 0.0, "num_gpus": 1, "duration": 100.0, "vc": "a", "user": "u1"},
        {"submit_time": 0.0, "num_gpus": 1, "duration": 100.0, "vc": "a", "user": "u2"},
        {"submit_time": 0.0, "num_gpus": 2, "duration": 100.0, "vc": "b", "user": "u2"},
    ]
    w = workload(rows, start_time=[0.0, 50.0, 300.0], end_time=[100.0, 150.0, 400.0], queue=[0.0, 50.0, 300.0])
    stats = characterize(w, origin=MONDAY).stats
    assert stats["timing_source"] == "trace start/end times"
    assert stats["utilization"]["method"] == "trace start/end times"
    vcs = {r["vc"]: r for r in stats["per_vc"]["vcs"]}
    assert vcs["a"]["avg_queue_s"] == pytest.approx(25.0) and vcs["b"]["avg_queue_s"] == pytest.approx(300.0)
    assert vcs["b"]["gpu_hours"] == pytest.approx(200 / 3600)
    users = stats["users"]
    assert users["top_users_by_queueing"][0] == {"user": "u2", "queue_hours": pytest.approx(350 / 3600), "share": 1.0}


def test_fifo_replay_gives_queueing_delays():
    rows = [{"submit_time": 0.0, "num_gpus": 4, "duration": 100.0, "vc": "a"} for _ in range(3)]
    stats = characterize(workload(rows), origin=None, cluster=shorthand_cluster(1, 4), cluster_label="1x4").stats
    assert stats["timing_source"] == "fifo replay on 1x4"
    assert stats["per_vc"]["vcs"][0]["avg_queue_s"] == pytest.approx(100.0)  # queues 0, 100, 200
    assert stats["utilization"]["mean_utilization"] == pytest.approx(1.0)  # busy 300 s of 300 s


def test_final_status_breakdown_by_count_gpu_time_and_size():
    rows = [
        {"submit_time": 0.0, "num_gpus": 1, "duration": 100.0},
        {"submit_time": 1.0, "num_gpus": 1, "duration": 300.0},
        {"submit_time": 2.0, "num_gpus": 8, "duration": 100.0},
        {"submit_time": 3.0, "num_gpus": 0, "duration": 5.0},
    ]
    w = workload(rows, state=["COMPLETED", "failed", "CANCELLED", "COMPLETED"])
    status = characterize(w).stats["status"]
    by_state = {r["state"]: r for r in status["by_state"]}
    assert status["states"] == ["CANCELLED", "COMPLETED", "FAILED"]
    assert by_state["COMPLETED"]["jobs"] == 2 and by_state["COMPLETED"]["job_share"] == pytest.approx(0.5)
    # GPU time: 100 (completed) + 300 (failed) + 800 (cancelled) = 1200; the CPU job adds none.
    assert by_state["FAILED"]["gpu_time_share"] == pytest.approx(300 / 1200)
    assert by_state["CANCELLED"]["gpu_time_share"] == pytest.approx(800 / 1200)
    by_size = {r["bucket"]: r for r in status["by_size"]}
    assert by_size["1"]["COMPLETED"] == pytest.approx(0.5) and by_size["1"]["FAILED"] == pytest.approx(0.5)
    assert by_size["5-8"]["CANCELLED"] == 1.0 and by_size["CPU"]["COMPLETED"] == 1.0


def test_top_user_shares():
    # 20 users; user i has one 1-GPU job of (i + 1) x 100 s: total 21,000 GPU-seconds.
    rows = [{"submit_time": float(i), "num_gpus": 1, "duration": (i + 1) * 100.0, "user": f"u{i}"} for i in range(20)]
    users = characterize(workload(rows)).stats["users"]
    assert users["users"] == 20
    assert users["top1pct_users"] == 1 and users["top1pct_gpu_time_share"] == pytest.approx(2000 / 21000)
    assert users["top5pct_users"] == 1
    assert users["top10pct_users"] == 2 and users["top10pct_gpu_time_share"] == pytest.approx(3900 / 21000)
    assert users["top_users_by_gpu_time"][0]["user"] == "u19"
    assert top_share(np.array([1.0, 1.0, 2.0]), 50) == (2, pytest.approx(0.75))


def test_unsupported_sections_are_omitted_not_crashing():
    rows = [{"submit_time": 0.0, "num_gpus": 1, "duration": 10.0}]
    ch = characterize(workload(rows))
    for section in ("status", "users", "per_vc", "durations.cpu"):
        assert section in ch.omitted
    assert "per_vc.avg_queue" not in ch.omitted  # per_vc itself is omitted: no VC names
    empty = characterize(
        Workload.from_frame("empty", pd.DataFrame(columns=["job_id", "submit_time", "num_gpus", "duration"]))
    )
    assert empty.stats["jobs"] == 0 and "durations" in empty.omitted


def test_trace_origin_from_timestamps_or_none(tmp_path):
    stamped = tmp_path / "t.csv"
    stamped.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,1,1,1,a\n2017-10-08 06:00:00,1,1,1,a\n"
    )
    assert trace_origin(stamped) == pd.Timestamp("2017-10-08 06:00:00")
    numeric = tmp_path / "n.csv"
    numeric.write_text("job_id,submit_time,num_gpus,duration\n1,5,1,10\n")
    assert trace_origin(numeric) is None
    assert trace_origin(tmp_path / "missing.csv") is None


def test_philly_statistics_match_an_independent_computation():
    from shapeshift.workloads.readers import read_workload

    path = bundled("philly")
    raw = pd.read_csv(path)
    ch = characterize(read_workload(path, "philly"), origin=trace_origin(path))
    stats = ch.stats
    assert stats["jobs"] == len(raw)
    assert stats["durations"]["gpu"]["median_s"] == float(raw.loc[raw.num_gpus > 0, "duration"].median())
    gpu_time = raw.duration * raw.num_gpus
    assert stats["job_size"]["single_gpu_time_share"] == pytest.approx(
        gpu_time[raw.num_gpus == 1].sum() / gpu_time.sum()
    )
    assert stats["origin"] == pd.to_datetime(raw.timestamp).min().isoformat()
    assert stats["utilization"]["method"].startswith("ideal")
    assert {"status", "users"} <= set(ch.omitted)
    assert not math.isnan(stats["utilization"]["mean_gpus_in_use"])


def test_helios_schema_trace(tmp_path):
    from shapeshift.workloads.readers import READERS, read_workload

    if "helios" not in READERS:
        pytest.skip("no helios reader in this checkout")
    path = tmp_path / "cluster_log.csv"
    path.write_text(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
        "j1,u1,vcA,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:01:40,2020-04-01 00:03:20,100,100\n"
        "j2,u2,vcA,0,2,1,CANCELLED,2020-04-01 00:10:00,2020-04-01 00:10:00,2020-04-01 00:10:10,10,0\n"
        "j3,u1,vcB,8,32,1,FAILED,2020-04-01 01:00:00,2020-04-01 01:00:00,2020-04-01 01:16:40,1000,0\n"
    )
    ch = characterize(read_workload(path, "helios"), origin=trace_origin(path))
    s = ch.stats
    assert s["origin"] == "2020-04-01T00:00:00" and (s["gpu_jobs"], s["cpu_jobs"]) == (2, 1)
    assert s["durations"]["gpu"]["median_s"] == 550.0 and s["durations"]["cpu"]["median_s"] == 10.0
    assert s["timing_source"] == "trace start/end times"
    by_state = {r["state"]: r for r in s["status"]["by_state"]}
    assert by_state["FAILED"]["gpu_time_share"] == pytest.approx(8000 / 8100)
    assert by_state["CANCELLED"]["gpu_time_share"] == 0.0 and by_state["CANCELLED"]["jobs"] == 1
    vcs = {r["vc"]: r for r in s["per_vc"]["vcs"]}
    assert vcs["vcA"]["avg_queue_s"] == pytest.approx(50.0) and vcs["vcB"]["avg_queue_s"] == 0.0
    assert s["users"]["top_users_by_gpu_time"][0] == {
        "user": "u1",
        "gpu_hours": pytest.approx(8100 / 3600),
        "share": 1.0,
    }
    assert s["users"]["top_users_by_queueing"][0]["user"] == "u1"
    assert not {"status", "users", "per_vc", "durations.cpu"} & set(ch.omitted)
