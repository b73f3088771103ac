"""Choose which configurations to profile so a new model's fit is well determined.

Each coefficient is pinned by a particular kind of run: ``k_opt_off``/``k_off``/``k_swap``
only by ZeRO-Offload runs (three of them, at different GPU counts), ``k_sync`` and the
network term by data-parallel runs inside one node *and* across nodes (evenly and
unevenly spread), the forward times by one run of each framework, ``k_stage`` by a
pipeline run. The planner is greedy: it repeatedly takes the candidate that adds the
most not-yet-covered features, with fixed weights and a deterministic tie-break, so the
same inputs always give the same list.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from shapeshift.model import ExecutionPlan, NodeSpec
from shapeshift.perf.arch import ModelArch
from shapeshift.perf.measurements import format_placement, plan_family
from shapeshift.perf.memory import fits_memory
from shapeshift.perf.rubick import A800_NODE

OFFLOAD_RUNS = 3


@dataclass(frozen=True, slots=True)
class Candidate:
    """A configuration that could be profiled."""

    plan: ExecutionPlan
    placement: tuple[int, ...]

    @property
    def family(self) -> str:
        return plan_family(self.plan)

    @property
    def gpus(self) -> int:
        return sum(self.placement)

    @property
    def spread(self) -> str:
        """``single`` node, ``even`` (same GPUs on every node) or ``uneven``."""
        if len(self.placement) == 1:
            return "single"
        return "even" if len(set(self.placement)) == 1 else "uneven"

    def key(self) -> tuple[object, ...]:
        p = self.plan
        return (self.family, self.gpus, format_placement(self.placement), p.pp, p.tp, p.dp)


def _gain(c: Candidate, chosen: Sequence[Candidate], offload_ok: bool) -> float:
    same = [x for x in chosen if x.family == c.family]
    gain = 0.0
    quota = OFFLOAD_RUNS if c.family == "zero-offload" and offload_ok else 1
    if len(same) < quota:
        gain += 100.0
    elif c.family != "3d":
        gain -= 8.0 * (len(same) - quota + 1)  # beyond quota: 3D rows carry more unknowns
    if c.family == "3d":
        if c.plan.pp not in {x.plan.pp for x in same}:
            gain += 5.0
        if c.plan.tp not in {x.plan.tp for x in same}:
            gain += 4.0
        if not same:  # a lone 3D run should not confound forward time with stage overhead
            gain -= 1.5 * (c.plan.pp - 1)
    if c.gpus not in {x.gpus for x in same}:
        gain += 6.0
    if c.spread not in {x.spread for x in same}:
        gain += 5.0
    if c.gpus not in {x.gpus for x in chosen}:
        gain += 4.0
    if c.spread not in {x.spread for x in chosen}:
        gain += 8.0
    if len(c.placement) not in {len(x.placement) for x in chosen}:
        gain += 2.0
    if c.plan.pp > 1 and not any(x.plan.pp > 1 for x in chosen):
        gain += 3.0
    if c.plan.tp > 1 and not any(x.plan.tp > 1 for x in chosen):
        gain += 3.0
    # prefer runs like the ones a scheduler will ask about: several GPUs, >= 2 per node
    gain += 0.5 * math.log2(c.gpus)
    if c.gpus == 1:
        gain -= 4.0
    if len(c.placement) > 1 and min(c.placement) == 1:
        gain -= 2.0
    return gain


def plan_profiling(
    arch: ModelArch,
    candidates: Sequence[Candidate],
    budget: int = 7,
    node: NodeSpec = A800_NODE,
    check_memory: bool = True,
) -> list[Candidate]:
    """Pick ``budget`` candidates covering families, GPU counts, nodes and spreads.

    Candidates that do not fit in memory are skipped when ``check_memory`` (measured rows
    evidently fit, so the validation passes ``False`` for them).
    """
    if budget < 1:
        raise ValueError("budget must be >= 1")
    pool = [c for c in candidates if not check_memory or fits_memory(arch, c.plan, c.placement, node)]
    pool.sort(key=Candidate.key)
    offload_ok = sum(c.family == "zero-offload" for c in pool) >= OFFLOAD_RUNS
    chosen: list[Candidate] = []
    while pool and len(chosen) < budget:
        best = max(pool, key=lambda c: _gain(c, chosen, offload_ok))
        chosen.append(best)
        pool.remove(best)
    return chosen
