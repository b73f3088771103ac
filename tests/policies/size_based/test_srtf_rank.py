"""SRTF's array ranking: the walk on prefix sums and the ranking from a hint give what
the job-by-job rules give."""

from __future__ import annotations

import random

import numpy as np

from shapeshift.policies.size_based.srtf_rank import RunningRanking, Spans, _take_ranks, take_block
from shapeshift.policies.size_based.srtf_table import (
    DONE,
    ESTIMATE,
    GPUS,
    LAST,
    RATE,
    STALL,
    STARTED,
    SUBMIT,
    TOTAL,
    WIDTH,
)


def _walk_one_by_one(gpus: list[int], start: int, end: int, capacity: int) -> tuple[list[int], int, int]:
    """The rule, job by job: take each job whose GPUs fit what is left; stop at the job
    that uses up the last GPU (then nothing, not even a job of no GPUs, is taken)."""
    taken = []
    i = start
    while i < end and capacity > 0:
        if gpus[i] <= capacity:
            taken.append(i)
            capacity -= gpus[i]
        i += 1
    return taken, capacity, i


def _ranking(gpus: list[int]) -> RunningRanking:
    g = np.array(gpus, dtype=np.int64)
    n = len(gpus)
    return RunningRanking(np.arange(n), [f"j{i}" for i in range(n)], np.arange(n, dtype=float),
                          np.zeros(n), g, np.zeros(n), np.cumsum(g))


def test_taking_ranks_from_prefix_sums_takes_the_jobs_the_rule_takes():
    rng = random.Random(11)
    for _ in range(500):
        gpus = [rng.choice([0, 1, 1, 2, 4, 8, 16]) for _ in range(rng.randint(1, 30))]
        start = rng.randint(0, len(gpus) - 1)
        end = rng.randint(start, len(gpus))
        capacity = rng.randint(1, 40)
        spans = Spans()
        stop, left = _take_ranks(_ranking(gpus), start, end, capacity, spans)
        taken = [k for a, b in spans.spans for k in range(a, b)]
        expected, expected_left, walked_to = _walk_one_by_one(gpus, start, end, capacity)
        assert (taken, left) == (expected, expected_left), (gpus, start, end, capacity)
        assert stop == (end if expected_left > 0 else walked_to)
        # take_block (themis's lease round) walks the same way on the block itself; it
        # once took jobs of no GPUs right after the last GPU went (a fixed bug).
        listed: list[int] = []
        assert take_block(np.array(gpus), start, end, capacity, listed) == (stop, left)
        assert listed == expected


def test_a_hand_derived_walk():
    # GPUs 2, 4, 8, 1 with 7 left: 2 and 4 fit (1 left), 8 does not, 1 uses the last GPU.
    spans = Spans()
    assert _take_ranks(_ranking([2, 4, 8, 1]), 0, 4, 7, spans) == (4, 0)
    assert spans.spans == [(0, 2), (3, 4)]


def _columns(remaining: list[float], submit: list[float]) -> np.ndarray:
    """Running jobs that have done nothing yet and are paused until far ahead, so their
    remaining time at any ``now`` before that is their estimate."""
    n = len(remaining)
    columns = np.zeros((WIDTH, n))
    columns[ESTIMATE] = remaining
    columns[SUBMIT] = submit
    columns[GPUS] = 1
    columns[DONE] = 0.0
    columns[LAST] = 0.0
    columns[STALL] = 1e12
    columns[RATE] = 1.0
    columns[TOTAL] = 1e12
    columns[STARTED] = 0.0
    return columns


def test_a_hint_changes_the_cost_never_the_ranking():
    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(1, 25)
        remaining = [float(rng.choice([10, 20, 30, rng.randint(1, 1000)])) for _ in range(n)]
        submit = [float(rng.randint(0, 5)) for _ in range(n)]
        ids = [f"j{i:02d}" for i in rng.sample(range(n), n)]
        columns = _columns(remaining, submit)
        expected = sorted(range(n), key=lambda i: (remaining[i], submit[i], ids[i]))
        # Hints: none, the right order, a shuffled one, and one lacking some rows.
        right = np.array(expected, dtype=np.int64)
        shuffled = right[rng.sample(range(n), n)]
        partial = right[: rng.randint(0, n)]
        for hint in (None, right, shuffled, partial):
            ranking = RunningRanking.of(ids, columns, 0.0, hint)
            assert ranking.order.tolist() == expected
            assert ranking.prefix.tolist() == list(range(1, n + 1))
