"""``fit``'s node choice compiled with numba, for the compiled backfill cycle.

``fit.fit`` (``select/cons_tres``'s choice among the nodes that could host a job) as
``plan_compiled``'s will-run tests call it: the same runs of consecutive usable nodes,
the same totals and the same first-of-equals choices. A run's total of free CPUs is
summed as ``numpy.add.reduceat`` sums it (the first value, then numpy's pairwise sum of
the rest: ``_segment_sum``), so ties between runs fall the same way to the last bit.
"""

from __future__ import annotations

import numpy as np

from shapeshift.policies.slurm.compiled import available
from shapeshift.policies.slurm.fit import Free, Need, _cumulative, _share

try:  # the ``fast`` extra
    from numba import njit
    from numba.cpython.unsafe.numbers import trailing_zeros
    from numba.extending import overload
except ImportError:  # pragma: no cover - exercised where numba is absent
    njit = None

__all__ = ["available", "fit_now", "njit"]


def _lowest_bit(word: int) -> int:
    """The index of the lowest set bit of ``word`` (not 0): the compiled code's
    ``trailing_zeros``, here for the cycle run as Python (``NUMBA_DISABLE_JIT``)."""
    w = int(word)
    return (w & -w).bit_length() - 1


if njit is not None:

    @overload(_lowest_bit)
    def _lowest_bit_compiled(word):  # pragma: no cover - compiled
        return lambda word: trailing_zeros(word)

    @njit(cache=True)
    def _pairwise(a, lo, n):  # pragma: no cover - compiled
        """numpy's pairwise sum of ``a[lo:lo + n]`` (``pairwise_sum`` in
        ``numpy/_core/src/umath/loops_utils.h.src``): plainly below 8 values, eight
        running sums up to 128, halves (at a multiple of 8) above."""
        if n < 8:
            res = 0.0
            for i in range(n):
                res += a[lo + i]
            return res
        if n <= 128:
            r0 = a[lo]
            r1 = a[lo + 1]
            r2 = a[lo + 2]
            r3 = a[lo + 3]
            r4 = a[lo + 4]
            r5 = a[lo + 5]
            r6 = a[lo + 6]
            r7 = a[lo + 7]
            i = 8
            stop = n - n % 8
            while i < stop:
                r0 += a[lo + i]
                r1 += a[lo + i + 1]
                r2 += a[lo + i + 2]
                r3 += a[lo + i + 3]
                r4 += a[lo + i + 4]
                r5 += a[lo + i + 5]
                r6 += a[lo + i + 6]
                r7 += a[lo + i + 7]
                i += 8
            res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
            while i < n:
                res += a[lo + i]
                i += 1
            return res
        n2 = n // 2
        n2 -= n2 % 8
        return _pairwise(a, lo, n2) + _pairwise(a, lo + n2, n - n2)

    @njit(cache=True)
    def _segment_sum(a, lo, hi):  # pragma: no cover - compiled
        """``numpy.add.reduceat``'s value for ``a[lo:hi]``: the first value plus the
        pairwise sum of the others (under 8 others, ``_pairwise``'s plain loop here: most
        runs are short, and a call into the recursive sum costs more than the sum)."""
        n = hi - lo - 1
        if n < 8:
            res = 0.0
            for i in range(n):
                res += a[lo + 1 + i]
            return a[lo] + res
        return a[lo] + _pairwise(a, lo + 1, n)

    @njit(cache=True)
    def _best_run(span, tg, tc, tm, ids, fg, fc, fm, blocked, u, uc, starts, totals, out, at):  # pragma: no cover
        """``fit._best_run`` over one cumulative level ``ids``: writes ``span`` nodes to
        ``out[at:]`` and returns True, or False. ``u``, ``uc``, ``starts``, ``totals``:
        scratch arrays of the node count's size."""
        m = 0
        for j in range(ids.size):
            n = ids[j]
            if fg[n] >= tg and fc[n] >= tc and fm[n] >= tm and not blocked[n]:
                u[m] = n
                uc[m] = fc[n]
                m += 1
        return _choose(span, m, u, uc, starts, totals, out, at)

    @njit(cache=True)
    def _sorted_after(
        last, t_at, srt, n_srt, fc, by_start, by_pair, by_pos, p_cpus, bits, cand, cand_cpu, cand_bits, cand_pos
    ):  # pragma: no cover - compiled
        """The nodes whose free resources meet the thresholds once the plan's ends up to
        position ``last`` are given back, in index order, into ``cand`` (returns how
        many), with their free CPUs then into ``cand_cpu``; without giving the ends back.
        A node meets them then exactly when its ``t_at`` is at most ``last``: they are
        the first of ``srt`` (the nodes in order of ``t_at``), put in index order through
        the bitmap ``bits`` (zero before and after). A node's free CPUs are its own
        entries (``by_start``, ``by_pair``, ``by_pos``: each node's (node, job) pairs in
        end order) added to ``fc`` in the order the test gives them back. The same nodes
        as bits into ``cand_bits``, and each one's place in ``cand`` into ``cand_pos``
        (``_fit_bits`` reads them)."""
        one = np.uint64(1)
        for j in range(n_srt):
            n = srt[j]
            if t_at[n] > last:
                break
            bits[n >> 6] |= one << np.uint64(n & 63)
        k = 0
        for w in range(bits.size):
            word = bits[w]
            bits[w] = 0
            cand_bits[w] = word
            while word != 0:
                n = w * 64 + _lowest_bit(word)
                word &= word - one
                c = fc[n]
                for q in range(by_start[n], by_start[n + 1]):
                    if by_pos[q] > last:
                        break
                    c += p_cpus[by_pair[q]]
                cand[k] = n
                cand_cpu[k] = c
                cand_pos[n] = k
                k += 1
        return k

    @njit(cache=True)
    def _choose(span, m, u, uc, starts, totals, out, at):  # pragma: no cover - compiled
        """``fit._best_run``'s choice among the ``m`` nodes ``u`` that can host a share
        (their free CPUs ``uc``): the runs of consecutive nodes and their totals."""
        if m < span:
            return False
        runs = 1
        starts[0] = 0
        for j in range(1, m):
            if u[j] - u[j - 1] != 1:
                starts[runs] = j
                runs += 1
        if runs == 1:
            if span == 1:
                best = 0
                for j in range(1, m):
                    if uc[j] < uc[best]:
                        best = j
                out[at] = u[best]
            else:
                for j in range(span):
                    out[at + j] = u[j]
            return True
        if span == 1:
            for r in range(runs):
                hi = starts[r + 1] if r + 1 < runs else m
                totals[r] = _segment_sum(uc, starts[r], hi)
            best = 0
            for r in range(1, runs):
                if totals[r] < totals[best]:
                    best = r
            lo = starts[best]
            hi = starts[best + 1] if best + 1 < runs else m
            pick = lo
            for j in range(lo + 1, hi):
                if uc[j] < uc[pick]:
                    pick = j
            out[at] = u[pick]
            return True
        # Only the runs long enough for the job are compared (their totals summed).
        best = -1
        for r in range(runs):
            hi = starts[r + 1] if r + 1 < runs else m
            if hi - starts[r] >= span:
                totals[r] = _segment_sum(uc, starts[r], hi)
                if best < 0 or totals[r] < totals[best]:
                    best = r
        first = 0 if best < 0 else starts[best]
        for j in range(span):
            out[at + j] = u[first + j]
        return True

    @njit(cache=True)
    def _fit(span, tg, tc, tm, lvl_lo, lvl_hi, lvl_off, lvl_idx, fg, fc, fm, blocked, s, out, at):  # pragma: no cover
        """``fit.fit``: the partition's cumulative levels ``lvl_lo .. lvl_hi - 1`` in turn."""
        u, uc, starts, totals = s
        for lvl in range(lvl_lo, lvl_hi):
            ids = lvl_idx[lvl_off[lvl] : lvl_off[lvl + 1]]
            if _best_run(span, tg, tc, tm, ids, fg, fc, fm, blocked, u, uc, starts, totals, out, at):
                return True
        return False

    @njit(cache=True, inline="always")
    def _better_run(span, lo, hi, cand_cpu, best_lo, best_hi, best_total):  # pragma: no cover - compiled
        """The best run so far (``cand[best_lo:best_hi]``, its free CPUs ``best_total``;
        none: ``best_lo`` -1) against the run ``cand[lo:hi]`` that just ended: a run the
        job fits in (``span`` nodes) with fewer free CPUs in all replaces it (the earlier
        one stays on a tie)."""
        if lo >= 0 and hi - lo >= span:
            total = _segment_sum(cand_cpu, lo, hi)
            if best_lo < 0 or total < best_total:
                return lo, hi, total
        return best_lo, best_hi, best_total

    @njit(cache=True, inline="always")
    def _take_run(span, best_lo, best_hi, cand, cand_cpu, out, at):  # pragma: no cover - compiled
        """The job's nodes from the best run ``cand[best_lo:best_hi]`` into ``out[at:]``:
        one node, the run's with the fewest free CPUs; more, the run's first. Without a
        run (``best_lo`` -1) the level's first free nodes, already in ``out``, stay."""
        if best_lo < 0:
            return
        if span == 1:
            pick = best_lo
            for j in range(best_lo + 1, best_hi):
                if cand_cpu[j] < cand_cpu[pick]:
                    pick = j
            out[at] = cand[pick]
        else:
            for j in range(span):
                out[at + j] = cand[best_lo + j]

    @njit(cache=True)
    def _fit_sorted(span, levels, rank, cand, cand_cpu, n_cand, blocked, out, at):  # pragma: no cover - compiled
        """``_fit`` over the nodes ``cand[:n_cand]`` (``_sorted_after``: those meeting the
        thresholds after a batch, in index order, with their free CPUs then), through
        the partition's ``levels`` cumulative levels (a node is in level ``k`` when its
        ``rank``, the first level holding it, is at most ``k``): ``_choose``'s choice
        among a level's unblocked nodes, in one pass. A run of consecutive nodes there is
        a slice of ``cand`` (a node left out between two kept ones lies between them by
        index), so a run's total is summed in place, and only for runs the job fits in."""
        for level in range(levels):
            m = 0  # the level's unblocked nodes so far (the first ``span`` go to ``out``)
            prev = -2  # the last of them
            lo = -1  # the current run: cand[lo:hi]
            hi = -1
            best_lo = -1  # the best run so far: cand[best_lo:best_hi], its total
            best_hi = -1
            best_total = 0.0
            for j in range(n_cand + 1):
                n = -2
                if j < n_cand:
                    n = cand[j]
                    if rank[n] > level or blocked[n]:
                        continue
                if n != prev + 1 or j == n_cand:  # the run cand[lo:hi] ends
                    best_lo, best_hi, best_total = _better_run(span, lo, hi, cand_cpu, best_lo, best_hi, best_total)
                    lo = j
                if j == n_cand:
                    break
                if m < span:
                    out[at + m] = n
                m += 1
                prev = n
                hi = j + 1
            if m < span:
                continue
            _take_run(span, best_lo, best_hi, cand, cand_cpu, out, at)
            return True
        return False

    @njit(cache=True)
    def _pack(bytes8, words):  # pragma: no cover - compiled
        """Bit ``k`` of ``words[w]``: byte ``64 w + k`` of a 0/1 byte array read eight bytes
        at a time (``bytes8``, its ``uint64`` view); one multiply gathers eight bytes' low
        bits into the top byte."""
        magic = np.uint64(0x0102040810204080)
        shift = np.uint64(56)
        for w in range(words.size):
            word = np.uint64(0)
            for k in range(8):
                word |= ((bytes8[w * 8 + k] * magic) >> shift) << np.uint64(8 * k)
            words[w] = word

    @njit(cache=True)
    def _fit_bits(span, cand_bits, blocked_bits, cand_pos, cand, cand_cpu, out, at):  # pragma: no cover - compiled
        """``_fit_sorted`` for a partition of one level, reading bits: its unblocked nodes
        are the set bits of ``cand_bits & ~blocked_bits`` (``_sorted_after``'s nodes, the
        blocked ones as bits), visited in index order without reading the blocked ones;
        ``cand_pos`` gives a node's place in ``cand``, so the runs, their totals and the
        choice are ``_fit_sorted``'s."""
        one = np.uint64(1)
        m = 0  # the unblocked nodes so far (the first ``span`` go to ``out``)
        prev = -2  # the last of them
        lo = -1  # the current run: cand[lo:hi]
        hi = -1
        best_lo = -1  # the best run so far: cand[best_lo:best_hi], its total
        best_hi = -1
        best_total = 0.0
        for w in range(cand_bits.size):
            word = cand_bits[w] & ~blocked_bits[w]
            while word != 0:
                n = w * 64 + _lowest_bit(word)
                word &= word - one
                if n != prev + 1:  # the run cand[lo:hi] ends
                    best_lo, best_hi, best_total = _better_run(span, lo, hi, cand_cpu, best_lo, best_hi, best_total)
                    lo = cand_pos[n]
                if m < span:
                    out[at + m] = n
                m += 1
                prev = n
                hi = cand_pos[n] + 1
        best_lo, best_hi, best_total = _better_run(span, lo, hi, cand_cpu, best_lo, best_hi, best_total)  # the last
        if m < span:
            return False
        _take_run(span, best_lo, best_hi, cand, cand_cpu, out, at)
        return True


#: Per groups list (by identity, the list kept to tell a reused identity apart): its
#: cumulative levels flattened for ``_fit`` (offsets, node indexes).
_LEVELS: dict[int, tuple[list[list[int]], np.ndarray, np.ndarray]] = {}
#: Per node count: ``_fit``'s scratch arrays, an all-false exclusion mask and its output.
_SCRATCH: dict[int, tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]] = {}


def fit_now(need: Need, groups: list[list[int]], free: Free, largest: int) -> list[tuple[int, Need]] | None:
    """``fit.fit`` without exclusions, compiled: the same nodes (the compiled backfill
    cycle's fit, which its random-cycle tests hold to ``fit``), for the main scheduler's
    test of the queue's head at every decision."""
    hit = _LEVELS.get(id(groups))
    if hit is None or hit[0] is not groups:
        levels = [idx for idx, _ in _cumulative(groups)]
        offsets = np.concatenate(([0], np.cumsum([lvl.size for lvl in levels]))).astype(np.int64)
        flat = np.concatenate(levels).astype(np.int64) if levels else np.zeros(0, np.int64)
        if len(_LEVELS) >= 256:
            _LEVELS.clear()
        hit = _LEVELS[id(groups)] = (groups, offsets, flat)
    _, offsets, flat = hit
    size = free.gpus.size
    scratch = _SCRATCH.get(size)
    if scratch is None:
        s = (np.empty(size, np.int64), np.empty(size, np.float64), np.empty(size + 1, np.int64),
             np.empty(size + 1, np.float64))  # fmt: skip
        scratch = _SCRATCH[size] = (s, np.zeros(size, np.bool_), np.empty(size, np.int64))
    s, blocked, out = scratch
    _, span, share, (tg, tc, tm) = _share(need, largest)
    found = _fit(
        span, int(tg), float(tc), float(tm), 0, offsets.size - 1, offsets, flat,
        free.gpus, free.cpus, free.mem, blocked, s, out, 0,
    )  # fmt: skip
    return [(node, share) for node in out[:span].tolist()] if found else None
