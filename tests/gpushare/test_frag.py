"""The typical-pod set (95% coverage) and the fragmentation measure F_n(M), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from shapeshift.gpushare.frag import FragMeasure, node_frag_reference, typical_pods
from shapeshift.gpushare.openb import read_pods
from tests.gpushare.helpers import write

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"


def _pods(tmp_path, rows):
    return read_pods(write(tmp_path / "p.csv", HEADER, rows))


def test_typical_pods_cover_95_percent_and_renormalise(tmp_path):
    # 20 pods: 10 of shape A, 6 of B, 3 of C, 1 of D. 95% of 20 = 19: A (10), B (16), C (19)
    # reach it, D is dropped; frequencies renormalised over the 19 covered pods.
    rows = [f"a{i},4000,1,1,500," for i in range(10)]
    rows += [f"b{i},8000,1,1,1000," for i in range(6)]
    rows += [f"c{i},2000,1,0,0," for i in range(3)]
    rows += ["d0,1000,1,2,1000,"]
    t = typical_pods(_pods(tmp_path, rows))
    assert t.cpu.tolist() == [4000, 8000, 2000]
    assert t.num.tolist() == [1, 1, 0]
    assert t.freq.tolist() == pytest.approx([10 / 19, 6 / 19, 3 / 19])


def test_equal_counts_put_the_larger_shape_first(tmp_path):
    # TargetPodList.Less reversed: by count, then CPU, milli, count, model, all descending.
    t = typical_pods(_pods(tmp_path, ["a,4000,1,1,500,", "b,8000,1,1,1000,"]))
    assert t.cpu.tolist() == [8000, 4000] and t.freq.tolist() == [0.5, 0.5]


def _two_shapes(tmp_path):
    # Target workload M: A = (4000 CPU, 500 milli of one GPU), B = (8000 CPU, one whole GPU), 1/2 each.
    return typical_pods(_pods(tmp_path, ["a,4000,1,1,500,", "b,8000,1,1,1000,"]))


def test_fragmentation_of_a_two_node_cluster_by_hand(tmp_path):
    t = _two_shapes(tmp_path)
    measure = FragMeasure(t, ("T4",))
    # Node 1: GPUs left [1000, 300], 16000 CPU left. A fits (the 1000 GPU): fragment = milli on
    # GPUs below 500 = 300. B fits: milli on GPUs below 1000 = 300. F = 0.5*300 + 0.5*300 = 300.
    # Node 2: [400, 200], 4000 CPU. Neither fits a GPU: all 600 idle milli is fragment for
    # both. F = 600. Node 3: [1000, 1000], 6000 CPU: A fits with nothing below 500 (0); B
    # lacks CPU (8000 > 6000): all 2000 idle milli. F = 0.5*0 + 0.5*2000 = 1000.
    left = np.array([[1000, 300, 0], [400, 200, 0], [1000, 1000, 0]])
    frag = measure(np.array([16000, 4000, 6000]), left, np.array([0, 0, 0]))
    assert frag.tolist() == pytest.approx([300.0, 600.0, 1000.0])
    # The cluster: 300 + 600 = 900 fragmented of 1300 + 600 = 1900 idle on the first two.
    assert frag[:2].sum() / left[:2].sum() == pytest.approx(900 / 1900)


def test_a_model_the_shape_excludes_makes_all_idle_milli_fragment(tmp_path):
    t = typical_pods(_pods(tmp_path, ["a,1000,1,1,500,T4"]))
    measure = FragMeasure(t, ("P100", "T4"))
    left = np.array([[1000, 1000], [1000, 1000]])
    # On the P100 node the shape has no access (2000); on the T4 node it fits (0).
    assert measure(np.array([8000, 8000]), left, np.array([0, 1])).tolist() == [2000.0, 0.0]


def test_cpu_only_shapes_count_all_idle_gpu_milli(tmp_path):
    # GetNodePodFrag: a pod asking for no GPU is XL/XR, and both count as fragment.
    t = typical_pods(_pods(tmp_path, ["a,1000,1,0,0,"]))
    assert FragMeasure(t, ("T4",))(np.array([8000]), np.array([[700, 1000]]), np.array([0])).tolist() == [1700.0]


def test_vectorised_measure_equals_the_reference_loop(tmp_path):
    rows = ["a,4000,1,1,500,", "b,8000,1,1,1000,T4", "c,2000,1,0,0,", "d,16000,1,2,1000,", "e,1000,1,1,250,P100"]
    t = typical_pods(_pods(tmp_path, rows * 3))
    models = ("P100", "T4")
    rng = np.random.default_rng(0)
    left = rng.choice([0, 100, 250, 500, 750, 1000], size=(200, 4))
    cpu = rng.integers(0, 20000, 200)
    model = rng.integers(0, 2, 200)
    got = FragMeasure(t, models)(cpu, left, model)
    want = [node_frag_reference(int(cpu[i]), left[i].tolist(), models[model[i]], t) for i in range(200)]
    assert got == pytest.approx(want)


def test_shapes_with_different_model_constraints_are_different_shapes(tmp_path):
    t = typical_pods(_pods(tmp_path, ["a,4000,1,1,500,T4", "b,4000,1,1,500,", "c,4000,1,1,500,T4"]))
    assert t.spec == ("T4", "") and t.count.tolist() == [2, 1]


def test_one_node_path_equals_the_vectorised_measure(tmp_path):
    rows = ["a,4000,1,1,500,", "b,8000,1,1,1000,T4", "c,2000,1,0,0,", "d,16000,1,2,1000,", "e,1000,1,1,250,P100"]
    t = typical_pods(_pods(tmp_path, rows))
    measure = FragMeasure(t, ("P100", "T4"))
    rng = np.random.default_rng(1)
    left = rng.choice([0, 100, 250, 500, 750, 1000], size=(100, 4))
    cpu = rng.integers(0, 20000, 100)
    model = rng.integers(0, 2, 100)
    many = measure(cpu, left, model)
    assert [measure.one(int(cpu[i]), left[i].tolist(), int(model[i])) for i in range(100)] == many.tolist()
