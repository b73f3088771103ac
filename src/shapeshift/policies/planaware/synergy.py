"""``synergy``: fixed GPUs and plan, FIFO; CPUs by sensitivity (``tune``) or in proportion to
GPUs (``proportional``).

Synergy (Mohan et al., "Looking Beyond GPUs for DNN Scheduling on Multi-Tenant
Clusters", OSDI 2022; simulator msr-fiddle/synergy, ``schedulers/fifo_synergy_new.py``
and ``resources/cluster.py``): jobs keep their requested GPU count and execution plan
and are started in queue order (backfilling, no preemption). Every job gets at least
the GPU-proportional share of its servers' CPUs and memory; ``proportional`` gives
exactly that, ``tune`` gives a CPU-sensitive job up to its demand (the knee of its
sensitivity profile) from the CPUs left on its nodes and brings such jobs back to
proportional when a newcomer needs its share (``synergy_cpus``). A job without a CPU
count gets the proportional share. Host memory is what the plan needs.

Not done: Synergy re-tunes every 300 s round (leases); here CPUs are re-decided at
arrivals and completions, for the jobs whose GPUs change or whose share is reclaimed.
Synergy's CNN/RNN models (ResNet, AlexNet, GNMT, ...) have no CPU-sensitive ground truth
here, so on its own traces only the iteration times differ from ``fifo``.
"""

from __future__ import annotations

from typing import Literal

from shapeshift.policies.planaware.common import PlanAwareParams
from shapeshift.policies.planaware.core import PlanAwareScheduler, Variant
from shapeshift.policies.registry import register


class SynergyParams(PlanAwareParams):
    mode: Literal["tune", "proportional"] = "tune"


@register(
    "synergy",
    "Fixed GPUs and plan, FIFO with backfill; CPUs proportional, more for CPU-sensitive jobs (tune).",
    SynergyParams,
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
