"""Undoable GPU moves within one plan-aware decision.

Every change to a job's GPUs goes through ``_move``, which records it, so a tentative
step (growing a job, shrinking victims for it) can be rolled back exactly when it does
not pay off. The working state (``free`` GPUs per node, the jobs ``on_node``, the
``log``) belongs to the scheduler and is rebuilt for every partition decision.
"""

from __future__ import annotations

from shapeshift.policies.planaware.jobs import PlanJob


class Ledger:
    """Mixin of ``PlanAwareScheduler``: the GPU bookkeeping of one decision."""

    free: dict[int, int]
    on_node: dict[int, dict[str, None]]
    log: list[tuple[PlanJob, int, int]]
    jobs: dict[str, PlanJob]

    # ------------------------------------------------------------ moves
    def _move(self, j: PlanJob, node: int, delta: int) -> None:
        """Give ``j`` ``delta`` more GPUs on ``node`` (negative: take them), undoably."""
        self._apply(j, node, delta)
        self.log.append((j, node, delta))

    def _apply(self, j: PlanJob, node: int, delta: int) -> None:
        new = j.nodes.get(node, 0) + delta
        if new:
            j.nodes[node] = new
            self.on_node[node][j.id] = None
        else:
            j.nodes.pop(node, None)
            self.on_node[node].pop(j.id, None)
        self.free[node] -= delta

    def _release(self, j: PlanJob) -> None:
        for n, g in sorted(j.nodes.items()):
            self._move(j, n, -g)

    def _rollback(self, mark: int) -> None:
        while len(self.log) > mark:
            j, node, delta = self.log.pop()
            self._apply(j, node, -delta)

    def _shrink(self, w: PlanJob, node: int) -> None:
        """Take one unit of ``w`` on ``node``; below its minimum, ``w`` is preempted."""
        if w.g - w.unit < w.g_min:
            self._release(w)
        else:
            self._move(w, node, -min(w.unit, w.nodes[node]))

