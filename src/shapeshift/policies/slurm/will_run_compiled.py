"""The will-run test's answer for the compiled backfill cycle (``plan_compiled``).

``plan.will_run`` gives the running jobs' ends back in batches (epoch-aligned, doubling
windows) until enough nodes meet a job's per-node thresholds. A batch only adds
resources, so a node meets them after a batch exactly when the first end that brings
it to them is in that batch or an earlier one. ``_by_node`` lists each node's entries
in end order; ``_times`` finds that end for every node once per set of thresholds
(each node's entries added in the test's order, so its sums are the ones the test
reaches); ``_answer`` then finds the batch where the job's ``span``-th usable node gets
there, and ``fit_compiled._sorted_after`` chooses nodes after a batch from the same
lists, without giving the ends back.
"""

from __future__ import annotations

import numpy as np

from shapeshift.policies.slurm.fit_compiled import njit

__all__: list[str] = []


if njit is not None:

    @njit(cache=True)
    def _times(
        tg, tc, tm, fg, fc, fm, n_end, by_start, by_pair, by_pos, p_gpus, p_cpus, p_mem, t_at, srt, counts,
    ):  # pragma: no cover - compiled
        """For thresholds ``tg, tc, tm``: each node's ``t_at``, the position (in end
        order) of the end after which its free resources first meet them (-1: they do
        now; ``n_end``: never), and ``srt``, the nodes in order of it (those that never
        do left out); returns how many are in ``srt``. A node's own entries
        (``_by_node``: ``by_start``, ``by_pair``, ``by_pos``, in end order) are added to
        its free resources in the will-run test's order, so its sums are the ones the
        test reaches, until they meet the thresholds.

        A batch of the will-run test only adds resources, so a node meets the
        thresholds after a batch exactly when its ``t_at`` is at or before the batch's
        last end: the test's count after each batch is a count of ``t_at`` values."""
        size = fg.size
        for n in range(size):
            g, c, m = fg[n], fc[n], fm[n]
            if g >= tg and c >= tc and m >= tm:
                t_at[n] = -1
                continue
            t_at[n] = n_end
            for k in range(by_start[n], by_start[n + 1]):
                q = by_pair[k]
                g += p_gpus[q]
                c += p_cpus[q]
                m += p_mem[q]
                if g >= tg and c >= tc and m >= tm:
                    t_at[n] = by_pos[k]
                    break
        # Counting sort by t_at (-1 first); the nodes that never meet them are left out.
        for b in range(n_end + 2):
            counts[b] = 0
        for n in range(size):
            counts[t_at[n] + 1] += 1
        total = 0
        for b in range(n_end + 1):
            c = counts[b]
            counts[b] = total
            total += c
        for n in range(size):
            b = t_at[n] + 1
            if b <= n_end:
                srt[counts[b]] = n
                counts[b] += 1
        return total

    @njit(cache=True)
    def _answer(
        now, epoch, span, blocked, e_end, e_first, e_count, order, n_end, p_node,
        t_at, srt, n_srt, n_now, count,
    ):  # pragma: no cover - compiled
        """``plan.will_run``'s start for a job that does not fit now (``-inf``: none),
        and the position of the last end its batches give back (the fit's state).
        ``blocked``: the nodes the job may not use (outside its partition or reserved).

        The test gives back batches of ends (those with a usable node, ``relevant``):
        the first ends ``WILL_RUN_WINDOW`` after the first relevant end rounded up on
        the wall clock, each later one at a doubled window; its answer is the end of the
        batch after which ``span`` usable nodes meet the thresholds. That count is
        reached at the end ``T`` where the ``span``-th usable node's ``t_at`` falls, so
        the batch is the one whose window first covers ``T``'s end and the start is its
        last relevant end: the same answer, without giving the ends back."""
        r0 = -1
        for pos in range(n_end):
            e = order[pos]
            for q in range(e_first[e], e_first[e] + e_count[e]):
                n = p_node[q]
                if not blocked[n]:
                    r0 = pos
                    break
            if r0 >= 0:
                break
        if r0 < 0:
            return -np.inf, -1
        # The first ``n_now`` in ``srt`` meet the thresholds now; ``count`` of them are
        # usable.
        found = count
        reach = -1
        for j in range(n_now, n_srt):
            n = srt[j]
            if not blocked[n]:
                found += 1
                if found >= span:
                    reach = t_at[n]
                    break
        if found < span:
            return -np.inf, -1
        end = e_end[order[r0]]
        first = end + (30.0 - (end + epoch) % 30.0)
        window = 30.0
        while first + window < e_end[order[reach]]:
            window *= 2.0
        # The last end within the window (ends are in end order), then back to the last
        # relevant one (``reach`` is one).
        lo, hi = reach, n_end
        while lo < hi:
            mid = (lo + hi) // 2
            if e_end[order[mid]] <= first + window:
                lo = mid + 1
            else:
                hi = mid
        last = lo - 1
        while last > reach:
            e = order[last]
            hit = False
            for q in range(e_first[e], e_first[e] + e_count[e]):
                n = p_node[q]
                if not blocked[n]:
                    hit = True
                    break
            if hit:
                break
            last -= 1
        start = e_end[order[last]]
        return (start if start > now else now + 1.0), last

    @njit(cache=True)
    def _by_node(size, e_first, e_count, order, n_end, p_node, by_start, by_pair, by_pos, fill):  # pragma: no cover
        """Each node's (node, job) pairs in end order (a counting sort by node): node
        ``n``'s are ``by_pair[by_start[n]:by_start[n + 1]]``, at end positions
        ``by_pos``."""
        for n in range(size + 1):
            by_start[n] = 0
        for pos in range(n_end):
            e = order[pos]
            for q in range(e_first[e], e_first[e] + e_count[e]):
                by_start[p_node[q] + 1] += 1
        for n in range(size):
            by_start[n + 1] += by_start[n]
            fill[n] = by_start[n]
        for pos in range(n_end):
            e = order[pos]
            for q in range(e_first[e], e_first[e] + e_count[e]):
                n = p_node[q]
                by_pair[fill[n]] = q
                by_pos[fill[n]] = pos
                fill[n] += 1
