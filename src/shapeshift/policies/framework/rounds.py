"""The decision skeleton shared by round-based policies (Gavel, Optimus).

These policies re-plan every partition when the round timer fires (leases, fair
shares, resizes) and, between rounds, only start waiting jobs on GPUs that are free,
so an arrival never waits a whole round for an idle GPU. Subclasses supply the two
halves, each returning a ``PartitionDecision``; the loop, the scratch resources and the
schedule are written once here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapeshift.engine.state import FreeResources
from shapeshift.model import Schedule
from shapeshift.policies.framework.base import ARRIVAL, COMPLETION, ROUND
from shapeshift.policies.framework.decisions import NOTHING, PartitionDecision, decide_partitions

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


class RoundOrFillPolicy:
    name: str
    #: Why a job the policy did not look at waits.
    waiting_reason = "waiting for the next round"

    def __init__(self, round_seconds: float):
        self.triggers = frozenset({ARRIVAL, COMPLETION, ROUND})
        self.default_round: float | None = round_seconds

    def decide(self, view: ClusterView) -> Schedule:
        self.before_decision(view)
        free = view.scratch()

        def decide_partition(partition: str) -> PartitionDecision:
            if view.timer_fired:
                return self.plan_round(view, partition, free)
            if view.pending_count(partition):
                return self.fill_free(view, partition, free)
            return NOTHING

        return decide_partitions(view, decide_partition, self.waiting_reason)

    def before_decision(self, view: ClusterView) -> None:
        """Hook run before every decision (e.g. to account service received so far)."""

    def plan_round(self, view: ClusterView, partition: str, free: FreeResources) -> PartitionDecision:
        """Re-plan ``partition`` from scratch (the round timer fired), taking what it
        places from ``free``."""
        raise NotImplementedError

    def fill_free(self, view: ClusterView, partition: str, free: FreeResources) -> PartitionDecision:
        """Start waiting jobs of ``partition`` on free GPUs only (between rounds), taking
        them from ``free``."""
        raise NotImplementedError
