"""The openb reader: hand-made files in each variant's layout, and its refusals."""

from __future__ import annotations

import math

import pytest

from shapeshift.errors import InputError
from shapeshift.gpushare.openb import read_nodes, read_pods
from tests.conftest import shared_file
from tests.gpushare.helpers import NODE_HEADER, POD_HEADER, write


def test_nodes_read_type_cpu_memory_and_gpus(tmp_path):
    path = write(tmp_path / "n.csv", NODE_HEADER, ["a,64000,262144,2,P100", "b,96000,393216,8,G2", "c,32000,131072,0,"])
    nodes = read_nodes(path)
    assert nodes.names == ("a", "b", "c")
    assert nodes.cpu_milli.tolist() == [64000, 96000, 32000]
    assert nodes.memory_mib.tolist() == [262144, 393216, 131072]
    assert nodes.gpus.tolist() == [2, 8, 0]
    assert nodes.model == ("P100", "G2", "")  # a CPU-only node has no model
    assert nodes.total_gpus == 10


def test_pods_read_fractions_constraints_cpu_pods_and_times(tmp_path):
    path = write(
        tmp_path / "p.csv",
        POD_HEADER,
        [
            "p0,6000,12288,1,460,,LS,Running,427061,12902960,427061",
            "p1,88000,327680,8,1000,G2,Burstable,Succeeded,9437497,10769854,9437497",
            "p2,4000,8192,0,0,,BE,Running,10,,",  # CPU-only: a job too
            "p3,8000,16384,1,1000,|T4||V100M16|,LS,Running,1,2,1",  # empty parts dropped
        ],
    )
    pods = read_pods(path)
    assert len(pods) == 4
    assert pods.num_gpu.tolist() == [1, 8, 0, 1]
    assert pods.gpu_milli.tolist() == [460, 1000, 0, 1000]
    assert pods.total_milli_gpu.tolist() == [460, 8000, 0, 1000]
    assert pods.gpu_spec == ("", "G2", "", "T4|V100M16")
    assert pods.allowed_models(3) == frozenset({"T4", "V100M16"})
    assert pods.allowed_models(0) == frozenset()
    assert pods.qos == ("LS", "Burstable", "BE", "LS")
    assert pods.creation_time[0] == 427061 and math.isnan(pods.deletion_time[2])


def test_multigpu_variant_with_five_columns(tmp_path):
    path = write(tmp_path / "p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", ["p0,12000,16384,2,1000"])
    pods = read_pods(path)
    assert pods.num_gpu.tolist() == [2] and pods.gpu_spec == ("",) and math.isnan(pods.creation_time[0])


def test_gpu_milli_of_a_cpu_pod_is_ignored(tmp_path):
    # The authors' converter writes no GPU annotation when num_gpu == 0 (pod_csv_to_yaml.py).
    pods = read_pods(write(tmp_path / "p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", ["p0,1000,10,0,500"]))
    assert pods.gpu_milli.tolist() == [0]


@pytest.mark.parametrize(
    ("header", "row", "where"),
    [
        ("name,cpu_milli,memory_mib,num_gpu\n", "p0,1,1,1", "p.csv:1, field 'gpu_milli'"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "p0,abc,1,1,500", "p.csv:2, field 'cpu_milli'"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "p0,1,1,1,nan", "p.csv:2, field 'gpu_milli'"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "p0,1,1,1,1500", "p.csv:2, field 'gpu_milli'"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "p0,1,-5,1,500", "p.csv:2, field 'memory_mib'"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "p0,1,1,2,500", "p.csv:2, field 'gpu_milli'"),
    ],
)
def test_bad_pod_rows_name_file_line_and_field(tmp_path, header, row, where):
    with pytest.raises(InputError) as exc:
        read_pods(write(tmp_path / "p.csv", header, [row]))
    assert where in str(exc.value)


def test_bad_node_rows(tmp_path):
    with pytest.raises(InputError, match="field 'model'"):
        read_nodes(write(tmp_path / "n.csv", NODE_HEADER, ["a,1,1,2,"]))
    with pytest.raises(InputError, match="field 'gpu'"):
        read_nodes(write(tmp_path / "n.csv", NODE_HEADER, ["a,1,1,9,T4"]))
    with pytest.raises(InputError, match="appears twice"):
        read_nodes(write(tmp_path / "n.csv", NODE_HEADER, ["a,1,1,1,T4", "a,1,1,1,T4"]))
    with pytest.raises(InputError, match="no rows"):
        read_nodes(write(tmp_path / "n.csv", NODE_HEADER, []))


def test_the_published_trace_reads_whole():
    nodes = read_nodes(shared_file("data/alibaba-openb/openb_node_list_gpu_node.csv"))
    pods = read_pods(shared_file("data/alibaba-openb/openb_pod_list_default.csv"))
    assert (len(nodes), nodes.total_gpus) == (1213, 6212)  # the reference's total_gpus
    assert len(pods) == 8152 and int((pods.num_gpu == 0).sum()) == 1088
