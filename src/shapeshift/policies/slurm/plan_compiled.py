"""The backfill cycle compiled with numba: ``plan.backfill``'s plan, decision for decision.

With a queue of hundreds or thousands, backfill tests ``bf_max_job_test`` jobs every
cycle and nearly all of a replay's time goes to those tests (docs/slurm.md, Speed).
This module runs the same cycle (``plan.backfill``, ``plan.will_run`` and ``fit.fit``:
the same rules and the same answers, with the floating-point sums made in the same
order) as one compiled call over flat arrays, so a test costs microseconds instead of a
millisecond of numpy calls; the will-run answers come from ``will_run_compiled``.
``plan.backfill`` hands its cycle here when numba is installed (the ``fast`` extra) and
the cycle has no preemption step (a Python callback); otherwise, and under
``SHAPESHIFT_PURE_PYTHON=1``, it runs its own code. Tests run both on random cycles and
require the same starts, reservations and free resources.

Two details keep the answers identical, not merely close. A run's total of free CPUs is
summed as ``numpy.add.reduceat`` sums it (the first value, then numpy's pairwise sum of
the rest: ``fit_compiled._segment_sum``), so ties between runs fall the same way. Each
node's resources after a batch are its free resources plus its entries in end order,
added in the numpy code's order (``add.at``); starts take them as ``Free.take`` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shapeshift.policies.slurm.candidate_rows import WIDTH, CandidateRows, partition_arrays
from shapeshift.policies.slurm.fit import _share
from shapeshift.policies.slurm.fit_compiled import _fit, _fit_bits, _fit_sorted, _pack, _sorted_after, available, njit
from shapeshift.policies.slurm.will_run_compiled import _answer, _by_node, _times
from shapeshift.policies.slurm.window_compiled import _begun_by, _held_over, _later_start

__all__ = ["available", "run"]


if njit is not None:

    @njit(cache=True)
    def _insort(idx, n, keys, item):  # pragma: no cover - compiled
        """Insert ``item`` into ``idx[:n]``, kept in order of ``keys[idx[...]]``, after
        equal keys (``bisect.insort``); ``idx`` has room for it."""
        pos = n
        while pos > 0 and keys[idx[pos - 1]] > keys[item]:
            idx[pos] = idx[pos - 1]
            pos -= 1
        idx[pos] = item

    @njit(cache=True)
    def _cycle(
        now, window, res, max_job_test, epoch, fg, fc, fm,
        e_end, e_first, e_count, order, n_end, p_node, p_gpus, p_cpus, p_mem, n_pairs,
        c_span, c_tg, c_tc, c_tm, c_sg, c_sc, c_sm, c_limit, c_part, c_off,
        part_mask, part_lvl, lvl_off, lvl_idx, part_rank,
        kind, begin_at, end_at, out,
    ):  # pragma: no cover - compiled
        """``plan.backfill`` without a preemption step. Per candidate ``kind`` is 1
        (started on ``out[c_off[i]:]``), 2 (reserved those nodes ``begin_at .. end_at``)
        or 0; returns how many were tested. ``fg``, ``fc``, ``fm`` are updated with the
        starts."""
        size = fg.size
        s = (np.empty(size, np.int64), np.empty(size, np.float64), np.empty(size + 1, np.int64),
             np.empty(size + 1, np.float64))
        fill = np.empty(size, np.int64)  # ``_by_node``'s scratch
        # The nodes a test may not use: outside the job's partition, or reserved over
        # its window (kept as the window slides), so that the scans read one array. A
        # test's first window (from now to now + limit) holds the reservations begun by
        # its end (every reservation ends after now): a node is in one exactly when its
        # earliest begin (``minb``) is by then.
        # As bytes, and as bits where a fit reads them (made then, kept up to date
        # until the next job's test: ``bits_ok``).
        words = (size + 63) // 64
        blocked_pad = np.zeros(words * 64, np.bool_)
        blocked = blocked_pad[:size]
        blocked_bytes = blocked_pad.view(np.uint64)  # eight nodes a word, for ``_pack``
        blocked_bits = np.zeros(words, np.uint64)
        bits_ok = False
        one = np.uint64(1)
        minb = np.full(size, np.inf)
        b_sorted = np.empty(c_span.size, np.int64)  # reservations in begin order
        # Each threshold class's ``_times`` (most jobs share a shape), until a start
        # changes the free resources and the ends.
        classes = 16
        cls_key = np.empty((classes, 3), np.float64)
        cls_t = np.empty((classes, size), np.int64)
        cls_srt = np.empty((classes, size), np.int64)
        cls_n = np.zeros(classes, np.int64)
        cls_now = np.zeros(classes, np.int64)  # nodes meeting them now (srt's first)
        # The nodes meeting them after the batch ending at end position ``cls_last`` (in
        # index order, with their free CPUs then), for choosing nodes after it: jobs of
        # one class mostly wait for one of a few batches, so a few are kept.
        ways = 4
        cls_last = np.full((classes, ways), -2, np.int64)
        cls_next = np.zeros(classes, np.int64)
        cls_cand = np.empty((classes, ways, size), np.int64)
        cls_cpu = np.empty((classes, ways, size), np.float64)
        cls_k = np.zeros((classes, ways), np.int64)
        bits = np.zeros(words, np.uint64)
        cls_bits = np.zeros((classes, ways, words), np.uint64)  # cls_cand as bits
        cls_pos = np.zeros((classes, ways, size), np.int64)  # a node's place in cls_cand
        n_cls = 0
        counts = np.empty(e_end.size + 2, np.int64)
        # Each node's (node, job) pairs in end order, for the node times of a threshold
        # class (``_times``) and choosing nodes after a batch (``_sorted_after``); made
        # when first needed after the ends change.
        by_start = np.empty(size + 1, np.int64)
        by_pair = np.empty(p_node.size, np.int64)
        by_pos = np.empty(p_node.size, np.int64)
        by_ready = False
        q_count = c_span.size
        # Reservations in the order made (candidate index, bounds), in end order, and
        # per node.
        r_cand = np.empty(q_count, np.int64)
        res_begin = np.empty(q_count, np.float64)
        res_end = np.empty(q_count, np.float64)
        r_sorted = np.empty(q_count, np.int64)
        n_res = 0
        head = np.full(size, -1, np.int64)
        s_next = np.empty(out.size, np.int64)
        s_lo = np.empty(out.size, np.float64)
        s_hi = np.empty(out.size, np.float64)
        n_spans = 0
        tested = 0
        for i in range(q_count):
            if tested >= max_job_test:
                break
            tested += 1
            span = c_span[i]
            g = c_part[i]
            usable_part = part_mask[g]
            at = c_off[i]
            limit = c_limit[i]
            start_res = now
            changed = True  # the reserved nodes since the last will-run test (none yet)
            answer = 0.0
            by_end = 0  # reservations (in end order) before this have ended by start_res
            # The partition's nodes meeting the job's thresholds now (free resources
            # change only when a job starts, which ends this job's loop).
            tg, tc, tm = c_tg[i], c_tc[i], c_tm[i]
            ci = -1
            for k in range(n_cls):
                if cls_key[k, 0] == tg and cls_key[k, 1] == tc and cls_key[k, 2] == tm:
                    ci = k
                    break
            if ci < 0:
                if n_cls == classes:
                    n_cls = 0
                ci = n_cls
                n_cls += 1
                cls_key[ci, 0], cls_key[ci, 1], cls_key[ci, 2] = tg, tc, tm
                if not by_ready:
                    by_ready = True
                    _by_node(size, e_first, e_count, order, n_end, p_node, by_start, by_pair, by_pos, fill)
                cls_n[ci] = _times(
                    tg, tc, tm, fg, fc, fm, n_end, by_start, by_pair, by_pos, p_gpus, p_cpus, p_mem,
                    cls_t[ci], cls_srt[ci], counts,
                )
                n_now = 0
                while n_now < cls_n[ci] and cls_t[ci, cls_srt[ci, n_now]] < 0:
                    n_now += 1
                cls_now[ci] = n_now
                cls_last[ci, :] = -2
            t_at, srt, n_srt, n_now = cls_t[ci], cls_srt[ci], cls_n[ci], cls_now[ci]
            first_end = now + limit
            for n in range(size):
                blocked[n] = (minb[n] <= first_end) | (not usable_part[n])
            bits_ok = False
            # Of the partition's nodes meeting them now, those no reservation in the
            # window holds.
            count = 0
            for j in range(n_now):
                count += not blocked[srt[j]]
            # The reservations begun by the first window's end are in it already.
            by_begin = _begun_by(first_end, b_sorted, n_res, res_begin)
            last = -1  # the answer's state: the free resources now (-1) or after that end
            placed = False  # the answer's nodes are in out[at:]
            while start_res <= now + window:
                end = start_res + limit
                # The nodes reserved over start_res .. end (reservations with
                # ``r.end > start_res and r.begin <= end``): start_res and end only grow,
                # so reservations ended by start_res leave and those begun by end join.
                while by_end < n_res and res_end[r_sorted[by_end]] <= start_res:
                    r = r_sorted[by_end]
                    by_end += 1
                    if res_end[r] <= now:  # never in a window
                        continue
                    # Its nodes stay blocked where another reservation over the window
                    # holds them (those joining below included: the same final set), or
                    # outside the job's partition.
                    c = r_cand[r]
                    for q in range(c_off[c], c_off[c] + c_span[c]):
                        n = out[q]
                        if not blocked[n] or not usable_part[n]:
                            continue
                        if not _held_over(n, start_res, end, head, s_next, s_lo, s_hi):
                            blocked[n] = False
                            if bits_ok:
                                blocked_bits[n >> 6] &= ~(one << np.uint64(n & 63))
                            changed = True
                            if t_at[n] < 0:
                                count += 1
                while by_begin < n_res and res_begin[b_sorted[by_begin]] <= end:
                    r = b_sorted[by_begin]
                    by_begin += 1
                    if res_end[r] > start_res:
                        c = r_cand[r]
                        for q in range(c_off[c], c_off[c] + c_span[c]):
                            n = out[q]
                            if not blocked[n]:
                                blocked[n] = True
                                if bits_ok:
                                    blocked_bits[n >> 6] |= one << np.uint64(n & 63)
                                changed = True
                                if t_at[n] < 0:
                                    count -= 1
                later = _later_start(
                    by_end, n_res, r_sorted, res_end, r_cand, c_off, c_span, out, usable_part, head, s_next, s_lo,
                    s_hi,
                )
                # Within one job's iterations only the reserved nodes change (free
                # resources and ends change when a job starts, which ends the loop): the
                # same reserved nodes as the last test give the same answer and nodes.
                if changed:
                    changed = False
                    placed = False
                    if count >= span:
                        answer, last = now, -1
                    else:
                        answer, last = _answer(
                            now, epoch, span, blocked, e_end, e_first, e_count, order, n_end,
                            p_node, t_at, srt, n_srt, n_now, count,
                        )
                start = answer
                if start == -np.inf:
                    if later == -np.inf:
                        break
                    start_res = later
                    continue
                start = max(start, start_res)
                if later != -np.inf and start > later:
                    start_res = later
                    continue
                if start <= now + window and not placed:  # the nodes are needed from here on
                    placed = True
                    if last < 0:
                        found = _fit(
                            span, tg, tc, tm, part_lvl[g], part_lvl[g + 1], lvl_off, lvl_idx, fg, fc, fm, blocked,
                            s, out, at,
                        )
                    else:
                        if not by_ready:
                            by_ready = True
                            _by_node(size, e_first, e_count, order, n_end, p_node, by_start, by_pair, by_pos, fill)
                        way = -1
                        for w in range(ways):
                            if cls_last[ci, w] == last:
                                way = w
                                break
                        if way < 0:
                            way = cls_next[ci]
                            cls_next[ci] = (way + 1) % ways
                            cls_last[ci, way] = last
                            cls_k[ci, way] = _sorted_after(
                                last, t_at, srt, n_srt, fc, by_start, by_pair, by_pos, p_cpus, bits,
                                cls_cand[ci, way], cls_cpu[ci, way], cls_bits[ci, way], cls_pos[ci, way],
                            )
                        if part_lvl[g + 1] - part_lvl[g] == 1:  # one level: read as bits
                            if not bits_ok:
                                bits_ok = True
                                _pack(blocked_bytes, blocked_bits)
                            found = _fit_bits(
                                span, cls_bits[ci, way], blocked_bits, cls_pos[ci, way], cls_cand[ci, way],
                                cls_cpu[ci, way], out, at,
                            )
                        else:
                            found = _fit_sorted(
                                span, part_lvl[g + 1] - part_lvl[g], part_rank[g], cls_cand[ci, way],
                                cls_cpu[ci, way], cls_k[ci, way], blocked, out, at,
                            )
                    assert found, "the thresholds and fit disagree"
                if start <= now:
                    n_cls = 0  # the free resources and the ends change
                    by_ready = False
                    for q in range(at, at + span):
                        n = out[q]
                        fg[n] -= c_sg[i]
                        fc[n] -= c_sc[i]
                        fm[n] -= c_sm[i]
                    kind[i] = 1
                    # The start's end joins the plan, after equal ends (``bisect.insort``).
                    e = n_end
                    e_end[e] = now + limit
                    e_first[e] = n_pairs
                    e_count[e] = span
                    for q in range(span):
                        p_node[n_pairs + q] = out[at + q]
                        p_gpus[n_pairs + q] = c_sg[i]
                        p_cpus[n_pairs + q] = c_sc[i]
                        p_mem[n_pairs + q] = c_sm[i]
                    n_pairs += span
                    _insort(order, n_end, e_end, e)
                    n_end += 1
                    break
                if start > now + window:
                    break
                b0 = math.floor(start / res) * res
                b1 = math.floor((start + limit + res - 1) / res) * res
                if start > start_res:
                    # Whether a reservation over b0 .. b1 holds one of the nodes (each
                    # node's reservations read from its spans).
                    clash = False
                    for q in range(at, at + span):
                        sp = head[out[q]]
                        while sp >= 0:
                            if s_hi[sp] > b0 and s_lo[sp] < b1:
                                clash = True
                                break
                            sp = s_next[sp]
                        if clash:
                            break
                    if clash:
                        start_res = start
                        continue
                kind[i] = 2
                begin_at[i] = b0
                end_at[i] = b1
                r_cand[n_res] = i
                res_begin[n_res] = b0
                res_end[n_res] = b1
                _insort(r_sorted, n_res, res_end, n_res)
                _insort(b_sorted, n_res, res_begin, n_res)
                n_res += 1
                for q in range(at, at + span):
                    n = out[q]
                    s_lo[n_spans] = b0
                    s_hi[n_spans] = b1
                    s_next[n_spans] = head[n]
                    head[n] = n_spans
                    n_spans += 1
                    if b1 > now:
                        minb[n] = min(minb[n], b0)
                break
        return tested


def run(
    now: float,
    queue: Sequence[Any],
    free: Any,
    ends: Any,
    window: float,
    res: float,
    max_job_test: int,
    epoch: float,
    table: tuple[np.ndarray, np.ndarray, list[list[list[int]]]] | None = None,
) -> tuple[int, list[tuple[int, list[int], Any]], Callable[[], list[tuple[int, list[int], float, float]]]]:
    """``plan.backfill``'s cycle (``Candidate``s, ``Free``, the running jobs' ends as
    ``plan.EndArrays``) over flat arrays: the ends with their order by end (room left
    for the cycle's starts), the candidates (``max_job_test`` at most) with their span, per-node
    share, thresholds and limit (``candidate_rows``), and their partitions' cumulative
    node levels (``fit._cumulative``). ``table``: the candidates' rows, partition indexes
    and the node lists those index, as ``CandidateRows`` keeps them (made here when not
    given).
    Returns how many were tested, the starts (candidate index, nodes, per-node share) and
    a function listing the reservations (candidate index, nodes, begin, end), called
    only where they are read; ``free`` is updated."""
    queue = queue[: max(max_job_test, 0)]
    if table is None:
        kept = CandidateRows()
        at = np.array([kept.slot_of(c) for c in queue], np.int64)
        table = (kept.rows[at], kept.part[at], kept.groups)
    rows, part_index, groups = table
    rows, part_index = rows[: len(queue)].reshape(len(queue), WIDTH), part_index[: len(queue)]
    c_span = rows[:, 0].astype(np.int64)
    count, pairs = ends.end.size, ends.node.size
    spare, room = len(queue), pairs + int(c_span.sum())
    e_end = np.zeros(count + spare, np.float64)
    e_end[:count] = ends.end
    e_first = np.zeros(count + spare, np.int64)
    e_first[:count] = ends.first
    e_count = np.zeros(count + spare, np.int64)
    e_count[:count] = ends.count
    # Positions in end order: ties in the listed order (``Endings``' stable sort).
    order = np.arange(count + spare, dtype=np.int64)
    order[:count] = np.argsort(ends.end, kind="stable")
    p_node = np.zeros(room, np.int64)
    p_gpus = np.zeros(room, np.int64)
    p_cpus = np.zeros(room, np.float64)
    p_mem = np.zeros(room, np.float64)
    p_node[:pairs], p_gpus[:pairs], p_cpus[:pairs], p_mem[:pairs] = ends.node, ends.gpus, ends.cpus, ends.mem
    ends = (e_end, e_first, e_count, order, count, p_node, p_gpus, p_cpus, p_mem, pairs)
    size = free.gpus.size
    # The partitions the candidates are in, each once: its node mask and levels.
    c_part, partitions = partition_arrays(part_index, groups, size)
    c_off = np.concatenate(([0], np.cumsum(c_span))).astype(np.int64)
    cands = (
        c_span,
        rows[:, 1].astype(np.int64),
        np.ascontiguousarray(rows[:, 2]),
        np.ascontiguousarray(rows[:, 3]),
        rows[:, 4].astype(np.int64),
        np.ascontiguousarray(rows[:, 5]),
        np.ascontiguousarray(rows[:, 6]),
        np.ascontiguousarray(rows[:, 7]),
        c_part,
        c_off,
    )
    kind = np.zeros(len(queue), np.int64)
    begin_at = np.zeros(len(queue), np.float64)
    end_at = np.zeros(len(queue), np.float64)
    out = np.zeros(int(c_off[-1]), np.int64)
    tested = _cycle(
        float(now), float(window), float(res), int(max_job_test), float(epoch), free.gpus, free.cpus, free.mem,
        *ends, *cands, *partitions, kind, begin_at, end_at, out,
    )
    started = [
        (i, out[c_off[i] : c_off[i + 1]].tolist(), _share(queue[i].need, queue[i].largest)[2])
        for i in np.flatnonzero(kind == 1).tolist()
    ]

    def reserved() -> list[tuple[int, list[int], float, float]]:
        nodes, offsets = out.tolist(), c_off.tolist()
        begins, ends_at = begin_at.tolist(), end_at.tolist()
        return [
            (i, nodes[offsets[i] : offsets[i + 1]], begins[i], ends_at[i]) for i in np.flatnonzero(kind == 2).tolist()
        ]

    return int(tested), started, reserved
