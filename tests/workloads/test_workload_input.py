"""Workload readers: happy paths and every error path, located by file, line and column."""

from __future__ import annotations

import pytest

from shapeshift.errors import InputError
from shapeshift.model import ExecutionPlan
from shapeshift.workloads.readers import detect_format, read_workload
from shapeshift.workloads.synthetic import PoissonSpec, poisson_workload
from tests.conftest import bundled

HEADER = "job_id,submit_time,num_gpus,duration"


def _csv(tmp_path, text, name="w.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_generic_reader_sorts_and_fills_defaults(tmp_path):
    path = _csv(tmp_path, f"{HEADER},vc,guaranteed,plan\nb,20,2,100,x,1,dp=2\na,10,1,50,,0,\n")
    workload = read_workload(path)
    jobs = workload.jobs()
    assert [j.job_id for j in jobs] == ["a", "b"]
    assert jobs[1].vc == "x" and jobs[1].guaranteed and jobs[1].plan == ExecutionPlan(dp=2)
    assert jobs[0].plan is None and jobs[0].num_cpus == 0


def test_iso_timestamps_become_seconds_after_first(tmp_path):
    path = _csv(tmp_path, f"{HEADER}\na,2024-01-01T00:01:00,1,5\nb,2024-01-01T00:00:00,1,5\n")
    jobs = read_workload(path).jobs()
    assert [(j.job_id, j.submit_time) for j in jobs] == [("b", 0.0), ("a", 60.0)]


@pytest.mark.parametrize(
    ("body", "line", "field", "fragment"),
    [
        ("a,0,x,10\n", 2, "num_gpus", "expected a number"),
        ("a,0,1,10\nb,0,1,-5\n", 3, "duration", ">= 0"),
        ("a,0,1.5,10\n", 2, "num_gpus", "whole number"),
        ("a,yesterday,1,10\n", 2, "submit_time", "cannot read time"),
        ("a,0,1,\n", 2, "duration", "missing"),
        ("a,0,1,10\na,5,1,10\n", 3, "job_id", "duplicate"),
        ("a,0,1,inf\n", 2, "duration", "finite"),
    ],
)
def test_bad_values_are_located(tmp_path, body, line, field, fragment):
    path = _csv(tmp_path, f"{HEADER}\n{body}")
    with pytest.raises(InputError) as err:
        read_workload(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field)
    assert fragment in err.value.message


def test_bad_plan_is_located(tmp_path):
    path = _csv(tmp_path, f"{HEADER},plan\na,0,4,10,dp=2\n")
    with pytest.raises(InputError, match="plan uses 2 GPUs") as err:
        read_workload(path)
    assert err.value.line == 2 and err.value.field == "plan"


def test_missing_column_lists_what_was_found(tmp_path):
    path = _csv(tmp_path, "job_id,submit_time,num_gpus\na,0,1\n")
    # The header is closest to the generic format: name it and the column it lacks.
    with pytest.raises(InputError, match=r"missing column\(s\) duration: the header is closest to the generic") as err:
        read_workload(path)
    assert err.value.field == "duration"
    with pytest.raises(InputError, match=r"missing required column.*duration") as err:
        read_workload(path, "generic")
    assert err.value.field == "duration" and err.value.line == 1


def test_missing_empty_and_unknown_format(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_workload(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="empty"):
        read_workload(_csv(tmp_path, ""), "generic")
    with pytest.raises(InputError, match="unknown workload format"):
        read_workload(_csv(tmp_path, f"{HEADER}\n"), "nope")


def test_round_trip_csv_and_parquet(tmp_path):
    original = poisson_workload(PoissonSpec(jobs=50, seed=3))
    for name in ("w.csv", "w.parquet"):
        path = tmp_path / name
        original.write(path)
        again = read_workload(path)
        assert again.jobs() == original.jobs()


def test_generator_is_seeded():
    assert poisson_workload(PoissonSpec(seed=1)).jobs() == poisson_workload(PoissonSpec(seed=1)).jobs()
    assert poisson_workload(PoissonSpec(seed=1)).jobs() != poisson_workload(PoissonSpec(seed=2)).jobs()


def test_philly_fixture(tmp_path):
    path = _csv(
        tmp_path,
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
        "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n",
    )
    assert detect_format(path) == "philly"
    jobs = read_workload(path).jobs()
    assert [(j.job_id, j.submit_time, j.num_gpus, j.vc) for j in jobs] == [
        ("1", 0.0, 8, "6214e9"),
        ("0", 2932.0, 1, "11cb48"),
    ]


def test_philly_bad_row_is_located(tmp_path):
    path = _csv(tmp_path, "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,abc,1,66.0,x\n")
    with pytest.raises(InputError) as err:
        read_workload(path)
    assert (err.value.line, err.value.field) == (2, "duration")


def test_real_philly_trace():
    workload = read_workload(bundled("philly"))
    assert len(workload) == 82247
    frame = workload.frame
    assert frame["submit_time"].iloc[0] == 0 and frame["submit_time"].is_monotonic_increasing
    assert frame["vc"].nunique() == 15 and frame["num_gpus"].max() == 128


def test_compressed_bom_and_parquet_traces_read_like_plain_csv(tmp_path):
    import gzip

    import zstandard

    text = f"{HEADER}\na,0,4,10\nb,5,2,20\n"
    plain = read_workload(_csv(tmp_path, text)).frame
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())  # what spreadsheets write
    gz = tmp_path / "w.csv.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    zst = tmp_path / "w.csv.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    parquet = tmp_path / "w.parquet"
    read_workload(bom).write(parquet)
    for path in (bom, gz, zst, parquet):
        assert read_workload(path).frame.equals(plain), path


def test_absurd_times_are_refused_with_their_line(tmp_path):
    # 1e300 s is finite but meaningless, and float event times lose whole seconds there.
    path = _csv(tmp_path, f"{HEADER}\na,0,1,10\nb,0,1,1e300\n")
    with pytest.raises(InputError, match="must be <= 1e\\+09") as err:
        read_workload(path)
    assert err.value.line == 3 and err.value.field == "duration"


def test_a_dataframe_is_checked_like_a_file():
    import pandas as pd

    from shapeshift.workloads.readers import read_generic_frame

    good = read_generic_frame(pd.DataFrame({"job_id": ["a"], "submit_time": [0], "num_gpus": [2], "duration": [5.0]}))
    assert good.jobs()[0].num_gpus == 2
    bad = pd.DataFrame({"job_id": ["a", "b"], "submit_time": [0, 1], "num_gpus": [1, "two"], "duration": [5, 5]})
    with pytest.raises(InputError, match="expected a number, got 'two'") as err:
        read_generic_frame(bad)
    assert str(err.value).startswith("<DataFrame>:2") and err.value.field == "num_gpus"


def test_a_generated_job_list_and_its_table_agree():
    """The demo generator keeps its job list (no pandas needed to simulate it); the table
    built from that list gives back the same jobs, and the workload travels by pickle."""
    import pickle

    from shapeshift.workloads.workload import Workload

    listed = poisson_workload(PoissonSpec(jobs=40, seed=5))
    tabled = Workload.from_frame(listed.name, listed.frame)
    assert tabled.jobs() == listed.jobs() and len(tabled) == len(listed) == 40
    assert pickle.loads(pickle.dumps(listed)).jobs() == listed.jobs()


def test_per_gpu_type_throughputs_read_as_columns_and_round_trip(tmp_path):
    # Gavel's input: a column per GPU type; blank or 0 = the job cannot run on that type.
    path = _csv(tmp_path, f"{HEADER},speed_K80,speed_V100\na,0,1,10,1.8,18\nb,1,1,10,,4\nc,2,1,10,,\n")
    workload = read_workload(path)
    jobs = {j.job_id: j for j in workload.jobs()}
    assert jobs["a"].gpu_speed == (("K80", 1.8), ("V100", 18.0))
    assert jobs["b"].gpu_speed == (("V100", 4.0),) and jobs["c"].gpu_speed == ()
    out = tmp_path / "out.csv"
    workload.write(out)
    assert read_workload(out).jobs() == workload.jobs()


@pytest.mark.parametrize(
    ("columns", "row", "field", "fragment"),
    [
        ("speed_K80,speed_V100", "0,0", "speed_K80", "no GPU type has a positive throughput"),
        ("speed_K80", "-1", "speed_K80", ">= 0"),
        ("speed_K80", "inf", "speed_K80", "finite"),
        ("gpu_speed", "K80", "gpu_speed", "TYPE=THROUGHPUT"),
    ],
)
def test_bad_per_gpu_type_throughputs_are_located(tmp_path, columns, row, field, fragment):
    path = _csv(tmp_path, f"{HEADER},{columns}\na,0,1,10,{row}\n")
    with pytest.raises(InputError) as err:
        read_workload(path)
    assert (err.value.line, err.value.field) == (2, field) and fragment in err.value.message
