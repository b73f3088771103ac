"""A job spread over more nodes than its GPU count needs, re-packed (``repack``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shapeshift.model import Allocation, Resources
from shapeshift.policies.goodput.common import keep_or_pack
from shapeshift.policies.goodput.pollux import PolluxParams, PolluxPolicy, _Job


def _alloc(place: dict[int, int]) -> Allocation:
    return Allocation(tuple((n, Resources(g)) for n, g in sorted(place.items())))


def test_a_spread_job_keeping_its_count_moves_to_one_node_when_asked():
    # Two nodes of 4 GPUs. Job a keeps 4 GPUs, now 2 + 2 on nodes 0 and 1: more nodes than
    # ceil(4 / 4) = 1. Nothing else runs, so node 0 (best fit, lowest id among equals)
    # holds all four. Asked to re-pack, a moves there; not asked (or without the
    # predicate, the rule before it) it stays where it is.
    wanted = {"a": (4, _alloc({0: 2, 1: 2}))}
    caps = {0: 4, 1: 4}
    assert keep_or_pack(wanted, ["a"], caps, repack=lambda j, now, tight: True) == {"a": {0: 4}}
    assert keep_or_pack(wanted, ["a"], caps, repack=lambda j, now, tight: False) == {"a": {0: 2, 1: 2}}
    assert keep_or_pack(wanted, ["a"], caps) == {"a": {0: 2, 1: 2}}


def test_a_spread_job_stays_when_no_placement_on_fewer_nodes_exists():
    # Job b keeps 3 GPUs on node 0 (packed, kept first); job a keeps 4 on 1 + 3 over nodes 0
    # and 1. Once a is lifted node 0 has 1 free and node 1 has 4: a moves to node 1 alone.
    caps = {0: 4, 1: 4}
    wanted = {"b": (3, _alloc({0: 3})), "a": (4, _alloc({0: 1, 1: 3}))}
    assert keep_or_pack(wanted, ["b", "a"], caps, repack=lambda *_: True) == {"b": {0: 3}, "a": {1: 4}}
    # Three nodes: b keeps 3 on node 0, c 3 on node 1, d 4 on node 2; a keeps 2 on 1 + 1
    # over nodes 0 and 1. Lifted, it leaves 1, 1 and 0 free: no node holds 2, so a stays.
    caps = {0: 4, 1: 4, 2: 4}
    wanted = {
        "b": (3, _alloc({0: 3})),
        "c": (3, _alloc({1: 3})),
        "d": (4, _alloc({2: 4})),
        "a": (2, _alloc({0: 1, 1: 1})),
    }
    placed = keep_or_pack(wanted, ["b", "c", "d", "a"], caps, repack=lambda *_: True)
    assert placed["a"] == {0: 1, 1: 1}


@dataclass
class _Table:
    good: np.ndarray
    params: object = "fitted"

    def by_shape(self, gpn, max_r, max_nodes):  # type: ignore[no-untyped-def]
        return self.good[: max_nodes + 1]


def test_a_move_must_beat_the_restart_factor():
    # 4 GPUs: goodput 10 on one node, 8 on two. With restart factor 0.9 the move is worth
    # 10 x 0.9 = 9 > 8: it moves; with 0.75, 7.5 < 8: it stays. Before its first run (no
    # model of its own: linear speedup, the same on any node count) it never moves.
    good = np.zeros((3, 5))
    good[1, 4], good[2, 4] = 10.0, 8.0
    current = _alloc({0: 2, 1: 2})
    for factor, moves in ((0.9, True), (0.75, False)):
        better = PolluxPolicy._repack([_Job("a", _Table(good), current, 4, factor)], 4)
        assert better("a", 2, 1) is moves
    better = PolluxPolicy._repack([_Job("a", _Table(good, None), current, 4, 0.9)], 4)
    assert better("a", 2, 1) is False


def test_repacking_is_the_default():
    assert PolluxParams().repack is True
