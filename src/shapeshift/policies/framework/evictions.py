"""Running jobs evicted, tentatively, to make room for newcomers in one decision.

A preemptive decision places its newcomers one by one; one that does not fit evicts the
worst-ranked running jobs one at a time, trying again after each, and the victims of a
newcomer that still does not fit are restored at the end. Under a long queue that is
the common case: a newcomer ranks above some running jobs but a lease or fragmentation
keeps it out, and every event repeats the futile evict, try and restore.

Without GPU sharing a try is pointless while it surely fails, and two facts say so
cheaply: the partition has fewer free GPUs than the job needs (a count), or the
placement's own early exit says so from the counts of nodes by free GPUs, with what the
victims would add on their nodes (``placement.SurelyFails``): no node has the GPUs of a
one-node job free, too few nodes are whole for a wider one. So
victims are only counted (``pending``) until a try could succeed, and handed back to the
free resources, in eviction order, just before it: every try sees exactly what it would
have seen with each victim given back at once. Victims still pending at the end were
never needed and stay where they are, as restoring them would have left them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation
from shapeshift.policies.framework.placement import CannotFit


class Evictions:
    """The victims of one partition's placements in one decision (see the module docstring).

    ``cannot_fit``: the decision's placement's ``SurelyFails.cannot_fit`` where it can tell
    a sure failure from the counts of nodes by free GPUs, asked before each try."""

    __slots__ = ("_adjusted", "_cannot_fit", "_changes", "_counted", "_current", "_free", "_given", "_nodes",
                 "_pending", "_pending_on", "_whole_gpus", "free_gpus")

    def __init__(
        self,
        free: FreeResources,
        nodes: np.ndarray,
        current: Mapping[str, Allocation],
        changes: dict[str, Allocation | None],
        whole_gpus: bool,
        cannot_fit: CannotFit | None,
    ):
        self._free = free
        self._nodes = nodes
        self._current = current
        self._changes = changes
        self._whole_gpus = whole_gpus
        self._cannot_fit = cannot_fit if whole_gpus and free.histogram_in(nodes) is not None else None
        #: Free GPUs in the partition with every victim so far given back (without sharing).
        self.free_gpus = free.free_gpus_in(nodes)
        self._given: list[str] = []
        self._pending: list[str] = []
        #: GPUs pending per node, and the partition's nodes per free GPUs with them given
        #: back, for the first ``_counted`` pending victims: brought up to date only when
        #: a try passes the count of free GPUs (``_histogram``), since most victims of a
        #: newcomer that cannot fit are never looked at by node. The free resources do not
        #: change while any victim pends, so counting a victim late counts it the same.
        self._pending_on: dict[int, int] = {}
        self._adjusted: list[int] | None = None
        self._counted = 0

    def evict(self, victim: str) -> None:
        alloc = self._current[victim]
        self.free_gpus += alloc.gpus
        if not self._whole_gpus:
            self._give(victim)
            return
        self._pending.append(victim)

    def ready_for(self, gpus: int) -> bool:
        """Whether placing a job of ``gpus`` GPUs could succeed with every victim so far
        given back; if so, they are given back (the placement is about to be tried)."""
        if self._whole_gpus:
            if self.free_gpus < gpus:
                return False
            if self._cannot_fit is not None and self._cannot_fit(gpus, self._histogram(), self._nodes, self._free):
                return False
        for victim in self._pending:
            self._give(victim)
        self._pending.clear()
        self._pending_on.clear()
        self._adjusted = None
        self._counted = 0
        return True

    def _histogram(self) -> list[int]:
        """Nodes per free GPUs in the partition, with the pending victims given back."""
        pending = self._pending
        if not pending:
            histogram = self._free.histogram_in(self._nodes)
            assert histogram is not None
            return histogram
        adjusted = self._adjusted
        if adjusted is None:
            live = self._free.histogram_in(self._nodes)
            assert live is not None
            adjusted = self._adjusted = live.copy()
        pending_on, free, current = self._pending_on, self._free.gpus, self._current
        for victim in pending[self._counted :]:
            for node, res in current[victim].placement:
                added = pending_on.get(node, 0)
                if res.gpus:
                    before = int(free[node]) + added
                    adjusted[before] -= 1
                    adjusted[before + res.gpus] += 1
                pending_on[node] = added + res.gpus
        self._counted = len(pending)
        return adjusted

    def took(self, alloc: Allocation) -> None:
        """A newcomer took ``alloc`` from the free resources."""
        self.free_gpus -= alloc.gpus

    def free_count(self) -> int:
        """Free GPUs in the partition, victims included, for a waiting reason."""
        return self.free_gpus if self._whole_gpus else self._free.free_gpus_in(self._nodes)

    def restore(self) -> None:
        """Put the victims given back whose allocation is still free back, best-ranked first."""
        free, current, changes = self._free, self._current, self._changes
        for victim in reversed(self._given):
            alloc = current[victim]
            if free.fits(alloc):
                free.take(alloc)
                del changes[victim]

    def _give(self, victim: str) -> None:
        self._free.give(self._current[victim])
        self._changes[victim] = None
        self._given.append(victim)
