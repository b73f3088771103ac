"""The Sia artifact's placement: every round anew, widest first, from a forward cursor."""

from __future__ import annotations

from shapeshift.policies.goodput.sia_placement import cursor_place


def test_a_job_smaller_than_a_node_is_split_where_the_cursor_finds_a_partly_used_node():
    # Three nodes of 4 GPUs; b 4, a 3, c 2, d 2 GPUs (submitted a, b, c, d). Widest first:
    # b takes node 0 whole (cursor -> 1); a takes 3 of node 1 (cursor -> 2); c 2 of node 2
    # (cursor wraps to 0); d finds node 0 full, takes node 1's last GPU and one of node 2:
    # split over two nodes though node 2 alone had room for it.
    placed = cursor_place({"a": 3, "b": 4, "c": 2, "d": 2}, ["a", "b", "c", "d"], {0: 4, 1: 4, 2: 4})
    assert placed == {"b": {0: 4}, "a": {1: 3}, "c": {2: 2}, "d": {1: 1, 2: 1}}


def test_whole_nodes_first_then_the_rest_from_the_next_node_and_equal_counts_in_submission_order():
    # Four nodes of 4 GPUs; p 6, q 4, r 2, s 2, t 0. p takes node 0 whole, then 2 of node 1
    # (cursor -> 2); q takes node 2 whole (cursor -> 3); r (submitted before s) 2 of node 3
    # (cursor wraps to 0); s finds node 0 full and takes node 1's last 2 (cursor -> 2).
    # t asks for nothing and is absent.
    placed = cursor_place({"s": 2, "p": 6, "q": 4, "r": 2, "t": 0}, ["p", "q", "r", "s", "t"], {0: 4, 1: 4, 2: 4, 3: 4})
    assert placed == {"p": {0: 4, 1: 2}, "q": {2: 4}, "r": {3: 2}, "s": {1: 2}}
