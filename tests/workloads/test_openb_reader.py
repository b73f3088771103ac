"""openb pod and node lists through the main readers: ``--format openb`` by header, the
node list as ``--cluster``, and a simulation on them."""

from __future__ import annotations

import pytest

from shapeshift.cluster import load_cluster
from shapeshift.errors import InputError
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import detect_format, read_workload
from tests.conftest import shared_file

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"


def write(path, header, rows):
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_pod_list_is_detected_and_read_as_jobs(tmp_path):
    pods = write(
        tmp_path / "pods.csv",
        POD_HEADER,
        [
            "p0,8000,16384,1,500,V100M16|V100M32,LS,Running,100,400,100",  # half a GPU, two types
            "p1,4000,1024,0,0,,BE,Running,160,260,170",  # no GPU: a job all the same
            "p2,32000,65536,2,1000,,LS,Succeeded,220,1220,",  # two whole GPUs, never scheduled
        ],
    )
    assert detect_format(pods) == "openb"
    jobs = {j.job_id: j for j in read_workload(pods).jobs()}
    p0, p1, p2 = jobs["p0"], jobs["p1"], jobs["p2"]
    # Submissions from the first creation (100): 0, 60, 120; durations deletion - creation.
    assert (p0.submit_time, p1.submit_time, p2.submit_time) == (0.0, 60.0, 120.0)
    assert (p0.duration, p1.duration, p2.duration) == (300.0, 100.0, 1000.0)
    assert (p0.num_gpus, p0.gpu_milli, p0.gpu_types) == (1, 500, frozenset({"V100M16", "V100M32"}))
    assert (p1.num_gpus, p1.gpu_milli, p1.num_cpus) == (0, 0, 4.0)
    assert (p2.num_gpus, p2.gpu_milli, p2.gpu_types) == (2, 0, frozenset())
    # 16384 MiB = 16384 * 2^20 bytes = 17.179869184 GB.
    assert p0.mem_gb == pytest.approx(17.179869184)
    assert (p0.qos, p1.qos) == ("LS", "BE")


def test_pod_list_without_times_is_refused_with_its_line(tmp_path):
    pods = write(tmp_path / "pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", ["p0,1000,10,1,1000"])
    with pytest.raises(InputError, match=r"pods.csv:2, field .creation_time.*no duration"):
        read_workload(pods, "openb")


def test_node_list_is_a_fractional_heterogeneous_cluster(tmp_path):
    nodes = write(tmp_path / "nodes.csv", NODE_HEADER, ["n0,96000,786432,8,V100M32", "n1,64000,262144,2,T4"])
    cluster = load_cluster(str(nodes))
    assert cluster.gpu_fractions and cluster.total_gpus == 10
    assert [(n.name, n.gpus, n.cpus, n.gpu_type) for n in cluster.nodes] == [
        ("n0", 8, 96.0, "V100M32"),
        ("n1", 2, 64.0, "T4"),
    ]


def test_a_tiny_trace_simulates_with_sharing_and_constraints(tmp_path):
    # One T4 node with one GPU. p0 and p1 each take 400 thousandths from t=0 (0 and 10):
    # they share the GPU. p2 allows only V100: rejected with its reason.
    nodes = write(tmp_path / "nodes.csv", NODE_HEADER, ["n0,32000,65536,1,T4"])
    pods = write(
        tmp_path / "pods.csv",
        POD_HEADER,
        [
            "p0,1000,1024,1,400,,LS,Running,0,100,0",
            "p1,1000,1024,1,400,,LS,Running,10,60,10",
            "p2,1000,1024,1,1000,V100M16,LS,Running,20,30,20",
        ],
    )
    result = simulate(read_workload(pods).jobs(), load_cluster(str(nodes)), make_policy("fifo"))
    out = {j.job_id: j for j in result.jobs}
    assert out["p1"].first_start == 10.0 and out["p1"].end_time == 60.0
    assert out["p2"].reject_reason == "asks for GPU type V100M16 but the cluster has only T4"


def test_the_published_trace_reads_as_a_workload_and_a_cluster():
    pods = read_workload(shared_file("data/alibaba-openb/openb_pod_list_default.csv"))
    cluster = load_cluster(str(shared_file("data/alibaba-openb/openb_node_list_gpu_node.csv")))
    jobs = pods.jobs()
    # The data README: 8,152 pods, 1,213 GPU nodes.
    assert len(jobs) == 8152 and len(cluster.nodes) == 1213
    assert any(j.num_gpus == 0 for j in jobs) and any(j.gpu_milli for j in jobs)


def test_shares_and_types_read_back_from_the_generic_format(tmp_path):
    pods = write(tmp_path / "pods.csv", POD_HEADER, ["p0,8000,16384,1,500,T4|A10,LS,Running,0,10,0"])
    read_workload(pods).write(tmp_path / "out.csv")
    (job,) = read_workload(tmp_path / "out.csv").jobs()
    assert (job.gpu_milli, job.gpu_types) == (500, frozenset({"A10", "T4"}))
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submit_time,num_gpus,duration,gpu_milli\nj,0,2,5,500\n")
    with pytest.raises(InputError, match=r"bad.csv:2, field .gpu_milli."):
        read_workload(bad)


def test_describe_counts_a_share_of_a_gpu_as_that_share(tmp_path):
    from shapeshift.workloads.describe import describe

    # p0: half a GPU for 3600 s = 0.5 GPU-hours; p1: 2 GPUs for 1800 s = 1 GPU-hour.
    pods = write(
        tmp_path / "pods.csv",
        POD_HEADER,
        ["p0,1000,10,1,500,,LS,Running,0,3600,0", "p1,1000,10,2,1000,,LS,Running,0,1800,0"],
    )
    assert describe(read_workload(pods))["total_gpu_hours"] == 1.5
