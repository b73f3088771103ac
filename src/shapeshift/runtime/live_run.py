"""A run as the controller holds it in memory (``LiveRun``), and how allocations and
plans are written down: JSON for the store, short text for ``queue``, JSON for workers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from shapeshift.model import Allocation, ExecutionPlan, Resources
from shapeshift.runtime.backends.base import RankLaunch, RunId


def allocation_to_json(alloc: Allocation) -> dict[str, Any]:
    return {
        "placement": [[n, r.gpus, r.cpus, r.mem_gb] for n, r in alloc.placement],
        "plan": str(alloc.plan) if alloc.plan is not None else None,
    }


def allocation_from_json(data: dict[str, Any]) -> Allocation:
    plan = ExecutionPlan.parse(data["plan"]) if data.get("plan") else None
    return Allocation(tuple((int(n), Resources(int(g), float(c), float(m))) for n, g, c, m in data["placement"]), plan)


def effective_plan(spec_plan: ExecutionPlan | None, alloc: Allocation) -> ExecutionPlan:
    """The plan a run executes: the policy's, else the requested one if it fits, else pure DP."""
    if alloc.plan is not None:
        return alloc.plan
    if spec_plan is not None and spec_plan.gpus == alloc.gpus:
        return spec_plan
    return ExecutionPlan(dp=max(alloc.gpus, 1))


def short_plan(plan: ExecutionPlan) -> str:
    """``dp=2,ga=2``: only what differs from the defaults (``dp`` always shown)."""
    default = ExecutionPlan()
    parts = [f"dp={plan.dp}"]
    for key, attr in (("tp", "tp"), ("pp", "pp"), ("ga", "grad_accum"), ("mb", "micro_batches")):
        if getattr(plan, attr) != getattr(default, attr):
            parts.append(f"{key}={getattr(plan, attr)}")
    if plan.zero is not default.zero:
        parts.append(f"zero={plan.zero.value}")
    if plan.grad_ckpt:
        parts.append("gc=1")
    return ",".join(parts)


def plan_json(plan: ExecutionPlan) -> str:
    return json.dumps(
        {
            "dp": plan.dp,
            "tp": plan.tp,
            "pp": plan.pp,
            "zero": plan.zero.value,
            "grad_accum": plan.grad_accum,
            "grad_ckpt": plan.grad_ckpt,
            "micro_batches": plan.micro_batches,
        }
    )


@dataclass
class LiveRun:
    """An attempt in memory: its record, its ranks, and whether it is being stopped."""

    job_id: str
    attempt: int
    allocation: Allocation
    lease_key: str
    ranks: list[RankLaunch] = field(default_factory=list)
    spawned: bool = False
    deadline: float | None = None  # set when stopping: SIGKILL after this wall time
    killed: bool = False
    started: float = 0.0  # wall time the ranks were spawned (time limits count from here)
    last_report: float | None = None  # wall time of the last metric report (heartbeat)
    observed: bool = False  # a measured iteration time has reached the engine
    launch_error: str = ""  # why the ranks could not be started (a failure of this job)

    @property
    def run_id(self) -> RunId:
        return (self.job_id, self.attempt)
