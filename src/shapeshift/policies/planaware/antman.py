"""``antman``: guaranteed jobs first with exactly what they asked for; best-effort jobs
use idle GPUs opportunistically.

AntMan (Xiao et al., "AntMan: Dynamic Scaling on GPU Clusters for Deep Learning", OSDI
2020), as the multi-tenant baseline of the Rubick paper: guaranteed jobs of tenants with
a GPU quota get exactly their requested resources and plan, in queue order, on the
fewest nodes, preempting best-effort jobs when needed; best-effort jobs run on idle GPUs
with their requested resources and plan, in queue order (backfilling), and never preempt
anyone. AntMan's GPU memory/compute sharing between jobs is not modelled (the engine
allocates whole GPUs).
"""

from __future__ import annotations

from shapeshift.policies.planaware.common import PlanAwareParams
from shapeshift.policies.planaware.core import PlanAwareScheduler, Variant
from shapeshift.policies.registry import register


class AntManParams(PlanAwareParams):
    pass


@register(
    "antman",
    "Guaranteed jobs get their exact request first (preempting best-effort); best-effort use idle GPUs.",
    AntManParams,
)
def make_antman(params: AntManParams) -> PlanAwareScheduler:
    return PlanAwareScheduler(antman_variant(params), params.knowledge())


def antman_variant(params: AntManParams | None = None) -> Variant:
    params = params or AntManParams()
    return Variant(
        name="antman",
        replan=False,
        elastic=False,
        order="fifo",
        steal=False,
        min_res=False,
        cpu_mode="requested",
        restore_penalty=params.restore_penalty,
    )
