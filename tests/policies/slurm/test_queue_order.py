"""The kept priority order (``queue_order.PriorityOrder``) against a full sort.

Keys are (-tier, -priority, submission order). Between recalculations the kept order
must be what ``sorted`` gives for the jobs pending now: departures leave, arrivals go
where their key puts them.
"""

from __future__ import annotations

import random

from shapeshift.policies.slurm.queue_order import PriorityOrder


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
