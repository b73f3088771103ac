"""``pollux unaware=true`` tunes the batch of a job whose workload fixes it, as the Sia
artifact's unaware Pollux does (``sia-simulator/cluster_unaware.py``: batch tuning on for
every job, NCF's with its fixed batch as the largest, at most one GPU); ``fixed_batch=keep``
(ours) and ``pollux`` without ``unaware`` (the Pollux simulator) run it at its own batch.

The toy application and its job: ``toy_fixed_batch``.
"""

from __future__ import annotations

import pytest

from shapeshift.policies.goodput.pollux import PolluxParams, PolluxPolicy
from tests.policies.goodput.toy_fixed_batch import toy_jct, write_profiles


@pytest.mark.parametrize(
    ("unaware", "fixed_batch", "jct"), [(True, "tune", 80.0), (True, "keep", 84.0), (False, "tune", 84.0)]
)
def test_a_fixed_batch_job_has_its_batch_tuned_when_unaware(tmp_path, unaware, fixed_batch, jct):
    # One GPU, one job submitted at 0 with a fixed batch of 32 (the NCF-like case), round
    # 60 s, no launch delay, the exact search. Pollux allocates at its rounds only; at 0 s
    # the job's restart factor is 0 (age 0), so the exact search's power mean gains nothing
    # by starting it (the genetic search's second objective, cluster utility, would start
    # it at 0; the run below is the same) and it starts at the next round: the job runs
    # from 60 s and its JCT is 60 s plus the run below.
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
    root = write_profiles(tmp_path)
    params = PolluxParams(
        profiles=str(root), unaware=unaware, unaware_profile="", fixed_batch=fixed_batch, search="exact"
    )
    policy = PolluxPolicy(params)
    assert toy_jct(root, policy) == pytest.approx(jct, abs=1e-3)
