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
#: How throughput is scaled before slopes of different jobs are compared: ``baseline`` =
#: relative to the model's predicted throughput on a fixed 4-GPU packed baseline (Rubick
#: Sec. 7.2), ``request`` = relative to the job's own throughput at its requested size
#: (an alternative of ours; a large job's first GPUs then score about 1/N).
SlopeScale = Literal["baseline", "request"]
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
    max_scale: float | None = 2.0  # elastic jobs grow to at most this times their request (None: no cap)
    steal_margin: float = 0.5
    min_gain: float = 0.10
    slo_margin: float = 0.02  # minRes margin for a configuration already observed
    trust_margin: float = 0.25  # ... and for one only predicted (few-shot errors reach 40%+)
    guard_round: float | None = None  # decide also every this many seconds (SLO guard reaction)
    restore_penalty: float = 78.0
    # -- the knobs below keep the skeleton's older behaviour by default (antman, synergy);
    #    ``rubick`` sets them from its parameters (see rubick.py and docs/rubick.md)
    slope: SlopeScale = "request"
    fixed_guaranteed: bool = True  # running guaranteed jobs stay at minRes (never grown, never shrunk)
    pack_guaranteed: bool = True  # guaranteed jobs start on the fewest nodes, shrinking others for it
    slo_guard: bool = True  # a guaranteed job seen below its promised rate goes back to its request
    starvation: float | None = None  # a best-effort job queued this long (s) is placed like a guaranteed one
    min_cpus: bool = False  # minRes also minimises CPUs (GPUs first, then CPUs)
    retune_round: float | None = None  # also decide every this many seconds; running jobs re-tune CPUs (Synergy)
    reserve: bool = False  # a guaranteed job that cannot start reserves what it could get (AntMan)
    opportunistic_after: float | None = None  # a guaranteed job queued this long (s) runs as best-effort (AntMan)


@dataclass
class PlanJob:
    id: str
    spec: JobSpec
    status: JobStatus
    space: PlanSpace
    unit: int
    curve: np.ndarray
    slope_scale: float  # throughput that slopes are divided by (see Variant.slope)
    g_min: int
    g_max: int
    protected: bool  # a covered guaranteed (or starved) job: never shrunk below g_min
    order: int
    cpu_per_gpu: float
    nodes: dict[int, int] = field(default_factory=dict)
    running: bool = False
    pinned: bool = False
    min_cpus: float | None = None  # the CPUs of minRes (all of them, at g_min GPUs)

    @property
    def g(self) -> int:
        return sum(self.nodes.values())


