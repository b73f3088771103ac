"""One partition's decision as a named result, and the loop that gathers them.

Most policies decide each partition that changed on its own: they place or stop jobs
there and say why the others wait. Each such step returns a ``PartitionDecision``; a
policy's ``decide`` hands a function of the partition to ``decide_partitions``, which
visits the changed partitions in name order and gathers their results into one
``Schedule``. The visiting order is fixed so that the schedule, and therefore every run,
is the same from one run to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shapeshift.model import Allocation, Schedule

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView


@dataclass(frozen=True, slots=True)
class PartitionDecision:
    """What one step decided for one partition.

    ``changes``: job id -> its new allocation (``None``: stop it), in the order decided;
    ``reasons``: job id -> why it waits. A job absent from both keeps what it has."""

    changes: Mapping[str, Allocation | None] = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)

    def then(self, later: PartitionDecision) -> PartitionDecision:
        """This decision followed by ``later`` (``later`` wins for a job both name; a job
        keeps the place it was first named at)."""
        if not later.changes and not later.reasons:
            return self
        return PartitionDecision({**self.changes, **later.changes}, {**self.reasons, **later.reasons})


#: A step that decided nothing.
NOTHING = PartitionDecision()


def decide_partitions(
    view: ClusterView,
    decide: Callable[[str], PartitionDecision],
    default_reason: str,
    wake_at: Callable[[], float | None] | None = None,
) -> Schedule:
    """``decide`` every changed partition, in name order, and gather the results into a
    ``Schedule`` (``default_reason`` for jobs no step gave a reason; ``wake_at``, read after
    the last step, for when to decide again)."""
    dirty = view.dirty_partitions
    if len(dirty) == 1:
        # One partition (most decisions): its result is the schedule's, uncopied.
        (partition,) = dirty
        decision = decide(partition)
        changes, reasons = (decision.changes, decision.reasons) if decision is not NOTHING else ({}, {})
    else:
        changes, reasons = {}, {}
        for partition in sorted(dirty):
            decision = decide(partition)
            if decision.changes:
                changes.update(decision.changes)
            if decision.reasons:
                reasons.update(decision.reasons)
    wake = wake_at() if wake_at is not None else None
    return Schedule(view.allocations, changes, reasons, default_reason, wake)
