"""``synergy``: fixed GPUs and plan; CPUs and memory by sensitivity (Synergy-Tune) or in
proportion to GPUs.

Synergy (Mohan et al., "Looking Beyond GPUs for DNN Scheduling on Multi-Tenant
Clusters", OSDI 2022): jobs keep their requested GPU count and execution plan and are
started in queue order (backfilling, no preemption); with ``mode=tune`` each job's CPUs
follow its sensitivity to them (a job whose throughput does not depend on CPUs, i.e. any
non-Offload plan under the performance model, gets a small share of 2 CPUs per GPU,
leaving CPUs to jobs that need them), with ``mode=proportional`` every job gets its
requested CPUs (proportional to GPUs). Host memory is what the plan needs.
"""

from __future__ import annotations

from typing import Literal

from shapeshift.policies.planaware.common import PlanAwareParams
from shapeshift.policies.planaware.core import PlanAwareScheduler, Variant
from shapeshift.policies.registry import register


class SynergyParams(PlanAwareParams):
    mode: Literal["tune", "proportional"] = "tune"


@register(
    "synergy", "Fixed GPUs and plan, FIFO with backfill; CPUs by sensitivity (tune) or proportional.", SynergyParams
)
def make_synergy(params: SynergyParams) -> PlanAwareScheduler:
    return PlanAwareScheduler(synergy_variant(params), params.knowledge())


def synergy_variant(params: SynergyParams | None = None) -> Variant:
    params = params or SynergyParams()
    return Variant(
        name="synergy" if params.mode == "tune" else "synergy-proportional",
        replan=False,
        elastic=False,
        order="fifo",
        steal=False,
        min_res=False,
        cpu_mode=params.mode,
        restore_penalty=params.restore_penalty,
    )
