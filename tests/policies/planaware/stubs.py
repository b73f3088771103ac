"""Hand-built performance knowledge and ground truth, so policy scenarios have known answers.

``StubKnowledge`` answers like :class:`~shapeshift.policies.planaware.knowledge.Knowledge`
from a table ``throughput(model, gpus, plan_is_requested)``; ``StubTruth`` charges the same
(or deliberately different) speeds in the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from shapeshift.model import Allocation, ClusterSpec, ExecutionPlan, JobSpec, NodeSpec
from shapeshift.policies.planaware.knowledge import Choice, PlanSpace

BATCH = 32  # bert's global batch in perf.arch

ThrFn = Callable[[int, bool], float]  # (gpus, plan is the requested plan) -> samples/s


def linear(g: int, requested_plan: bool) -> float:
    return 10.0 * g


class StubKnowledge:
    def __init__(self, thr: ThrFn = linear, observed: bool = True) -> None:
        self.thr = thr
        self.observed = observed
        self.refits = 0
        self.version = 0  # as ModelKnowledge: bumped on a refit; the stub never refits

    def knowledge(self, model: str) -> object:
        return self

    def observe(self, view: object) -> int:
        return 0

    def is_observed(self, model: str, plan: ExecutionPlan, place: Sequence[int], cpus: float) -> bool:
        return self.observed

    def best(self, model: str, place: Sequence[int], cpus: float, space: PlanSpace = ("all",)) -> Choice | None:
        g = sum(place)
        if space[0] == "fixed":
            plan = space[1]
            assert isinstance(plan, ExecutionPlan)
            if plan.gpus != g:
                return None
            t = self.thr(g, True)
            return Choice(plan, t, BATCH / t)
        t = self.thr(g, False)
        return Choice(ExecutionPlan(dp=g, zero="dp"), t, BATCH / t) if t > 0 else None

    def curve(self, model: str, space: PlanSpace, max_gpus: int, gpus_per_node: int, cpus_per_gpu: float):
        thr = np.zeros(max_gpus + 1)
        for g in range(1, max_gpus + 1):
            c = self.best(model, [g], cpus_per_gpu * g, space)
            thr[g] = max(thr[g - 1], c.throughput if c else 0.0)
        return thr


class StubTruth:
    """Iterations/s = throughput / batch, by GPU count and whether the plan is the requested one."""

    def __init__(self, thr: ThrFn = linear) -> None:
        self.thr = thr

    def total_work(self, job: JobSpec) -> float:
        assert job.iterations is not None
        return float(job.iterations)

    def rate(self, job: JobSpec, allocation: Allocation) -> float:
        requested = allocation.plan == job.plan
        return self.thr(allocation.gpus, requested) / BATCH

    def target_rate(self, job: JobSpec) -> float | None:
        return self.thr(job.num_gpus, True) / BATCH if job.guaranteed else None


def cluster(nodes: int = 2, gpus: int = 8, tenants: dict[str, int] | None = None) -> ClusterSpec:
    return ClusterSpec(
        tuple(NodeSpec(f"n{i}", gpus, 96, 1600, "A800", 80.0, 400.0, 12.5, 25.0) for i in range(nodes)),
        tenants=tenants or {},
    )


def pjob(
    job_id: str, submit: float, gpus: int, iterations: int, guaranteed: bool = False, tenant: str = "", **kw
) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        submit_time=submit,
        num_gpus=gpus,
        iterations=iterations,
        model="bert",
        num_cpus=8.0 * gpus,
        plan=ExecutionPlan(dp=gpus),
        guaranteed=guaranteed,
        tenant=tenant,
        **kw,
    )
