"""Reading the compiled backfill cycle's reservations (``plan_compiled``).

The cycle keeps its reservations in begin order and in end order, and each node's
reservations as a list of spans, so that a test reads what it needs without scanning
them all: how many have begun by an instant, and the next instant a reserved node
comes free (``plan.Reservations.later_start``).
"""

from __future__ import annotations

import numpy as np

from shapeshift.policies.slurm.fit_compiled import njit

__all__: list[str] = []


if njit is not None:

    @njit(cache=True)
    def _begun_by(instant, b_sorted, n_res, res_begin):  # pragma: no cover - compiled
        """How many of the ``n_res`` reservations (``b_sorted``: in begin order) begin at
        or before ``instant``."""
        lo, hi = 0, n_res
        while lo < hi:
            mid = (lo + hi) // 2
            if res_begin[b_sorted[mid]] <= instant:
                lo = mid + 1
            else:
                hi = mid
        return lo

    @njit(cache=True, inline="always")
    def _held_over(n, lo, hi, head, s_next, s_lo, s_hi):  # pragma: no cover - compiled
        """Whether a reservation holds node ``n`` over ``lo .. hi`` (one beginning at or
        before ``hi`` and ending after ``lo``; ``lo == hi``: at that instant), read from
        the node's spans."""
        sp = head[n]
        while sp >= 0:
            if s_lo[sp] <= hi and s_hi[sp] > lo:
                return True
            sp = s_next[sp]
        return False

    @njit(cache=True)
    def _later_start(
        ended, n_res, r_sorted, res_end, r_cand, c_off, c_span, out, usable_part, head, s_next, s_lo, s_hi
    ):  # pragma: no cover - compiled
        """``later_start``: the first reservation end after the window's start (the
        reservations in end order, ``r_sorted``, from ``ended``: the first ``ended`` end
        by then) with a usable node that no reservation holds at that instant (each
        node's spans: ``head``, ``s_next``, ``s_lo``, ``s_hi``); ``-inf``: none."""
        for j in range(ended, n_res):
            r = r_sorted[j]
            c = r_cand[r]
            b = res_end[r]
            for q in range(c_off[c], c_off[c] + c_span[c]):
                n = out[q]
                if usable_part[n] and not _held_over(n, b, b, head, s_next, s_lo, s_hi):
                    return b
        return -np.inf
