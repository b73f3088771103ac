"""``pollux unaware=true`` tunes the batch of a job whose workload fixes it, as the Sia
artifact's unaware Pollux does (``sia-simulator/cluster_unaware.py``: batch tuning on for
every job, NCF's with its fixed batch as the largest, at most one GPU); ``fixed_batch=keep``
(ours) and ``pollux`` without ``unaware`` (the Pollux simulator) run it at its own batch.

The toy application, worked by hand: batches validated at 32 (the initial) and 128 (the
largest), per-GPU batches measured from 16 to 64 on one GPU, step time linear between
(16, 0.10 s) and (64, 0.16 s), no sync time; two epochs of 100 steps at the initial batch
(work 200 x 32 = 6,400 examples, epoch 1 from 3,200); ``grad_sqr = 0``, so every batch
has statistical efficiency 1 and goodput is throughput, which grows with the batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.model import BatchSpec, ClusterSpec, JobSpec, NodeSpec
from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth
from shapeshift.policies.goodput.pollux import PolluxParams, PolluxPolicy
from shapeshift.sim.simulator import simulate

VALIDATION = "progress,iteration,metric,grad_sqr,grad_var\n100,100,0.5,0.0,1.0\n200,200,0.6,0.0,1.0\n"
PLACEMENTS = "placement,local_bsz,step_time,sync_time\n1,16,0.10,0.0\n1,64,0.16,0.0\n"
SCALABILITY = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n1,1,16,0.10,0.0\n"


def _profiles(tmp_path: Path) -> Path:
    app = tmp_path / "toy"
    app.mkdir()
    for name, text in (
        ("validation-32.csv", VALIDATION),
        ("validation-128.csv", VALIDATION),
        ("placements.csv", PLACEMENTS),
        ("scalability.csv", SCALABILITY),
    ):
        (app / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("unaware", "fixed_batch", "jct"), [(True, "tune", 80.0), (True, "keep", 84.0), (False, "tune", 84.0)]
)
def test_a_fixed_batch_job_has_its_batch_tuned_when_unaware(tmp_path, unaware, fixed_batch, jct):
    # One GPU, one job submitted at 0 with a fixed batch of 32 (the NCF-like case), round
    # 60 s, no launch delay. Pollux allocates at its rounds only, the first at 60 s, so the
    # job runs from 60 s and its JCT is 60 s plus the run below.
    #
    # Its own batch (keep, or without unaware): 32 on one GPU, no accumulation (not above
    # the initial batch), step 0.10 + (32 - 16) / 48 x 0.06 = 0.12 s: 32 / 0.12 = 266.67
    # examples/s, so the 6,400 examples take 24 s: JCT 84 s.
    #
    # Tuned: with no model of its own yet the job starts at max(initial 32, 16 x 1) = 32
    # (``Job.update_local_bsz``), 266.67 examples/s, until epoch 1 at 3,200 examples
    # (12 s). There it records its row (1 GPU, 32 per GPU, 0.12 s) and re-chooses: the
    # model fitted on that one row has compute time alpha + beta x b with alpha = 0.06 s
    # (half the measured compute time) and beta = 0.06 / 32; above the initial batch one
    # GPU accumulates once, so batch B in (32, 128] costs 2 x (alpha + beta x B / 2) =
    # 0.12 + 0.001875 B s, and B / (0.12 + 0.001875 B) grows with B: 128 (355.6 against
    # 266.7 at 32). Batch 128 runs as 2 micro-steps of 64: 0.16 + 1 x 0.16 = 0.32 s, 400
    # examples/s, so the last 3,200 examples take 8 s: done 12 + 8 = 20 s after its start,
    # JCT 80 s.
    root = _profiles(tmp_path)
    params = PolluxParams(profiles=str(root), unaware=unaware, unaware_profile="", fixed_batch=fixed_batch)
    policy = PolluxPolicy(params)
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
    assert status.end_time - status.spec.submit_time == pytest.approx(jct, abs=1e-3)
