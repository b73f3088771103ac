"""The compiled backfill cycle (``plan_compiled``) against ``plan.backfill``'s own code.

The compiled cycle claims the same decisions, not close ones: on random cycles (nodes
of several sizes, partitions with weight groups, running jobs, queues of one- and
multi-node jobs, fractional per-node CPU shares) both must start the same jobs on the
same nodes, make the same reservations, test as many jobs and leave the same free
resources. Skipped where numba (the ``fast`` extra) is absent.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from shapeshift.policies.slurm import fit_compiled, plan_compiled
from shapeshift.policies.slurm.cycle import _end_arrays
from shapeshift.policies.slurm.ends import EndsByJob
from shapeshift.policies.slurm.plan import Candidate, Ending, Free, Need, backfill, fit

pytestmark = pytest.mark.skipif(
    not plan_compiled.available(), reason="numba (the fast extra) is not installed or SHAPESHIFT_PURE_PYTHON is set"
)


def _cycle(seed: int):
    rng = random.Random(seed)
    size = rng.randint(4, 40)
    node_gpus = [rng.choice((4, 8, 8)) for _ in range(size)]
    node_cpus = [rng.choice((32, 64)) for _ in range(size)]
    node_mem = [rng.choice((256.0, 512.0)) for _ in range(size)]
    free = Free(list(node_gpus), list(map(float, node_cpus)), list(node_mem))
    # Partitions: all nodes in two weight groups, and a subset in one group (gaps in it).
    cut = rng.randint(1, size - 1)
    everything = [list(range(cut)), list(range(cut, size))]
    rng.shuffle(everything)
    subset = [sorted(rng.sample(range(size), rng.randint(1, size)))]
    parts = [(everything, max(node_gpus)), (subset, max(node_gpus[n] for n in subset[0]))]
    running = []
    for _ in range(rng.randint(0, 3 * size)):
        n = rng.randrange(size)
        g = rng.randint(1, max(1, free.gpus[n]))
        if free.gpus[n] < g:
            continue
        need = Need(g, rng.choice((1.0, 2.0, 2.5, 10 / 3)), float(rng.randint(1, 64)))
        if free.cpus[n] < need.cpus or free.mem[n] < need.mem:
            continue
        free.take([(n, need)])
        end = rng.choice((60.0, 90.0, 600.0, 3600.0, 7200.0)) + rng.randint(-30, 30) * 10
        running.append(Ending(end, ((n, need),)))
    queue = []
    for i in range(rng.randint(1, 60)):
        groups, largest = rng.choice(parts)
        gpus = rng.choice((1, 1, 2, 4, 8, 16))
        need = Need(gpus, gpus * rng.choice((1.0, 1.5, 4.0)), gpus * 8.0)
        queue.append(Candidate(f"j{i}", need, 60.0 * rng.randint(1, 240), groups, largest))
    now = rng.choice((0.0, 17.0, 1000.0))
    params = dict(
        window=rng.choice((600.0, 86400.0)),
        resolution=rng.choice((1.0, 60, 300)),
        max_job_test=rng.choice((5, 500)),
        epoch=rng.choice((0.0, 13.0)),
    )
    return now, queue, free, running, params


@pytest.mark.parametrize("seed", range(300))
def test_compiled_cycle_decides_as_the_python_one(seed):
    now, queue, free, running, params = _cycle(seed)
    here, there = free.copy(), free.copy()
    expected = backfill(now, queue, here, list(running), compiled=False, **params)
    got = backfill(now, queue, there, list(running), compiled=True, **params)
    assert got.started == expected.started
    assert got.reservations == expected.reservations
    assert [type(r.begin) for r in got.reservations] == [type(r.begin) for r in expected.reservations]
    assert got.tested == expected.tested
    for a, b in ((here.gpus, there.gpus), (here.cpus, there.cpus), (here.mem, there.mem)):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("seed", range(0, 300, 10))
def test_ends_from_the_pool_decide_as_the_list(seed):
    # The policy hands the compiled cycle its running jobs' entries from a pool with the
    # entries of ended jobs between them (ends.EntryPool), and the entries of jobs
    # started at this instant after the pool's: the same cycle as from the list.
    now, queue, free, running, params = _cycle(seed)
    ends = EndsByJob()
    ends.pool = type(ends.pool)(capacity=2)
    listed = running[: len(running) // 2]
    for i, ending in enumerate(listed):
        ends[f"gone{i}"] = Ending(1.0, ((0, Need(1, 1.0, 1.0)),))
        ends[f"r{i}"] = ending
    for i in range(len(listed)):
        ends.pop(f"gone{i}")
    started = running[len(listed) :]
    arrays = _end_arrays(ends.pool.live_rows(), started, ends.pool)
    here, there = free.copy(), free.copy()
    expected = backfill(now, queue, here, list(running), compiled=True, **params)
    got = backfill(now, queue, there, list(running), compiled=True, arrays=arrays, **params)
    assert (got.started, got.reservations, got.tested) == (expected.started, expected.reservations, expected.tested)
    assert all(np.array_equal(a, b) for a, b in ((here.gpus, there.gpus), (here.cpus, there.cpus)))


@pytest.mark.parametrize("seed", range(0, 300, 3))
def test_compiled_fit_chooses_as_fit(seed):
    # The main scheduler's compiled fit (fit_compiled.fit_now) against fit.fit, on the
    # random cycles' free resources after their running jobs, for every queued shape.
    _, queue, free, _, _ = _cycle(seed)
    for cand in queue:
        assert fit_compiled.fit_now(cand.need, cand.groups, free, cand.largest) == fit(
            cand.need, cand.groups, free, cand.largest
        )


def test_segment_sum_is_numpys_reduceat():
    # Run totals decide ties between runs of nodes: the compiled sum must be numpy's to
    # the last bit (pairwise above 8 values), on values that round.
    rng = np.random.default_rng(1)
    for n in (1, 2, 7, 8, 9, 15, 16, 17, 100, 128, 129, 130, 257, 1000):
        a = rng.random(n) * 10 / 3
        assert fit_compiled._segment_sum(a, 0, n) == np.add.reduceat(a, [0])[0]
