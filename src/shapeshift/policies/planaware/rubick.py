"""``rubick``: plan-aware reconfigurable scheduling with multi-tenant guarantees, and its
ablations ``rubick-e``, ``rubick-r``, ``rubick-n``.

Rubick (Zhang et al., "Rubick: Exploiting Job Reconfigurability for Deep Learning Cluster
Scheduling", MLSys 2025 / arXiv 2408.08586), Algorithm 1, on every arrival and completion:

1. queued guaranteed jobs whose ``minRes`` fits their tenant's remaining quota are placed
   (``minRes``: the fewest resources, with the best plan for them, predicted to reach the
   throughput of the requested resources and plan; never more than requested);
2. best-effort and running jobs are visited in descending sensitivity-curve slope (GPU
   slope, ties by CPU slope); each takes free GPUs/CPUs and shrinks the least sensitive
   job on a node that is above its own minRes, one unit at a time, when that job's slope
   is lower; a job shrunk to nothing is preempted;
3. the best plan for the found placement is chosen from the curves and host memory is
   allocated for it.

Variants (the paper's ablation, Sec. 6): ``rubick-e`` reconfigures plans but keeps the
requested resources; ``rubick-r`` resizes resources but keeps the requested plan (3D
jobs scale only DP); ``rubick-n`` does neither (the same skeleton, fixed plans and
resources). The skeleton lives in :mod:`shapeshift.policies.planaware.core`.
"""

from __future__ import annotations

from pydantic import Field

from shapeshift.policies.planaware.common import PlanAwareParams
from shapeshift.policies.planaware.core import PlanAwareScheduler, Variant
from shapeshift.policies.registry import register


class RubickParams(PlanAwareParams):
    max_scale: float = Field(2.0, ge=1.0)
    steal_margin: float = Field(0.5, ge=0)
    min_gain: float = Field(0.10, ge=0)
    slo_margin: float = Field(0.02, ge=0)
    trust_margin: float = Field(0.25, ge=0)
    guard_round: float | None = Field(60.0, gt=0)


VARIANTS = {"rubick": (True, True), "rubick-e": (True, False), "rubick-r": (False, True), "rubick-n": (False, False)}


def rubick_variant(name: str, params: RubickParams | None = None) -> Variant:
    """The skeleton's knobs for ``rubick`` and its ablations (replan, elastic)."""
    params = params or RubickParams()
    replan, elastic = VARIANTS[name]
    return Variant(
        name=name,
        replan=replan,
        elastic=elastic,
        order="slope",
        steal=elastic,
        min_res=True,
        cpu_mode="elastic" if elastic else "requested",
        max_scale=params.max_scale,
        steal_margin=params.steal_margin,
        min_gain=params.min_gain,
        slo_margin=params.slo_margin,
        trust_margin=params.trust_margin,
        guard_round=params.guard_round,
        restore_penalty=params.restore_penalty,
    )


def _make(name: str, params: RubickParams) -> PlanAwareScheduler:
    return PlanAwareScheduler(rubick_variant(name, params), params.knowledge())


@register(
    "rubick",
    "Plan-aware reconfigurable scheduling: co-optimise plans and GPU/CPU/memory; tenant guarantees.",
    RubickParams,
)
def make_rubick(params: RubickParams) -> PlanAwareScheduler:
    return _make("rubick", params)


@register("rubick-e", "Rubick ablation: reconfigure execution plans only; requested resources.", RubickParams)
def make_rubick_e(params: RubickParams) -> PlanAwareScheduler:
    return _make("rubick-e", params)


@register("rubick-r", "Rubick ablation: resize resources only; requested plan (3D jobs scale DP).", RubickParams)
def make_rubick_r(params: RubickParams) -> PlanAwareScheduler:
    return _make("rubick-r", params)


@register("rubick-n", "Rubick ablation: neither plans nor resources change (same skeleton).", RubickParams)
def make_rubick_n(params: RubickParams) -> PlanAwareScheduler:
    return _make("rubick-n", params)
