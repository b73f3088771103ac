"""Step 2 of a plan-aware decision: best-effort and running jobs, visited by slope.

A visiting job takes free GPUs and, when stealing is on, shrinks the least sensitive job
on a node one unit at a time while the victim loses less than the visitor gains. Growth
follows the job's sensitivity curve; ``_settle`` keeps only the GPUs its best plan can
use. Running elastic jobs grow only when the finish-time gain pays the restart pause.
"""

from __future__ import annotations

import math

from shapeshift.perf.arch import get_arch
from shapeshift.perf.plans import packed_placement
from shapeshift.policies.planaware.guarantee import Guarantee
from shapeshift.policies.planaware.jobs import PlanJob


class Growth(Guarantee):
    """Mixin of ``PlanAwareScheduler``: slopes, stealing, growing and settling jobs."""

    now: float
    _gpn_now: int

    # ------------------------------------------------------------ slopes
    def _gain(self, j: PlanJob) -> tuple[float, int]:
        """(throughput gain per GPU, target GPU count) of growing ``j``: the slope of its
        sensitivity curve (Rubick Sec. 5), throughput scaled by ``j.slope_scale``."""
        g, c = j.g, j.curve
        if g < j.g_min:
            # Below its minimum a job cannot run: it gains all of c[g_min], not the step from
            # c[g] (the monotone curve may already plateau below g_min, which read as "no
            # gain" stranded such jobs part-grown forever).
            h = j.g_min
            return c[h] / (h - g) / j.slope_scale, h
        best, target = 0.0, g
        h = g + j.unit
        while h <= min(j.g_max, g + 8 * j.unit) and h < len(c):
            s = (c[h] - c[g]) / (h - g)
            if s > best * (1 + 1e-9):
                best, target = s, h
            h += j.unit
        return best / j.slope_scale, target

    def _cpu_gain(self, j: PlanJob) -> float:
        """Throughput gain per extra CPU thread per GPU at the job's GPU count (or minimum):
        the tie-break of the slope order (Rubick Sec. 5: GPU slope, then CPU slope)."""
        g = max(j.g, j.g_min, 1)
        if g >= len(j.curve):
            return 0.0
        place = packed_placement(g, self._gpn_now)
        cpus = self._job_cpus(j, g)
        kn = self.knowledge
        now, more = kn.best(j.spec.model, place, cpus, j.space), kn.best(j.spec.model, place, cpus + g, j.space)
        if now is None or more is None:
            return 0.0
        return max(0.0, more.throughput - now.throughput) / g / j.slope_scale

    def _loss(self, j: PlanJob) -> float:
        """Scaled throughput lost per GPU when ``j`` gives up one unit."""
        g, c = j.g, j.curve
        if j.protected and g - j.unit < j.g_min:
            return math.inf  # a protected job is never taken below its minRes
        if g - j.unit < j.g_min:
            return c[g] / j.slope_scale  # the whole job (it would be preempted)
        return (c[g] - c[g - j.unit]) / j.unit / j.slope_scale

    # ------------------------------------------------------------ best effort
    def _host_misfit(self, j: PlanJob, n: int, gpus: int) -> bool:
        """Whether ``j``'s host demand on ``gpus`` GPUs of node ``n`` does not fit there;
        only Synergy's ``tune`` places by it (``SynergyCpus``)."""
        return False

    def _node_order(self, j: PlanJob, nodes: list[int], need: int) -> list[int]:
        mine = sorted(j.nodes, key=lambda n: (-j.nodes[n], n))
        rest = [n for n in nodes if n not in j.nodes]
        if not mine and need <= max(self.free[n] for n in nodes):
            # best fit for a job that fits on one node: keep emptier nodes whole
            fit = [n for n in rest if self.free[n] >= need]
            fit.sort(key=lambda n: (self._host_misfit(j, n, need), self.free[n], n))
            return fit + sorted((n for n in rest if self.free[n] < need), key=lambda n: (-self.free[n], n))
        return mine + sorted(rest, key=lambda n: (-self.free[n], n))

    def _take_unit(self, j: PlanJob, nodes: list[int], gain: float, steal: bool, need: int) -> bool:
        order = self._node_order(j, nodes, need)
        for n in order:
            if self.free[n] >= j.unit:
                self._move(j, n, j.unit)
                return True
        if not steal:
            return False
        margin = 1 + self.variant.steal_margin
        for n in order:
            mark = len(self.log)
            lost = 0.0
            while self.free[n] < j.unit:
                victims = [self.jobs[i] for i in self.on_node[n] if i != j.id and self._shrinkable(self.jobs[i])]
                if not victims:
                    break
                w = min(victims, key=lambda w: (self._loss(w), -w.order))
                loss = self._loss(w) * (w.g if w.g - w.unit < w.g_min else w.unit)
                if (lost + loss) * margin >= gain * j.unit:
                    break
                lost += loss
                self._shrink(w, n)
            if self.free[n] >= j.unit:
                self._move(j, n, j.unit)
                return True
            self._rollback(mark)
        return False

    def _grow(self, j: PlanJob, nodes: list[int], gpn: int, steal: bool) -> bool:
        """Grow a waiting job to at least its minimum; roll back when it cannot get there."""
        mark = len(self.log)
        while j.g < j.g_max:
            gain, target = self._gain(j)
            if gain <= 0 or target <= j.g:
                break
            if not self._take_unit(j, nodes, gain, steal and (self.variant.elastic or j.g < j.g_min), target - j.g):
                break
        if j.g < j.g_min or j.g == 0:
            self._rollback(mark)
            return False
        return True

    def _settle(self, j: PlanJob, mark: int) -> bool:
        """Keep only the GPUs ``j``'s best plan can use, or undo its growth when no plan fits.

        Growth follows the packed-placement curve, but the GPUs a job actually gets may be
        spread so that no plan fits (host memory, TP inside a node) or the best plan uses
        fewer of them. Settling here, not when plans are materialised, returns those GPUs
        while later visitors can still take them; otherwise they sat idle until the next
        decision while jobs behind were told nothing was free.
        """
        if not j.nodes or self.knowledge.knowledge(j.spec.model) is None:
            return True
        choice, place = self._choose_plan(j)
        if choice is None:
            self._rollback(mark)
            return False
        for n in sorted(j.nodes):
            extra = j.nodes[n] - place.get(n, 0)
            if extra > 0:
                self._move(j, n, -extra)
        return self._fits_memory(j, mark, choice)

    def _grow_running(self, j: PlanJob, nodes: list[int], gpn: int) -> None:
        """Grow a running elastic job when its predicted finish time improves enough."""
        mark = len(self.log)
        before = j.curve[j.g]
        self._grow(j, nodes, gpn, steal=self.variant.steal)
        after = j.curve[j.g]
        if j.g != sum(r.gpus for _, r in j.status.allocation.placement) and not self._worth(j, before, after):
            self._rollback(mark)

    def _worth(self, j: PlanJob, before: float, after: float) -> bool:
        if before <= 0 or after <= before:
            return False
        remaining = j.status.remaining_at(self.now)
        arch_batch = self._batch(j)
        t_old = remaining * arch_batch / before
        t_new = self.variant.restore_penalty + remaining * arch_batch / after
        return t_new < t_old * (1 - self.variant.min_gain)

    def _batch(self, j: PlanJob) -> float:
        try:
            return float(get_arch(j.spec.model).global_batch)
        except KeyError:
            return 1.0

