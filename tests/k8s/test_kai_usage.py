"""KAI's historical usage kept as running accumulators (``kai_usage``) against the same
documented rule computed by integrating every allocation (``kai_fairshare.decayed_usage``)."""

from __future__ import annotations

import random

import pytest

from shapeshift.k8s.kai_fairshare import decayed_usage
from shapeshift.k8s.kai_usage import UsageAccumulator


def test_normalized_to_cluster_capacity_by_hand():
    # time-based-fairshare/README.md, "Normalization to cluster capacity": 10 GPUs over a
    # 10-hour window, 8 GPUs held for 3 hours = 24 of 100 GPU-hours: 0.24.
    acc = UsageAccumulator(None, 10 * 3600.0)
    acc.start("q", 8, 0.0)
    acc.stop("q", 8, 3 * 3600.0)
    assert acc.usage(10, 10 * 3600.0)["q"] == pytest.approx(0.24)


def test_sliding_window_drops_old_usage():
    # A 1-hour window at t = 3 h: 4 GPUs held 0-2 h are outside it entirely (exactly 0),
    # 2 GPUs held 1.5-2.5 h count for their last half hour: 2 x 0.5 / (4 x 1) = 0.25.
    acc = UsageAccumulator(None, 3600.0)
    acc.start("a", 4, 0.0)
    acc.stop("a", 4, 7200.0)
    acc.start("b", 2, 5400.0)
    acc.stop("b", 2, 9000.0)
    usage = acc.usage(4, 3 * 3600.0)
    assert usage["a"] == 0.0
    assert usage["b"] == pytest.approx(0.25)


@pytest.mark.parametrize(("half_life", "window"), [(None, 5000.0), (900.0, 4000.0), (3600.0, 1e9)])
def test_same_as_integrating_every_allocation(half_life, window):
    # Random allocations on 3 queues, read at increasing instants: the accumulators give
    # what integrating the whole history gives, to rounding.
    rng = random.Random(7)
    acc = UsageAccumulator(half_life, window)
    history: list[tuple[str, str, float, float, float]] = []
    open_: dict[int, tuple[str, float, float]] = {}
    now = 0.0
    for step in range(300):
        now += rng.uniform(0, 200)
        if open_ and rng.random() < 0.5:
            key = rng.choice(list(open_))
            queue, gpus, start = open_.pop(key)
            acc.stop(queue, gpus, now)
            history.append((queue, "gpu", gpus, start, now))
        else:
            queue, gpus = rng.choice("abc"), float(rng.choice((1, 2, 4)))
            acc.start(queue, gpus, now)
            open_[step] = (queue, gpus, now)
        ongoing = [(q, "gpu", g, s, now) for q, g, s in open_.values()]
        want = decayed_usage([*history, *ongoing], {"gpu": 16}, now, half_life_s=half_life, window_s=window)
        got = acc.usage(16, now)
        for queue in set(want) | set(got):
            assert got.get(queue, 0.0) == pytest.approx(want.get(queue, {}).get("gpu", 0.0), rel=1e-9, abs=1e-12)
