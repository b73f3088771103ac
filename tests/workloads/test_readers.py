"""Trace readers: Helios, Rubick, Pollux, Synergy (fixtures and real files), detection, round trips."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from shapeshift.errors import InputError
from shapeshift.model import ExecutionPlan, ZeroMode
from shapeshift.workloads.readers import (
    _SIGNATURES,
    READERS,
    detect_format,
    pollux_reference,
    read_helios,
    read_synergy,
    read_workload,
)
from tests.conftest import bundled

HELIOS = (
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
    "j1,u1,vcA,8,32,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:01:00,2020-04-01 01:01:00,3600,60\n"
    "j2,u2,vcB,0,4,1,FAILED,2020-04-01 00:10:00,2020-04-01 00:10:00,2020-04-01 00:20:00,600,0\n"
    "j3,u1,vcA,1,2,1,CANCELLED,2020-04-01 00:05:00,,,0,\n"
    "j4,u3,vcB,16,64,2,timeout,2020-04-01 00:30:00,2020-04-01 02:30:00,2020-04-01 03:30:00,3600,7200\n"
)
RUBICK_HEADER = "name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,exec_plan,steps,is_sla\n"
RUBICK = RUBICK_HEADER + (
    "vit-0,0,3163.09,vit,2,16,0,zero-dp,37239,1\n"
    "llama30-1,1639,142.2,llama30,48,384,1.25,344,64,0\n"
    "t5-2,3519,3312,t5,4,32,0,ga,8109,1\n"
    "gpt2-3,3600,10,gpt2,8,64,0,241,100,0\n"
    "bert-4,3700,10,bert,1,8,0,zero-offload,5,0\n"
)


def _csv(tmp_path, text, name="trace.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _located(fn, *args):
    with pytest.raises(InputError) as err:
        fn(*args)
    return err.value


# --- Helios -------------------------------------------------------------------------


def test_helios_fixture_keeps_state_user_vc_and_times(tmp_path):
    path = _csv(tmp_path, HELIOS)
    assert detect_format(path) == "helios"
    w = read_workload(path)
    f = w.frame
    assert f["job_id"].tolist() == ["j1", "j3", "j2", "j4"]  # sorted by submit time
    assert f["submit_time"].tolist() == [0.0, 300.0, 600.0, 1800.0]
    assert f["state"].tolist() == ["COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"]  # upper-cased
    assert f["user"].tolist() == ["u1", "u1", "u2", "u3"] and f["vc"].tolist() == ["vcA", "vcA", "vcB", "vcB"]
    assert f["num_gpus"].tolist() == [8, 1, 0, 16] and f["num_cpus"].tolist() == [32, 2, 4, 64]
    # start/end on the submit clock; a job that never started has NaN start/end and queue
    assert f["start_time"].iloc[0] == 60.0 and f["end_time"].iloc[0] == 3660.0
    assert math.isnan(f["start_time"].iloc[1]) and math.isnan(f["queue"].iloc[1])
    assert f["start_time"].iloc[3] == 9000.0 and f["queue"].iloc[3] == 7200.0


def test_helios_cpu_jobs_are_flagged_and_left_out_unless_asked(tmp_path):
    w = read_helios(_csv(tmp_path, HELIOS))
    assert w.frame["cpu_only"].tolist() == [False, False, True, False]
    assert w.cpu_only_count == 1
    assert [j.job_id for j in w.jobs()] == ["j1", "j3", "j4"]
    assert [j.job_id for j in w.jobs(include_cpu_only=True)] == ["j1", "j3", "j2", "j4"]


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "fragment"),
    [
        ("COMPLETED,2020", "RUNNING,2020", 2, "state", "expected one of COMPLETED"),
        ("2020-04-01 02:30:00,2020", "soon,2020", 5, "start_time", "cannot read time"),
        ("j3,u1,vcA,1,", "j3,u1,vcA,x,", 4, "gpu_num", "expected a number"),
        ("j4,u3", "j1,u3", 5, "job_id", "duplicate"),
        (",7200\n", ",-1\n", 5, "queue", ">= 0"),
    ],
)
def test_helios_bad_values_are_located(tmp_path, old, new, line, field, fragment):
    path = _csv(tmp_path, HELIOS.replace(old, new, 1))
    err = _located(read_helios, path)
    assert (err.path, err.line, err.field) == (str(path), line, field)
    assert fragment in err.message


def test_helios_missing_column_is_named(tmp_path):
    path = _csv(tmp_path, HELIOS.replace(",queue\n", "\n", 1))
    err = _located(read_workload, path, "helios")
    assert err.field == "queue" and err.line == 1


# --- Rubick -------------------------------------------------------------------------


def test_rubick_fixture_maps_columns_plans_and_tenants(tmp_path):
    path = _csv(tmp_path, RUBICK)
    assert detect_format(path) == "rubick"
    jobs = {j.job_id: j for j in read_workload(path).jobs()}
    vit, llama, t5, gpt2, bert = (jobs[k] for k in ("vit-0", "llama30-1", "t5-2", "gpt2-3", "bert-4"))
    assert vit.model == "vit" and vit.iterations == 37239 and vit.guaranteed and vit.tenant == "A"
    assert vit.plan == ExecutionPlan(dp=2, zero=ZeroMode.DP) and vit.num_cpus == 16 and vit.duration == 3163.09
    assert llama.plan == ExecutionPlan(pp=3, tp=4, dp=4) and not llama.guaranteed and llama.tenant == "B"
    assert t5.plan == ExecutionPlan(dp=4) and t5.tenant == "A"
    assert gpt2.plan == ExecutionPlan(pp=2, tp=4, dp=1)  # "241": PP 2, TP 4, DP 1 on 8 GPUs
    assert bert.plan == ExecutionPlan(dp=1, zero=ZeroMode.OFFLOAD)


def test_rubick_without_guaranteed_jobs_has_no_tenants(tmp_path):
    path = _csv(tmp_path, RUBICK.replace(",1\n", ",0\n"))
    frame = read_workload(path).frame
    assert not frame["guaranteed"].any() and set(frame["tenant"]) == {""}


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "fragment"),
    [
        ("gpt2,8,64,0,241", "gpt2,8,64,0,242", 5, "exec_plan", "needs 16 GPUs"),
        ("zero-offload", "zero-magic", 6, "exec_plan", "bad plan"),
        ("37239,1", "37239,maybe", 2, "is_sla", "expected 0/1"),
        ("t5,4,", "t5,0,", 4, "num_gpus", ">= 1"),
        ("8109", "8109.5", 4, "steps", "whole number"),
    ],
)
def test_rubick_bad_values_are_located(tmp_path, old, new, line, field, fragment):
    path = _csv(tmp_path, RUBICK.replace(old, new, 1))
    err = _located(read_workload, path)
    assert (err.path, err.line, err.field) == (str(path), line, field)
    assert fragment in err.message


def test_real_rubick_mt_trace():
    w = read_workload(bundled("rubick-mt"))
    f = w.frame
    assert len(w) == 406 and int(f["guaranteed"].sum()) == 194
    assert (f.loc[f["guaranteed"], "tenant"] == "A").all() and (f.loc[~f["guaranteed"], "tenant"] == "B").all()
    jobs = w.jobs()
    assert all(j.plan is not None and j.plan.gpus == j.num_gpus and j.iterations is not None for j in jobs)


@pytest.mark.parametrize("variant", ["base", "bp"])
def test_real_rubick_base_and_bp(variant):
    w = read_workload(bundled(f"rubick-{variant}"))
    assert len(w) == 406 and not w.frame["guaranteed"].any()
    assert {j.model for j in w.jobs()} == {"bert", "gpt2", "llama7", "llama30", "roberta", "t5", "vit"}


# --- Pollux -------------------------------------------------------------------------

POLLUX = "name,time,application,num_replicas,batch_size\ncifar10-0,53,cifar10,4,2048\nncf-1,10,ncf,1,32768\n"


def test_pollux_fixture_gets_reference_iterations_and_duration(tmp_path):
    path = _csv(tmp_path, POLLUX)
    assert detect_format(path) == "pollux"
    jobs = {j.job_id: j for j in read_workload(path).jobs()}
    cifar = jobs["cifar10-0"]
    # Pollux models live in their own namespace (never the Rubick catalog's names).
    assert cifar.model == "pollux/cifar10" and cifar.num_gpus == 4 and cifar.submit_time == 53.0
    # Batch: 2048 requested, adaptive between the initial 128 (smallest validated batch)
    # and 4096 (largest), local 32 (smallest profiled) to 1024 (largest profiled).
    assert str(cifar.batch) == "size=2048,initial=128,max=4096,min_local=32,max_local=1024,adaptive=1"
    assert not jobs["ncf-1"].batch.adaptive  # the authors' simulator pins NCF at 32768
    # Placement "4", local batch 512: step time interpolated between the rows for 363
    # (0.278909 s) and 513 (0.395232 s) local batch: 0.278909 + 149/150 x 0.116323 = 0.394457 s;
    # the steps are those the ground truth charges (efficiency epoch by epoch).
    assert cifar.duration == pytest.approx(cifar.iterations * 0.394457, abs=0.2)
    assert jobs["ncf-1"].num_gpus == 1 and jobs["ncf-1"].duration > 0


@pytest.mark.parametrize(
    ("old", "new", "field", "fragment"),
    [
        ("ncf,1,32768", "resnet,1,32768", "application", "unknown application 'resnet'"),
        ("ncf,1,32768", "ncf,1,65536", "batch_size", "outside its validated range 256..32768"),
        ("ncf,1,32768", "ncf,1,", "batch_size", "missing"),
    ],
)
def test_pollux_bad_rows_are_located(tmp_path, old, new, field, fragment):
    path = _csv(tmp_path, POLLUX.replace(old, new))
    err = _located(read_workload, path)
    assert (err.line, err.field) == (3, field) and fragment in err.message


def test_pollux_any_replicas_and_batch_get_a_run_length(tmp_path):
    """Combinations outside the old lookup grid (the Sia artifact's Saturn workloads ask
    for cifar10 on 10 GPUs at 4096, NCF on 5) get their length from the profiles.

    At a fixed batch the steps to the end depend on the batch only: every packed replica
    count in the reference table trains cifar10 at 4096 in 2143-2147 steps and NCF at
    32768 in 1552-1553 steps, so 10 and 5 replicas must land there too."""
    text = POLLUX + "cifar10-2,60,cifar10,10,4096\nncf-3,70,ncf,5,32768\n"
    jobs = {j.job_id: j for j in read_workload(_csv(tmp_path, text)).jobs()}
    assert 2143 <= jobs["cifar10-2"].iterations <= 2147 and jobs["cifar10-2"].duration > 0
    assert 1552 <= jobs["ncf-3"].iterations <= 1553 and jobs["ncf-3"].duration > 0


def test_pollux_reference_matches_the_profiles():
    """The committed reference comes from the shared profiles (spot check, hand-readable)."""
    profiles = bundled("pollux-profiles")
    validation = pd.read_csv(profiles / "cifar10" / "validation-2048.csv")
    assert pollux_reference()["cifar10"]["iterations_by_batch_size"]["2048"] == int(validation["iteration"].iloc[99])


def test_real_pollux_workload_is_simulatable():
    w = read_workload(bundled("pollux-workload6"))
    assert len(w) == 160
    jobs = w.jobs()
    assert all(j.duration and j.duration > 0 and j.iterations for j in jobs)
    apps = {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    assert {j.model for j in jobs} == {f"pollux/{a}" for a in apps}


# --- Synergy ------------------------------------------------------------------------

SYNERGY = "job_id,model,arrival,num_iters,gpu_demand\n0,res18,0.0,1000,1\n1,transformer,12.5,300,4\n"


def test_synergy_with_header(tmp_path):
    path = _csv(tmp_path, SYNERGY)
    assert detect_format(path) == "synergy"
    jobs = read_workload(path).jobs()
    assert [(j.job_id, j.model, j.submit_time, j.iterations, j.num_gpus, j.duration) for j in jobs] == [
        # Synergy's iteration times (simulator/models/<model>_1.py): res18 0.64 s, transformer 0.67 s
        ("0", "res18", 0.0, 1000, 1, 640.0),
        ("1", "transformer", 12.5, 300, 4, 201.0),
    ]


def test_synergy_headerless_as_the_simulator_writes_it(tmp_path):
    path = _csv(tmp_path, "0,res18,0.0,1000,1\n1,transformer,12.5,300,4\n")
    jobs = read_workload(path, "synergy").jobs()
    assert [j.iterations for j in jobs] == [1000, 300]
    bad = _csv(tmp_path, "0,res18,0.0,1000,1\n1,transformer,12.5,3x0,4\n", "bad.csv")
    err = _located(read_workload, bad, "synergy")
    assert (err.line, err.field) == (2, "num_iters")  # headerless: data starts on line 1


def test_synergy_seconds_per_iteration_by_model(tmp_path):
    path = _csv(tmp_path, SYNERGY)
    w = read_synergy(path, {"res18": 0.64, "transformer": 0.67})
    assert w.frame["duration"].tolist() == pytest.approx([640.0, 201.0])
    err = _located(read_synergy, path, {"res18": 0.64})
    assert (err.line, err.field) == (3, "model") and "transformer" in err.message


# --- detection and round trips ------------------------------------------------------


def test_detection_failure_names_every_format(tmp_path):
    err = _located(detect_format, _csv(tmp_path, "a,b,c\n1,2,3\n"))
    for fmt in ("generic", "philly", "helios", "rubick", "pollux", "synergy"):
        assert f"{fmt} (" in err.message
    assert set(_SIGNATURES) | {"kubectl"} == set(READERS)  # kubectl JSON is told by content


def test_generic_reads_iteration_only_rows(tmp_path):
    path = _csv(tmp_path, "job_id,submit_time,num_gpus,duration,iterations\na,0,1,,500\nb,1,1,20,\n")
    jobs = read_workload(path).jobs()
    assert (jobs[0].duration, jobs[0].iterations) == (None, 500) and (jobs[1].duration, jobs[1].iterations) == (
        20,
        None,
    )
    bad = _csv(tmp_path, "job_id,submit_time,num_gpus,duration,iterations\na,0,1,,\n", "bad.csv")
    err = _located(read_workload, bad)
    assert (err.line, err.field) == (2, "duration")


@pytest.mark.parametrize(("text", "fmt"), [(HELIOS, "helios"), (RUBICK, "rubick"), (POLLUX, "pollux"), (SYNERGY, None)])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_every_reader_output_round_trips_through_the_generic_format(tmp_path, text, fmt, suffix):
    original = read_workload(_csv(tmp_path, text), fmt)
    out = tmp_path / f"again{suffix}"
    original.write(out)
    again = read_workload(out)
    pd.testing.assert_frame_equal(again.frame, original.frame)
    assert again.jobs(include_cpu_only=True) == original.jobs(include_cpu_only=True)
