"""The FGD placement part of the policy framework on hand-derived states."""

from __future__ import annotations

import numpy as np

from shapeshift.engine.state import FreeResources
from shapeshift.model import ClusterSpec, JobSpec, NodeSpec
from shapeshift.policies.framework.placement import PLACEMENTS
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate


def two_single_gpu_nodes() -> ClusterSpec:
    nodes = tuple(NodeSpec(f"n{i}", gpus=1, cpus=32.0, mem_gb=64.0, gpu_type="T4") for i in range(2))
    return ClusterSpec(nodes, gpu_fractions=True)


def test_fgd_keeps_a_gpu_usable_for_the_typical_job_where_best_fit_does_not():
    # Node 0's GPU has 700 thousandths free (a 300 job holds it), node 1's is idle.
    # The jobs seen so far: twenty of 600 and this one of 300, so the typical set (95%
    # coverage of 21 pods: 20 >= 19.95) is the 600 shape alone.
    # 300 on node 0: 400 left < 600, F goes 0 -> 400: score int(sigmoid(-0.4) * 100) = 40.
    # 300 on node 1: 700 left >= 600, F stays 0: score int(sigmoid(0) * 100) = 50. Node 1.
    # Best fit (consolidated) takes the tightest GPU instead: node 0.
    cluster = two_single_gpu_nodes()
    nodes = np.arange(2)
    free = FreeResources.of(cluster)
    assert free.milli is not None
    free.milli[0, 0] = 700
    fgd = PLACEMENTS["fgd"]()
    for i in range(20):
        fgd.find(JobSpec(f"t{i}", 0.0, 1, duration=1.0, num_cpus=1.0, gpu_milli=600), nodes, free)
    job = JobSpec("x", 0.0, 1, duration=1.0, num_cpus=1.0, gpu_milli=300)
    assert fgd.find(job, nodes, free).devices == ((1, 0),)
    assert PLACEMENTS["consolidated"]().find(job, nodes, free).devices == ((0, 0),)


def test_fifo_with_fgd_placement_runs_fractions_and_whole_gpus():
    # A (500) and B (500) share one GPU (both fit, and FGD's scores tie at first: the
    # lowest node); C asks for a whole GPU and gets the other node's idle GPU. All at 0.
    jobs = [
        JobSpec("A", 0.0, 1, duration=10.0, num_cpus=1.0, gpu_milli=500),
        JobSpec("B", 0.0, 1, duration=10.0, num_cpus=1.0, gpu_milli=500),
        JobSpec("C", 0.0, 1, duration=10.0, num_cpus=1.0),
    ]
    result = simulate(jobs, two_single_gpu_nodes(), make_policy("fifo", {"placement": "fgd"}))
    assert {j.job_id: j.first_start for j in result.jobs} == {"A": 0.0, "B": 0.0, "C": 0.0}
