"""The plan-aware skeleton's vocabulary: which knobs a policy turns (``Variant``) and the
per-decision working record of one job (``PlanJob``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from shapeshift.engine.state import JobStatus
from shapeshift.model import JobSpec
from shapeshift.policies.planaware.knowledge import PlanSpace

CpuMode = Literal["requested", "elastic", "tune", "proportional"]
DEFAULT_CPUS_PER_GPU = 4.0


@dataclass(frozen=True)
class Variant:
    """Which knobs of the skeleton a policy turns."""

    name: str
    replan: bool  # choose plans (else keep the requested plan / its DP scaling)
    elastic: bool  # resize resources (else exactly the requested GPUs)
    order: Literal["slope", "fifo"] = "slope"
    steal: bool = True  # shrink less sensitive jobs for a visitor
    min_res: bool = True  # guaranteed jobs at minRes (else at their request)
    cpu_mode: CpuMode = "requested"
    max_scale: float = 2.0  # elastic jobs grow to at most this times their request
    steal_margin: float = 0.5
    min_gain: float = 0.10
    slo_margin: float = 0.02  # minRes margin for a configuration already observed
    trust_margin: float = 0.25  # ... and for one only predicted (few-shot errors reach 40%+)
    guard_round: float | None = None  # decide also every this many seconds (SLO guard reaction)
    restore_penalty: float = 78.0


@dataclass
class PlanJob:
    id: str
    spec: JobSpec
    status: JobStatus
    space: PlanSpace
    unit: int
    curve: np.ndarray
    req_thr: float
    g_min: int
    g_max: int
    protected: bool  # a covered guaranteed job: never a victim, never grown
    order: int
    cpu_per_gpu: float
    nodes: dict[int, int] = field(default_factory=dict)
    running: bool = False
    pinned: bool = False

    @property
    def g(self) -> int:
        return sum(self.nodes.values())


