"""The kept priority order (``queue_order.PriorityOrder``) against a full sort, the
fresh jobs a decision places in it, and the static rows a recalculation sorts it by.

Keys are (-tier, -priority, submission order). Between recalculations the kept order
must be what ``sorted`` gives for the jobs pending now: departures leave, arrivals go
where their key puts them.
"""

from __future__ import annotations

import random

from shapeshift.policies.slurm.queue_order import PriorityOrder, TailReasons, fresh_jobs


def test_arrivals_and_departures_by_hand():
    keys = {"a": (-1, -500, 0), "b": (-1, -900, 1), "c": (-2, -10, 2), "d": (-1, -900, 3), "e": (-1, -700, 4)}
    order = PriorityOrder()
    # Tier 2 first (c), then priority 900 (b before d: submitted earlier), then 500 (a).
    assert order.rebuild(["a", "b", "c", "d"], [keys[j] for j in "abcd"]) == ["c", "b", "d", "a"]
    # b starts and leaves; e arrives with priority 700: between d (900) and a (500).
    order.discard("b")
    assert order.update(["a", "c", "d", "e"], keys.__getitem__) == ["c", "d", "e", "a"]
    # c is no longer pending (cancelled): it leaves though nobody discarded it.
    assert order.update(["a", "d", "e"], keys.__getitem__) == ["d", "e", "a"]
    # d leaves undiscarded while f arrives (as many pending as before): f (priority 800)
    # goes before e (700), and d is gone.
    keys["f"] = (-1, -800, 5)
    assert order.update(["a", "e", "f"], keys.__getitem__) == ["f", "e", "a"]
    # g arrives (priority 600) and is placed by ``extend``: the kept jobs are the rest
    # of the 4 pending, so it goes between e (700) and a (500).
    keys["g"] = (-1, -600, 6)
    assert order.extend(["g"], 4, keys.__getitem__, lambda: ["a", "e", "f", "g"]) == ["f", "e", "g", "a"]
    # a left the queue unseen while h (priority 100) arrived: the counts disagree (3 kept
    # + 1 new against 4 pending), so the order is repaired from the whole queue.
    keys["h"] = (-1, -100, 7)
    assert order.extend(["h"], 4, keys.__getitem__, lambda: ["e", "f", "g", "h"]) == ["f", "e", "g", "h"]


def test_kept_order_is_the_full_sort():
    rng = random.Random(7)
    keys: dict[str, tuple[int, int, int]] = {}
    order = PriorityOrder()
    pending: list[str] = []
    for step in range(400):
        for _ in range(rng.randint(0, 3)):
            job = f"j{step}-{len(keys)}"
            keys[job] = (-rng.randint(1, 2), -rng.randint(0, 50), len(keys))
            pending.append(job)
        rng.shuffle(pending)
        for job in pending[: rng.randint(0, 2)]:
            order.discard(job)
            pending.remove(job)
        if not order.valid:
            got = order.rebuild(pending, [keys[j] for j in pending])
        else:
            got = order.update(pending, keys.__getitem__)
        assert got == sorted(pending, key=keys.__getitem__)


def test_fresh_jobs_are_each_partitions_tail():
    """``queue_order.fresh_jobs``: the engine appends submitted and requeued jobs to their
    partition's queue and every decision gives each job that stays a priority, so the
    jobs without one are the tails. Partition "a" holds a1, a2 (with priorities) then a3,
    a4 (new); "b" holds b1 (new) only; "c" nothing new. Expected, in partition then
    queue order: a3, a4, b1."""
    from collections import OrderedDict

    queues = {
        "a": OrderedDict.fromkeys(["a1", "a2", "a3", "a4"]),
        "b": OrderedDict.fromkeys(["b1"]),
        "c": OrderedDict.fromkeys(["c1"]),
    }

    class View:
        partitions = dict.fromkeys(queues)

        @staticmethod
        def pending(part):
            return queues[part].keys()

    prio = {"a1": 5, "a2": 9, "c1": 1, "gone": 3}
    assert fresh_jobs(View(), prio) == ["a3", "a4", "b1"]


def test_static_rows_reuse_a_started_jobs_slot():
    """``clock.StaticRows``: j1 and j2 take slots 0 and 1; j1 starts (dropped), so j3
    takes slot 0 again; j2's row and association are untouched, and the associations are
    numbered in the order first seen (acct-x 0, acct-y 1)."""
    from shapeshift.policies.slurm.clock import StaticRows

    rows = StaticRows()
    rows.add("j1", (10.0, 0.1, 0.0, 0.0, 0.0), "acct-x")
    rows.add("j2", (20.0, 0.2, 0.0, 0.0, 0.0), "acct-y")
    rows.drop("j1")
    rows.add("j3", (30.0, 0.3, 0.0, 0.0, 0.0), "acct-x")
    assert rows.slot == {"j2": 1, "j3": 0}
    assert rows.rows[[1, 0], 0].tolist() == [20.0, 30.0]
    assert rows.assoc[[1, 0]].tolist() == [1, 0] and rows.assoc_names == ["acct-x", "acct-y"]


def test_tail_reasons_read_as_the_dict_written_in_turn():
    # The main scheduler gave "w" (waiting on its begin time) and "a" (the head) their
    # reasons, then stopped: b, c, d wait on priority. Backfill later starts c (its
    # reason dropped) and finds d over a limit. Written in turn, the dict would be
    # w, a, b, d (c popped), d's reason replaced in place.
    given = {"w": "BeginTime", "a": "Resources"}
    changes: dict[str, object] = {}
    reasons = TailReasons(given, ["b", "c", "d"], "Priority", changes)
    given["d"] = "AssocGrpGRES"
    changes["c"] = object()
    assert list(reasons.items()) == [("w", "BeginTime"), ("a", "Resources"), ("b", "Priority"), ("d", "AssocGrpGRES")]
    assert reasons.get("c") is None and reasons["b"] == "Priority" and len(reasons) == 4
