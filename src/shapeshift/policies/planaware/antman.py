"""``antman``: guaranteed jobs first with exactly what they asked for; opportunistic jobs
run on idle GPUs and, on a sharing cluster, beside other jobs, throttled, never preempted.

AntMan (Xiao et al., "AntMan: Dynamic Scaling on GPU Clusters for Deep Learning", OSDI
2020, pp. 533-548), as the multi-tenant baseline of the Rubick paper. The rules below are
the paper's Sec. 3.2-3.3 and Algorithm 1 (``scheduleJob``); the device-level constants
the paper leaves open come from the authors' Kubernetes plugin
(alibaba/GPU-scheduler-for-deep-learning, commit 2069b38b,
``scheduler-plugins/pkg/antman/antman.go``; see ``antman_sharing``).

**Global scheduler** (Sec. 3.3): a tenant's quota is a number of GPUs; a
resource-guaranteed job consumes it, an opportunistic one does not (Sec. 3.2). Guaranteed
jobs get exactly their request, packed on the fewest nodes (Algorithm 1 line 1: the
job's topology constraint), in queue order, on GPUs no other guaranteed job holds. A
guaranteed job whose request can only partly be met *reserves* what it could get (lines
7-8): the GPUs of its packed placement that no guaranteed job holds (no later guaranteed
job takes them; opportunistic jobs may use them meanwhile), and its tenant's remaining
quota when the quota blocks it (later guaranteed jobs of that tenant wait). Jobs that
queue long run as opportunistic jobs and are *upgraded* to guaranteed, in preference to
starting new ones, once their tenant's quota has room for what they hold. The paper
estimates the queueing delay and gives no threshold; ours converts a guaranteed job queued
longer than ``opportunistic_after``. Opportunistic jobs take idle GPUs in queue order and
never preempt anyone.

**GPU sharing** (Sec. 3.1, 3.3; ``antman_sharing``): on a cluster whose
``gpu_share_limit`` is above 1, every job declares the GPU memory its plan needs, and an
opportunistic job that finds no idle GPUs is packed onto the least-utilised GPUs below
80% utilisation (Sec. 3.3: M = 80%, any occupant), guaranteed jobs' GPUs included. A
guaranteed job that lands on an opportunistic job's GPU does not preempt it: the
opportunistic job stays, runs in the guaranteed job's idle time slots
(``interference_model``) and only leaves when the engine's hard limits (jobs per GPU, GPU
memory) leave it no room, where AntMan would move its tensors to host memory.

| parameter | default | source |
| --- | --- | --- |
| ``opportunistic_after`` | 3600 s | Sec. 3.3: long-queued jobs run opportunistically (no threshold given: ours) |
| ``guaranteed_backfill`` | False | ours: no reservation; a later guaranteed job may start past a blocked one |
| ``dynamic_gpus`` | False | the Rubick artifact's AntMan baseline resizes jobs' GPU counts (approximated; see docs) |
| ``sharing`` | True | paper Sec. 3 (False: whole GPUs only) |
| ``preempt_opportunistic`` | False | ours: guaranteed jobs preempt opportunistic jobs (source: throttle) |
| ``guaranteed_slowdown`` | 0.0 | paper Sec. 3.1.2, 3.3: guaranteed jobs keep dedicated speed |
| ``idle_slots`` | True | paper Sec. 3.1.2: opportunistic kernels run in idle slots |
| ``max_gpu_util`` | 0.8 | Sec. 3.3, M = 80%: no opportunistic job joins a GPU at 80% or more |
| ``max_used_gpu_mem_gb`` | None | Sec. 3.3: no memory limit (16: antman.go ``limitedMem``) |
| ``guaranteed_only_util_limit`` | False | ours: limit utilisation only beside guaranteed jobs, at ``min_idle_share`` |
| ``min_idle_share`` | 0.1 | ours, with ``guaranteed_only_util_limit``: idle share a guaranteed host must leave |
| ``prefer_empty_gpus`` | False | ours: a guaranteed job takes empty GPUs first (source: at random) |

Measured effects and the rules not modelled: docs/policies/plan-aware.md (AntMan).
"""

from __future__ import annotations

import dataclasses

from pydantic import Field

from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, Schedule
from shapeshift.perf.colocation import InterferenceModel
from shapeshift.policies.framework.registry import register
from shapeshift.policies.planaware.antman_jobs import AntManInterference
from shapeshift.policies.planaware.antman_sharing import OpportunisticPacker
from shapeshift.policies.planaware.common import PlanAwareParams
from shapeshift.policies.planaware.core import PlanAwareScheduler, Variant
from shapeshift.policies.planaware.knowledge import Knowledge


class AntManParams(PlanAwareParams):
    sharing: bool = True
    guaranteed_slowdown: float = Field(0.0, ge=0, lt=1)
    idle_slots: bool = True
    min_idle_share: float = Field(0.1, ge=0, le=1)
    max_gpu_util: float = Field(0.8, gt=0, le=1)
    max_used_gpu_mem_gb: float | None = Field(None, gt=0, allow_inf_nan=False)
    preempt_opportunistic: bool = False
    guaranteed_only_util_limit: bool = False
    prefer_empty_gpus: bool = False
    guaranteed_backfill: bool = False
    opportunistic_after: float | None = Field(3600.0, gt=0, allow_inf_nan=False)
    dynamic_gpus: bool = False


@register(
    "antman",
    "Guaranteed jobs get their exact request first; best-effort jobs use idle GPUs and spare GPU memory.",
    AntManParams,
)
def make_antman(params: AntManParams) -> PlanAwareScheduler:
    return AntManScheduler(antman_variant(params), params.knowledge(), params)


def antman_variant(params: AntManParams | None = None) -> Variant:
    params = params or AntManParams()
    return Variant(
        name="antman",
        replan=False,
        elastic=params.dynamic_gpus,
        order="fifo",
        steal=False,
        min_res=False,
        cpu_mode="requested",
        max_scale=None,
        restore_penalty=params.restore_penalty,
        reserve=not params.guaranteed_backfill,
        opportunistic_after=params.opportunistic_after,
    )


class _WithoutPacked:
    """The view the count-based skeleton decides on: packed jobs are invisible, so the
    GPUs only they hold count as free (a guaranteed job may take them)."""

    def __init__(self, view: ClusterView, hidden: set[str]):
        self._view = view
        self._hidden = hidden
        self.allocations = {j: a for j, a in view.allocations.items() if j not in hidden}

    def running(self, partition: str) -> list[str]:
        return [j for j in self._view.running(partition) if j not in self._hidden]

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._view, name)


class AntManScheduler(PlanAwareScheduler):
    """The plan-aware skeleton for placements by count, then ``OpportunisticPacker`` for
    GPU identity, eviction and packing (module docstring)."""

    def __init__(self, variant: Variant, knowledge: Knowledge, params: AntManParams | None = None):
        super().__init__(variant, knowledge)
        self.params = params or AntManParams()
        self.packed: set[str] = set()
        self.packings = 0
        self.evictions = 0
        self.shared_cluster = False
        self.packer = OpportunisticPacker(
            self.params.min_idle_share, self.params.idle_slots, self.params.seed,
            max_gpu_util=self.params.max_gpu_util, max_used_gpu_mem_gb=self.params.max_used_gpu_mem_gb,
            guaranteed_only_util_limit=self.params.guaranteed_only_util_limit,
            prefer_empty_gpus=self.params.prefer_empty_gpus,
            evict_opportunistic=self.params.preempt_opportunistic,
        )

    def interference_model(self, default: InterferenceModel) -> InterferenceModel:
        """How jobs sharing a GPU run under this policy (the GpuOpManager, Sec. 3.1.2)."""
        if not self.params.sharing:
            return default
        return AntManInterference(default, self.params.guaranteed_slowdown, self.params.idle_slots, self.params.seed)

    def decide(self, view: ClusterView) -> Schedule:
        ledger = view.sharing
        if not self.params.sharing or ledger is None or ledger.fractions:
            # On a cluster of fractional GPUs a GPU's shares are quotas the cluster
            # enforces: no opportunistic jobs join another's GPUs there.
            return super().decide(view)
        self.packed &= set(view.allocations)
        if view.finished:
            self.packer.forget({j for p in view.partitions for j in (*view.running(p), *view.pending(p))})
        inner = super().decide(_WithoutPacked(view, self.packed))  # type: ignore[arg-type]
        desired: dict[str, Allocation] = dict(inner.allocations)
        desired.update({j: view.allocations[j] for j in sorted(self.packed)})
        reasons = dict(inner.reasons)
        keep: set[str] = set()
        if not self.params.preempt_opportunistic:
            # Running opportunistic jobs the skeleton stopped for guaranteed ones: they stay
            # where they run when there is room (Sec. 3.3). A converted guaranteed job
            # still counts as guaranteed for speeds, so it is stopped as before.
            keep = {j for j in view.allocations
                    if j not in desired and j not in self.packed and not view.job(j).spec.guaranteed}
        desired, newly, evicted = self.packer.finish(view, ledger, desired, self.packed, reasons, keep)
        self.packed = (self.packed - evicted) | newly
        self.packings += len(newly)
        self.evictions += len(evicted)
        self.shared_cluster = True
        schedule = Schedule.replace(view.allocations, desired, reasons)
        return dataclasses.replace(schedule, wake_at=inner.wake_at)

    def summary_fields(self) -> dict[str, int]:
        """Packings and evictions, on runs where sharing was possible (else nothing, so
        whole-GPU runs keep their summary)."""
        if not self.shared_cluster:
            return {}
        return {"antman_packings": self.packings, "antman_evictions": self.evictions}
