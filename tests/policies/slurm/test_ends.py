"""Planned ends by job: whether one is due, as a pass over them all would answer."""

from __future__ import annotations

import copy
import pickle

from shapeshift.policies.slurm.ends import EndsByJob
from shapeshift.policies.slurm.plan import Ending


def test_due_end_follows_removals_and_replacements():
    ends = EndsByJob()
    ends["a"] = Ending(100.0, ())
    ends["b"] = Ending(50.0, ())
    # b's end (50) is the first: due at 50, not at 49.
    assert not ends.any_by(49) and ends.any_by(50)
    # b finishes: a (100) is the first left.
    ends.pop("b")
    assert not ends.any_by(99) and ends.any_by(100)
    # a is given a later end (a requeued job's new run): its old 100 no longer counts.
    ends["a"] = Ending(200.0, ())
    assert not ends.any_by(150) and ends.any_by(200)
    assert not EndsByJob().any_by(1e18)


def test_a_copy_answers_as_the_original():
    ends = EndsByJob()
    ends["a"] = Ending(10.0, ())
    ends["b"] = Ending(5.0, ())
    del ends["b"]
    for other in (copy.deepcopy(ends), pickle.loads(pickle.dumps(ends))):
        assert dict(other) == {"a": Ending(10.0, ())}
        assert not other.any_by(9) and other.any_by(10)


def test_entry_pool_keeps_each_running_jobs_entries_through_reuse():
    from shapeshift.policies.slurm.fit import Need

    ends = EndsByJob()
    ends.pool = type(ends.pool)(capacity=4)  # small, so slots are reclaimed and arrays grow
    share = {g: Need(g, 4.0 * g, 0.5 * g) for g in (1, 2, 8)}
    live: dict[str, Ending] = {}
    for i in range(60):
        job = f"j{i}"
        # Jobs of 1, 2 or 3 nodes; every third job ends two starts later.
        placement = tuple((i + k, share[(1, 2, 8)[i % 3]]) for k in range(i % 3 + 1))
        ends[job] = live[job] = Ending(float(i), placement)
        if i >= 2 and i % 3 == 2:
            ends.pop(f"j{i - 2}")
            del live[f"j{i - 2}"]
    pool = ends.pool
    assert pool.live == sum(len(e.placement) for e in live.values())
    # The rows: the live jobs' ends, first entries and counts, in the order added.
    end, first, count = pool.live_rows()
    assert end.tolist() == [e.end for e in live.values()]
    assert list(zip(first.tolist(), count.tolist(), strict=True)) == [pool.slot[j] for j in live]
    assert not ends.reordered
    ends["j1"] = Ending(99.0, live["j1"].placement)  # a new end in place: the order is the mapping's no more
    assert ends.reordered
    for job, ending in live.items():
        at, n = pool.slot[job]
        # The slot holds the job's own (node, GPUs, CPUs, memory) entries, in order.
        cut = slice(at, at + n)
        got = list(zip(pool.node[cut], pool.gpus[cut], pool.cpus[cut], pool.mem[cut], strict=True))
        assert got == [(node, r.gpus, r.cpus, r.mem) for node, r in ending.placement]
