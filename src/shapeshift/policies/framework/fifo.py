"""``fifo``: first come, first served.

Jobs start in arrival order and are never preempted. By default the queue head blocks
everyone behind it (strict FIFO, as in Philly and most production schedulers); with
``backfill=true`` later jobs that fit run while the head waits (greedy backfill, with
no reservation for the head, so large jobs can starve behind a stream of small ones).
"""

from __future__ import annotations

from shapeshift.policies.framework.composed import AcceptAll, ComposedPolicy, FifoOrdering
from shapeshift.policies.framework.placement import PLACEMENTS, PlacementName
from shapeshift.policies.framework.registry import PolicyParams, register


class FifoParams(PolicyParams):
    backfill: bool = False
    placement: PlacementName = "consolidated"


@register("fifo", "First come, first served; non-preemptive, head-of-line blocking unless backfill=true.", FifoParams)
def make_fifo(params: FifoParams) -> ComposedPolicy:
    return ComposedPolicy(
        name="fifo",
        admission=AcceptAll(),
        ordering=FifoOrdering(),
        placement=PLACEMENTS[params.placement](),
        head_of_line_blocking=not params.backfill,
    )
