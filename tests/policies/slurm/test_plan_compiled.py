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

from shapeshift.policies.slurm import fit_compiled, plan_compiled, will_run_compiled
from shapeshift.policies.slurm.candidate_rows import CandidateRows, partition_arrays
from shapeshift.policies.slurm.cycle import _end_arrays
from shapeshift.policies.slurm.ends import EndsByJob
from shapeshift.policies.slurm.plan import Candidate, Ending, Free, Need, backfill, fit

njit_or_skip = fit_compiled.njit if fit_compiled.njit is not None else (lambda f: f)

pytestmark = pytest.mark.skipif(
    not plan_compiled.available(), reason="numba (the fast extra) is not installed or SHAPESHIFT_PURE_PYTHON is set"
)


def _cycle(seed: int, sizes: tuple[int, int] = (4, 40)):
    rng = random.Random(seed)
    size = rng.randint(*sizes)
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


@pytest.mark.parametrize("seed", range(40))
def test_compiled_cycle_decides_as_the_python_one_on_wider_clusters(seed):
    # Over 64 nodes a partition's nodes span several words of bits (``_fit_bits``).
    now, queue, free, running, params = _cycle(seed, (65, 200))
    here, there = free.copy(), free.copy()
    expected = backfill(now, queue, here, list(running), compiled=False, **params)
    got = backfill(now, queue, there, list(running), compiled=True, **params)
    assert got.started == expected.started
    assert got.reservations == expected.reservations
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


@pytest.mark.parametrize("seed", range(0, 300, 10))
def test_kept_candidate_rows_decide_as_fresh_ones(seed):
    # The policy hands the cycle its candidates' rows from slots kept while the jobs
    # wait (candidate_rows.CandidateRows: slots of dropped jobs reused, in any order):
    # the same cycle as rows made on the spot.
    now, queue, free, running, params = _cycle(seed)
    kept = CandidateRows()
    for i in range(5):  # earlier jobs, some started since: their slots are reused
        kept.slot_of(Candidate(f"old{i}", Need(1, 1.0, 1.0), 60.0, queue[0].groups, queue[0].largest))
    for i in range(0, 5, 2):
        kept.drop(f"old{i}")
    at = np.array([kept.slot_of(c) for c in reversed(queue)][::-1], np.int64)
    table = (kept.rows[at], kept.part[at], kept.groups)
    here, there = free.copy(), free.copy()
    expected = backfill(now, queue, here, list(running), compiled=True, **params)
    got = backfill(now, queue, there, list(running), compiled=True, table=table, **params)
    assert (got.started, got.reservations, got.tested) == (expected.started, expected.reservations, expected.tested)


def test_nodes_meeting_the_thresholds_after_a_batch_by_hand():
    # Four nodes; node 1 meets the thresholds now (t_at -1), node 3 after the end at
    # position 0, node 0 after position 2, node 2 after position 5. After the batch
    # ending at position 2: nodes 0, 1 and 3, in index order. Their free CPUs then: node
    # 0 has 1.5 free and its entries at positions 0 (2.0) and 2 (4.0): 7.5; node 1 has 3.0
    # and its entry at position 4 (8.0) comes later: 3.0; node 3 has 0.5 and its entry
    # at position 0 (1.0): 1.5.
    t_at = np.array([2, -1, 5, 0], np.int64)
    srt = np.array([1, 3, 0, 2], np.int64)
    fc = np.array([1.5, 3.0, 0.0, 0.5])
    # Each node's (node, job) pairs in end order: node 0 pairs 0 and 1, node 1 pair 2,
    # node 3 pair 3.
    by_start = np.array([0, 2, 3, 3, 4], np.int64)
    by_pair = np.array([0, 1, 2, 3], np.int64)
    by_pos = np.array([0, 2, 4, 0], np.int64)
    p_cpus = np.array([2.0, 4.0, 8.0, 1.0])
    bits = np.zeros(1, np.uint64)
    cand, cpus = np.zeros(4, np.int64), np.zeros(4)
    cand_bits, cand_pos = np.zeros(1, np.uint64), np.full(4, -1, np.int64)
    k = fit_compiled._sorted_after(
        2, t_at, srt, 4, fc, by_start, by_pair, by_pos, p_cpus, bits, cand, cpus, cand_bits, cand_pos
    )
    assert cand[:k].tolist() == [0, 1, 3]
    assert cpus[:k].tolist() == [7.5, 3.0, 1.5]
    assert bits.tolist() == [0]  # left clear for the next call
    # The same nodes as bits (0, 1 and 3: 1 + 2 + 8) and their places in ``cand``.
    assert cand_bits.tolist() == [11]
    assert [cand_pos[n] for n in (0, 1, 3)] == [0, 1, 2]


def test_when_each_node_meets_the_thresholds_by_hand():
    # Thresholds 4 GPUs, 8 CPUs, no memory; three ends (positions 0-2). Node 0 has 4 and
    # 8 free: it meets them now (-1). Node 1 has none and gets 2 GPUs + 4 CPUs back at
    # positions 0 and 2: it meets them after position 2. Node 2 has 1 + 1 and gets 1 + 1
    # at position 1: never (3, the number of ends). Node 3 has 3 + 8 and gets 1 GPU at
    # position 1: after position 1. In order of that: nodes 0, 3, 1 (node 2 left out).
    fg = np.array([4, 0, 1, 3], np.int64)
    fc = np.array([8.0, 0.0, 1.0, 8.0])
    fm = np.zeros(4)
    # The pairs: 0 (node 1, position 0), 1 (node 2, position 1), 2 (node 3, position 1),
    # 3 (node 1, position 2); each node's in end order.
    p_gpus = np.array([2, 1, 1, 2], np.int64)
    p_cpus = np.array([4.0, 1.0, 0.0, 4.0])
    p_mem = np.zeros(4)
    by_start = np.array([0, 0, 2, 3, 4], np.int64)
    by_pair = np.array([0, 3, 1, 2], np.int64)
    by_pos = np.array([0, 2, 1, 1], np.int64)
    t_at, srt, counts = np.zeros(4, np.int64), np.zeros(4, np.int64), np.zeros(5, np.int64)
    total = will_run_compiled._times(
        4, 8.0, 0.0, fg, fc, fm, 3, by_start, by_pair, by_pos, p_gpus, p_cpus, p_mem, t_at, srt, counts
    )
    assert t_at.tolist() == [-1, 2, 3, 1]
    assert srt[:total].tolist() == [0, 3, 1]


def test_choice_among_the_nodes_after_a_batch_by_hand():
    # Nodes 0, 1, 2, 4, 5, 6, 7 and 9 meet the thresholds (in index order, with their
    # free CPUs); node 6 is reserved. The runs of consecutive free nodes: [0, 1, 2]
    # (4 + 4 + 4 = 12 CPUs), [4, 5] (2 + 3 = 5), [7] (0.5) and [9] (1). A job of one node
    # takes the run with the fewest CPUs, then its node with the fewest: 7. Of two nodes:
    # the cheaper run of two or more, [4, 5]. Of three: the only run long enough, [0, 1,
    # 2]. Of four: no run holds it, so the first four free nodes, [0, 1, 2, 4]. Of eight:
    # only seven are free, no fit.
    cand = np.array([0, 1, 2, 4, 5, 6, 7, 9], np.int64)
    cpus = np.array([4.0, 4.0, 4.0, 2.0, 3.0, 0.0, 0.5, 1.0])
    blocked = np.zeros(10, np.bool_)
    blocked[6] = True
    one_level = np.zeros(10, np.int64)
    for span, nodes in ((1, [7]), (2, [4, 5]), (3, [0, 1, 2]), (4, [0, 1, 2, 4]), (8, None)):
        out = np.full(span, -1, np.int64)
        found = fit_compiled._fit_sorted(span, 1, one_level, cand, cpus, cand.size, blocked, out, 0)
        assert (out.tolist() if found else None) == nodes, span
    # Two cumulative levels, nodes 0-2 only in the second: the first level's free nodes
    # are 4, 5, 7 and 9, where a job of three finds no run and takes the first three.
    two_levels = np.zeros(10, np.int64)
    two_levels[:3] = 1
    out = np.full(3, -1, np.int64)
    assert fit_compiled._fit_sorted(3, 2, two_levels, cand, cpus, cand.size, blocked, out, 0)
    assert out.tolist() == [4, 5, 7]
    # Equal totals: the first run ([4] and [9] both 1.0 CPUs; node 7 reserved too).
    blocked[7] = True
    cpus[3], cpus[4] = 1.0, 5.0
    blocked[5] = True
    out = np.full(1, -1, np.int64)
    assert fit_compiled._fit_sorted(1, 1, one_level, cand, cpus, cand.size, blocked, out, 0)
    assert out.tolist() == [4]


def test_choice_among_the_nodes_after_a_batch_as_bits_by_hand():
    # The one-level cases of the test above, read as bits: the same nodes meet the
    # thresholds (0, 1, 2, 4, 5, 6, 7 and 9, in ``cand`` at places 0-7) and node 6 is
    # reserved, so the same runs and choices: a job of one node takes 7, of two [4, 5],
    # of three [0, 1, 2], of four the first four free nodes, of eight none. Then all of
    # it moved up by 64 (into the second word): the same choices, 64 higher.
    for base in (0, 64):
        nodes = [base + n for n in (0, 1, 2, 4, 5, 6, 7, 9)]
        cand = np.array(nodes, np.int64)
        cpus = np.array([4.0, 4.0, 4.0, 2.0, 3.0, 0.0, 0.5, 1.0])
        words = 2
        cand_bits, blocked_bits = np.zeros(words, np.uint64), np.zeros(words, np.uint64)
        cand_pos = np.full(64 * words, -1, np.int64)
        for place, n in enumerate(nodes):
            cand_bits[n >> 6] |= np.uint64(1) << np.uint64(n & 63)
            cand_pos[n] = place
        blocked_bits[(base + 6) >> 6] |= np.uint64(1) << np.uint64((base + 6) & 63)
        expected = ((1, [7]), (2, [4, 5]), (3, [0, 1, 2]), (4, [0, 1, 2, 4]), (8, None))
        for span, chosen in expected:
            out = np.full(span, -1, np.int64)
            found = fit_compiled._fit_bits(span, cand_bits, blocked_bits, cand_pos, cand, cpus, out, 0)
            assert (out.tolist() if found else None) == (None if chosen is None else [base + n for n in chosen])


def test_bytes_packed_into_bits_by_hand():
    # 0/1 bytes for nodes 0-127: nodes 0, 9, 63, 64 and 127 set. Word 0 gets bits 0, 9
    # and 63; word 1 bits 0 and 63.
    flags = np.zeros(128, np.bool_)
    flags[[0, 9, 63, 64, 127]] = True
    words = np.zeros(2, np.uint64)
    fit_compiled._pack(flags.view(np.uint64), words)
    assert words.tolist() == [1 + 2**9 + 2**63, 1 + 2**63]


@njit_or_skip
def _lowest_bit_compiled(word):
    return fit_compiled._lowest_bit(word)


def test_lowest_bit_compiled_and_as_python():
    # 40 = 0b101000: the lowest set bit is bit 3; 2**63: bit 63.
    for word, bit in ((1, 0), (40, 3), (1 << 63, 63)):
        assert fit_compiled._lowest_bit(word) == bit  # as Python (NUMBA_DISABLE_JIT)
        assert _lowest_bit_compiled(np.uint64(word)) == bit


def test_partition_arrays_by_hand():
    # Two partitions of five nodes: A with weight groups [2, 3] then [0], B with [4, 1].
    # Candidates in B, A, B: their partitions among the two present are 1, 0, 1 (indexes
    # 3 and 5 into the groups list, in order). A's levels: [2, 3], then [0, 2, 3]; node
    # ranks 1, -, 0, 0, - (size + 1 = 6 where not in it). B's: [1, 4], ranks -, 0, -, -, 0.
    a, b = [[2, 3], [0]], [[4, 1]]
    groups = [[], [], [], a, [], b]
    part, (masks, part_lvl, lvl_off, flat, ranks) = partition_arrays(np.array([5, 3, 5]), groups, 5)
    assert part.tolist() == [1, 0, 1]
    assert masks.tolist() == [[True, False, True, True, False], [False, True, False, False, True]]
    assert part_lvl.tolist() == [0, 2, 3]
    assert [flat[lvl_off[i] : lvl_off[i + 1]].tolist() for i in range(3)] == [[2, 3], [0, 2, 3], [1, 4]]
    assert ranks.tolist() == [[1, 6, 0, 0, 6], [6, 0, 6, 6, 0]]
