"""Each placement's choice on a 3-node example, derived from its score plugin's formula.

Cluster: three T4 nodes of 2 GPUs and 32000 CPU milli.
  n0: idle: GPUs left [1000, 1000], 32000 CPU left.
  n1: a 600-milli pod (8000 CPU) on GPU 1: [1000, 400], 24000 CPU left.
  n2: a 1-GPU pod (16000 CPU) on GPU 0: [0, 1000], 16000 CPU left.
Arriving pod P: 300 milli of one GPU, 4000 CPU. Every node can hold it.
Target workload for FGD: A = (4000 CPU, 300 milli), B = (8000 CPU, one whole GPU), 1/2 each.
"""

from __future__ import annotations

import numpy as np
import pytest

from shapeshift.errors import InputError
from shapeshift.gpushare.frag import typical_pods
from shapeshift.gpushare.openb import read_nodes, read_pods
from shapeshift.gpushare.placement import make_placement
from shapeshift.gpushare.state import ClusterState, PodAsk
from tests.gpushare.helpers import NODE_HEADER, write

T4 = np.array([True])


def ask(cpu, num, milli):
    return PodAsk(cpu, cpu, 1, num, milli, T4)


@pytest.fixture
def state(tmp_path):
    nodes = read_nodes(write(tmp_path / "n.csv", NODE_HEADER, [f"n{i},32000,262144,2,T4" for i in range(3)]))
    pods = read_pods(
        write(
            tmp_path / "p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", ["a,4000,1,1,300", "b,8000,1,1,1000"]
        )
    )
    s = ClusterState(nodes, typical_pods(pods))
    s.place(1, (1,), ask(8000, 1, 600))
    s.place(2, (0,), ask(16000, 1, 1000))
    return s


P = ask(4000, 1, 300)
IDENTITY = np.array([0, 1, 2])
ALL = np.array([0, 1, 2])


def choose(state, name, rank=IDENTITY, seed=0):
    return make_placement(name).choose(state, P, ALL, rank, np.random.default_rng(seed))


def test_best_fit_takes_the_least_free_node_after_normalising(state):
    # int((1 - ((cpu_left - 4000)/128000*0.5 + (gpu_left - 300)/8000*0.5)) * 100):
    # n0: 1 - (0.109375 + 0.10625) -> 78; n1: 1 - (0.078125 + 0.06875) -> 85;
    # n2: 1 - (0.046875 + 0.04375) -> 90. Min-max to 0..100: 0, 700 // 12 = 58, 100.
    scorer = make_placement("best-fit")
    assert scorer.scores(state, P, ALL).tolist() == [0, 58, 100]
    assert choose(state, "best-fit") == (2, (1,))  # n2's only GPU with room


def test_dot_product_scores_truncate_to_a_tie_that_the_seeded_rank_breaks(state):
    # 100 * (1 - (cpu_left/128000 * 4000/128000 + gpu_left/8000 * 300/8000) / 2):
    # n0 99.14, n1 99.38, n2 99.57: all 99 once truncated, so the node whose random
    # name prefix sorts first wins.
    assert make_placement("dot-product").scores(state, P, ALL).tolist() == [99, 99, 99]
    assert choose(state, "dot-product")[0] == 0
    assert choose(state, "dot-product", rank=np.array([2, 0, 1]))[0] == 1
    # Then the tightest GPU that fits: on n1, GPU 1 (400 left) over GPU 0 (1000).
    assert choose(state, "dot-product", rank=np.array([2, 0, 1])) == (1, (1,))


def test_gpu_packing_prefers_a_partly_used_gpu(state):
    # n0 idle: max(33 - 2, 2) = 31. n1: tightest fitting GPU has 400 left, not idle:
    # 100 - (400*100/1000)/10 = 96. n2: its fitting GPU is idle: max(50 - 1, 33) = 49.
    assert make_placement("gpu-packing").scores(state, P, ALL).tolist() == [31, 96, 49]
    assert choose(state, "gpu-packing") == (1, (1,))


def test_gpu_clustering_prefers_nodes_with_the_same_shape(state):
    # P is a share-GPU pod. n0: no pods, band 25 + 25*(8000-2000)//8000 = 18 -> 43.
    # n1: only share pods, band 75 + 25*6600//8000 = 20 -> 95. n2: only 1-GPU pods: 0 + 21.
    assert make_placement("gpu-clustering").scores(state, P, ALL).tolist() == [43, 95, 21]
    assert choose(state, "gpu-clustering") == (1, (1,))


def test_fgd_picks_the_node_and_gpu_that_least_increase_fragmentation(state):
    # F before: n0 0; n1 0.5*0 (A) + 0.5*400 (B: milli below 1000) = 200; n2 0.
    # n0, either GPU -> [700, 1000]: B leaves 700 -> F 350, delta -350: int(100*sigmoid(-0.35)) = 41.
    # n1, GPU 0 -> [700, 400]: B no longer fits: 0.5*1100 = 550, delta -350 -> 41;
    #     GPU 1 -> [1000, 100]: A 100, B 100 -> F 100, delta +100 -> int(100*sigmoid(0.1)) = 52.
    # n2, GPU 1 -> [0, 700], B no longer fits: F 350 -> 41.
    assert make_placement("fgd").scores(state, P, ALL).tolist() == [41, 52, 41]
    assert choose(state, "fgd") == (1, (1,))


def test_fgd_scores_are_recomputed_after_the_node_changes(state):
    fgd = make_placement("fgd")
    assert fgd.scores(state, P, ALL).tolist() == [41, 52, 41]
    state.place(1, (1,), P)  # n1 -> [1000, 100], 20000 CPU: F = 0.5*100 + 0.5*100 = 100
    # n1 now: GPU 0 -> [700, 100]: A fits (100 below 300), B does not (800 idle): F = 50 + 400
    # = 450, delta -350 -> 41. GPU 1 has 100 < 300: no room.
    assert fgd.scores(state, P, ALL).tolist() == [41, 41, 41]


def test_random_fit_picks_a_feasible_node_and_gpu_by_seed(state):
    picks = {choose(state, "random", seed=s) for s in range(30)}
    assert picks <= {(0, (0,)), (0, (1,)), (1, (0,)), (1, (1,)), (2, (1,))}
    assert len({p[0] for p in picks}) == 3
    assert choose(state, "random", seed=7) == choose(state, "random", seed=7)


def test_whole_gpu_pods_take_the_lowest_idle_gpus(state):
    whole = ask(4000, 1, 1000)
    assert make_placement("best-fit").choose(state, whole, np.array([2]), IDENTITY, np.random.default_rng(0)) == (
        2,
        (1,),
    )
    assert state.exclusive_gpus(0, ask(1, 2, 1000)) == (0, 1)


def test_feasibility_honours_cpu_memory_gpus_and_model(state):
    assert state.feasible(ask(20000, 1, 300)).tolist() == [True, True, False]  # n2 has 16000 CPU
    assert state.feasible(ask(1, 2, 1000)).tolist() == [True, False, False]  # two idle GPUs
    assert state.feasible(ask(1, 1, 500)).tolist() == [True, True, True]
    p100_only = PodAsk(1, 1, 1, 1, 500, np.array([False]))
    assert not state.feasible(p100_only).any()


def test_unknown_placement_is_an_input_error():
    with pytest.raises(InputError, match="unknown placement 'tetris'"):
        make_placement("tetris")
