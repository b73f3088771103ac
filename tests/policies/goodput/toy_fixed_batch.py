"""The toy application of the fixed-batch tests (``test_sia_fixed_batch.py``,
``test_pollux_fixed_batch.py``), worked by hand there.

Batches validated at 32 (the initial) and 128 (the largest), per-GPU batches measured
from 16 to 64 on one GPU, step time linear between (16, 0.10 s) and (64, 0.16 s), no sync
time; two epochs of 100 steps at the initial batch (work 200 x 32 = 6,400 examples,
epoch 1 from 3,200); ``grad_sqr = 0``, so every batch has statistical efficiency 1 and
goodput is throughput, which grows with the batch. The one job is submitted at 0 with a
fixed batch of 32 (the NCF-like case) on one GPU, with no launch delay or restore
penalty.
"""

from __future__ import annotations

from pathlib import Path

from shapeshift.engine.overheads import Overheads
from shapeshift.model import BatchSpec, ClusterSpec, JobSpec, NodeSpec
from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth
from shapeshift.sim.simulator import simulate

VALIDATION = "progress,iteration,metric,grad_sqr,grad_var\n100,100,0.5,0.0,1.0\n200,200,0.6,0.0,1.0\n"
PLACEMENTS = "placement,local_bsz,step_time,sync_time\n1,16,0.10,0.0\n1,64,0.16,0.0\n"
SCALABILITY = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n1,1,16,0.10,0.0\n"


def write_profiles(root: Path) -> Path:
    """The toy application's profiles under ``root/toy``; returns ``root``."""
    app = root / "toy"
    app.mkdir()
    for name, text in (
        ("validation-32.csv", VALIDATION),
        ("validation-128.csv", VALIDATION),
        ("placements.csv", PLACEMENTS),
        ("scalability.csv", SCALABILITY),
    ):
        (app / name).write_text(text)
    return root


def toy_jct(root: Path, policy) -> float:
    """The toy job's JCT under ``policy`` on one GPU (rounds of 60 s), the profiles under
    ``root`` as the ground truth."""
    cluster = ClusterSpec((NodeSpec("n0", 1, 8, 32),))
    job = JobSpec("j", 0.0, 1, iterations=1, model="pollux/toy", batch=BatchSpec(32, 32, 128, 16, 64, adaptive=False))
    result = simulate(
        [job],
        cluster,
        policy,
        throughput=PolluxGroundTruth(root),
        overheads=Overheads(launch_delay=0.0, restore_penalty=0.0),
        round_seconds=60.0,
    )
    (status,) = result.jobs
    return status.end_time - status.spec.submit_time
