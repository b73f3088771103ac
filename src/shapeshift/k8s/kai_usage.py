"""KAI-Scheduler's historical usage per queue, kept as running accumulators.

What is computed is ``kai_fairshare.decayed_usage`` of every allocation so far: KAI's
default sliding window (kai-scheduler/KAI-Scheduler v0.17.0-9, commit d5bc503,
pkg/scheduler/cache/usagedb/api/defaults.go: ``windowType`` sliding, ``windowSize`` one
week, no half-life unless one is set) queried as in
pkg/scheduler/cache/usagedb/prometheus/prometheus.go ``querySlidingTimeWindow``: the
allocation over the last ``windowSize``, each instant weighted ``0.5^(age / halfLife)``,
divided by the cluster's capacity over the same window weighted alike.

Why accumulators: summing every past allocation again at each decision costs the whole
history per decision. A queue's allocation is constant between the instants it changes,
so with ``f(d) = 0.5^(d / h)`` its decayed integral up to ``t``,
``D(t) = integral of a(s) f(t - s) ds``, obeys ``D(t1) = D(t0) f(t1 - t0) + a (h / ln 2)
(1 - f(t1 - t0))`` exactly over a stretch of constant allocation ``a`` (``D(t1) = D(t0) +
a (t1 - t0)`` without a half-life). The window's part is then ``D(now) - f(W) D(now - W)``:
a second, trailing accumulator follows the same allocation changes ``W`` seconds behind,
and changes older than that are dropped. The result equals the full re-integration up
to floating-point rounding; a queue with no allocation inside the window gets exactly 0,
as the re-integration gives it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping


class _Integral:
    """``D(t)`` of one queue's allocation: the value at ``at``, and the rate since then."""

    __slots__ = ("at", "rate", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.rate = 0.0
        self.at = -math.inf

    def value_at(self, t: float, half_life_s: float | None) -> float:
        if self.at == -math.inf or t <= self.at:
            return self.value
        span = t - self.at
        if half_life_s is None:
            return self.value + self.rate * span
        keep = 0.5 ** (span / half_life_s)
        return self.value * keep + self.rate * (half_life_s / math.log(2)) * (1.0 - keep)

    def change(self, t: float, delta: float, half_life_s: float | None) -> None:
        self.value = self.value_at(t, half_life_s)
        self.at = t
        self.rate += delta


class UsageAccumulator:
    """Decayed usage per queue within a sliding window, updated as allocations open and
    close (``start``/``stop`` at the instant they do, in time order)."""

    def __init__(self, half_life_s: float | None, window_s: float):
        self.half_life_s = half_life_s
        self.window_s = window_s
        self._now: dict[str, _Integral] = {}
        self._trailing: dict[str, _Integral] = {}
        self._changes: deque[tuple[float, str, float]] = deque()  # not yet seen by the trailing side
        self._last_held: dict[str, float] = {}  # last instant a queue held anything (inf: holds now)
        self._holding: dict[str, float] = {}

    def start(self, queue: str, amount: float, t: float) -> None:
        self._change(queue, amount, t)

    def stop(self, queue: str, amount: float, t: float) -> None:
        self._change(queue, -amount, t)

    def _change(self, queue: str, delta: float, t: float) -> None:
        if delta == 0:
            return
        self._now.setdefault(queue, _Integral()).change(t, delta, self.half_life_s)
        self._changes.append((t, queue, delta))
        held = self._holding.get(queue, 0.0) + delta
        self._holding[queue] = held
        self._last_held[queue] = math.inf if held > 0 else t

    def usage(self, capacity: float, now: float) -> dict[str, float]:
        """Per queue that ever held anything, its usage over the window ending at ``now``
        normalized to ``capacity`` over the window (0 when it held nothing within it)."""
        half, window = self.half_life_s, self.window_s
        start = now - window
        changes = self._changes
        while changes and changes[0][0] <= start:
            t, queue, delta = changes.popleft()
            self._trailing.setdefault(queue, _Integral()).change(t, delta, half)
        if half is None:
            span, behind = window, 1.0
        else:
            span = half / math.log(2) * (1.0 - 0.5 ** (window / half))
            behind = 0.5 ** (window / half)
        out: dict[str, float] = {}
        if capacity <= 0 or span <= 0:
            return out
        for queue, integral in self._now.items():
            if self._last_held[queue] <= start:
                out[queue] = 0.0
                continue
            trailing = self._trailing.get(queue)
            past = trailing.value_at(start, half) if trailing is not None else 0.0
            out[queue] = max(0.0, integral.value_at(now, half) - behind * past) / (capacity * span)
        return out

    def holding(self) -> Mapping[str, float]:
        return self._holding
