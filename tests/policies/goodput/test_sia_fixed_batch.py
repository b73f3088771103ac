"""Sia tunes the batch of a job whose workload fixes it, as the Sia artifact does
(``sia-simulator/cluster.py``, ``Cluster.__init__``: batch tuning on for every job under
Sia, NCF's included, which the Pollux simulator and Shapeshift's ``pollux`` reader fix);
``fixed_batch=keep`` (ours) runs it at its own batch.

The toy application and its job: ``toy_fixed_batch``.
"""

from __future__ import annotations

import pytest

from shapeshift.policies.goodput.sia import SiaParams, SiaPolicy
from tests.policies.goodput.toy_fixed_batch import toy_jct, write_profiles


@pytest.mark.parametrize(("fixed_batch", "jct"), [("tune", 20.0), ("keep", 24.0)])
def test_a_fixed_batch_job_has_its_batch_tuned_unless_fixed_batch_is_keep(tmp_path, fixed_batch, jct):
    # One GPU, one job submitted at 0 with a fixed batch of 32 (the NCF-like case: the
    # workload fixes it, the artifact's Sia tunes it), round 0 s, no launch delay.
    #
    # keep: batch 32 on one GPU, no accumulation (not above the initial batch), step
    # 0.10 + (32 - 16) / 48 x 0.06 = 0.12 s: 32 / 0.12 = 266.67 examples/s, so the
    # 6,400 examples take 24 s.
    #
    # tune: with no model of its own yet the job starts at max(initial 32, 16 x 1) = 32
    # (``Job.update_local_bsz``), 266.67 examples/s, until epoch 1 at 3,200 examples
    # (12 s). There it records its row (1 GPU, 32 per GPU, 0.12 s) and re-chooses: the
    # model fitted on that one row has compute time alpha + beta x b with alpha = 0.06 s
    # (half the measured compute time) and beta = 0.06 / 32; above the initial batch one
    # GPU accumulates once, so batch B in (32, 128] costs 2 x (alpha + beta x B / 2) =
    # 0.12 + 0.001875 B s, and B / (0.12 + 0.001875 B) grows with B: 128 (355.6 against
    # 266.7 at 32). Batch 128 runs as 2 micro-steps of 64: 0.16 + 1 x 0.16 = 0.32 s, 400
    # examples/s, so the last 3,200 examples take 8 s: done at 12 + 8 = 20 s.
    root = write_profiles(tmp_path)
    params = SiaParams(profiles=str(root), fixed_batch=fixed_batch, solver="highs")
    policy = SiaPolicy(params, params.knowledge())
    assert toy_jct(root, policy) == pytest.approx(jct, abs=1e-3)
