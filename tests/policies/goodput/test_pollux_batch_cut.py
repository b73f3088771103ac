"""How a goodput candidate past the largest batch runs (``batch_cut``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shapeshift.engine.batching import split_batch
from shapeshift.model import BatchSpec
from shapeshift.policies.goodput.epochs import cut_back
from shapeshift.policies.goodput.pollux import PolluxParams

# YOLOv3 in the Pollux profiles: initial batch 8, largest 512, 4 to 8 per GPU.
YOLO = BatchSpec(8, 8, 512, 4, 8)
# BERT: initial 12, largest 384, 1 to 12 per GPU (the overshoot happens on 5 and 6 GPUs).
BERT = BatchSpec(12, 12, 384, 1, 12)


def test_a_candidate_past_the_largest_runs_with_its_accumulation_steps_kept():
    # YOLOv3 on 3 GPUs. The goodput search's top candidate is 512: 512 / 3 = 170.7 per GPU,
    # ceil(170.7 / 8) = 22 micro-steps (accum 21), ceil(170.7 / 22) = 8 per micro-step:
    # 3 x 8 x 22 = 528. The artifacts' update_local_bsz keep accum 21 and cut the per-GPU
    # batch to int(512 / (3 x 22)) = int(7.76) = 7: 3 x 7 x 22 = 462.
    handed = cut_back(YOLO, 528, 3, "artifact")
    assert handed == 512
    run = split_batch(YOLO, handed, 3)
    # split_batch(512, 3): ceil(170.7) = 171 per GPU, ceil(171 / 8) - 1 = 21, ceil(171 / 22)
    # = 8, cut to 7: the artifact's (7, 21).
    assert (run.atomic, run.accum, run.global_batch) == (7, 21, 462)
    # regroup (ours) hands over the cut-back 462, which re-splits as 154 per GPU:
    # ceil(154 / 8) - 1 = 19, ceil(154 / 20) = 8, int(512 / 60) = 8 leaves it: 3 x 8 x 20 = 480.
    handed = cut_back(YOLO, 528, 3, "regroup")
    assert handed == 462
    run = split_batch(YOLO, handed, 3)
    assert (run.atomic, run.accum, run.global_batch) == (8, 19, 480)


def _artifact_runs(batch: BatchSpec, size: float, replicas: int) -> tuple[int, int] | None:
    """(atomic, accum) the Pollux artifact runs for a goodput candidate ``size``
    (``GoodputFunction.optimize`` with accumulation, then ``Job.update_local_bsz``'s cut);
    None where the candidate's per-GPU batch is outside the limits (goodput 0)."""
    eps = 1e-8
    local = size / replicas
    accum = math.ceil(local / batch.max_local - eps) - 1
    if replicas == 1 and local > batch.initial + eps:
        accum = max(accum, 1)
    atomic = math.ceil(local / (accum + 1) - eps)
    if not batch.min_local <= atomic <= batch.max_local:
        return None
    return min(atomic, int(batch.max_size / (replicas * (accum + 1)))), accum


@pytest.mark.parametrize("batch", [YOLO, BERT], ids=["yolov3", "bert"])
def test_every_candidate_runs_as_in_the_artifact(batch):
    # Every candidate of every GPU count (the search's 50 geometric steps), handed to the
    # engine with batch_cut=artifact, splits as the artifact runs it; with regroup some do not.
    differ = 0
    for replicas in range(1, 65):
        lo = max(batch.initial, batch.min_local * replicas)
        if lo > batch.max_size:
            break
        for size in np.geomspace(lo, batch.max_size, 50):
            want = _artifact_runs(batch, float(size), replicas)
            if want is None:
                continue
            accum = want[1]
            candidate = replicas * math.ceil(size / replicas / (accum + 1) - 1e-8) * (accum + 1)
            run = split_batch(batch, cut_back(batch, candidate, replicas, "artifact"), replicas)
            assert (run.atomic, run.accum) == want, (replicas, size)
            ours = split_batch(batch, cut_back(batch, candidate, replicas, "regroup"), replicas)
            differ += (ours.atomic, ours.accum) != want
    assert differ > 0


def test_the_artifacts_cut_is_the_default():
    assert PolluxParams().batch_cut == "artifact"
