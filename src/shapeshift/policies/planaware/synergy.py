"""``synergy``: fixed GPUs and plan, FIFO; CPUs and memory by sensitivity (``tune``) or in
proportion to GPUs (``proportional``), re-tuned every round.

Synergy (Mohan et al., "Looking Beyond GPUs for DNN Scheduling on Multi-Tenant
Clusters", OSDI 2022, Sec. 4; simulator msr-fiddle/synergy, ``schedulers/fifo_synergy_new.py``
and ``resources/cluster.py``): jobs keep their requested GPU count and execution plan
and are started in queue order (backfilling, no preemption). ``proportional`` gives every
job exactly the GPU-proportional share of its servers' CPUs and memory (Synergy's
``fair``). ``tune`` (``allocate_synergy_tune`` / ``_tune``) gives each job its demand
vector from its sensitivity profile when it fits on its nodes: more than proportional for
a sensitive job, less for an insensitive one whose throughput does not suffer, so no job
runs slower than at the proportional share; when a newcomer's share does not fit, jobs
holding more than their share are brought back to it ("peer adjustment",
``synergy_cpus``). Every ``retune_round`` seconds (Synergy's round, 300 s: ``runner.py``
``round_duration``) running jobs below their demand try again for the CPUs and memory
left idle; the timer runs only while jobs run or wait.

Profiles: for Synergy's CNN/RNN/speech models (``res18``, ``alexnet``, ``gnmt``...), the
published profiles of ``shapeshift.perf.synergy_profiles`` (demand per GPU, whole or
nothing, as Synergy's simulator); for transformer models the performance model, whose
only CPU-sensitive plans are ZeRO-Offload ones (demand: the fewest threads per GPU
reaching 95% of the best, never below proportional). Host memory of transformer plans is
what the plan needs. Deviations from Synergy's simulator (README fidelity table): a
running job keeps its GPUs (Synergy re-places every job every round), jobs start at
arrivals and completions (Synergy only at round boundaries), and every change of a
running job's CPUs costs the restore pause of the run (Synergy's simulator charges none).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from shapeshift.policies.framework.registry import register
from shapeshift.policies.planaware.common import PlanAwareParams
from shapeshift.policies.planaware.core import PlanAwareScheduler, Variant

#: Synergy's scheduling round (s): ``round_duration`` of ``simulator/runner.py`` and
#: ``schedulers/scheduler.py`` in msr-fiddle/synergy.
SYNERGY_ROUND_SECONDS = 300.0


class SynergyParams(PlanAwareParams):
    """``mode``: ``tune`` (Synergy-Tune) or ``proportional`` (Synergy's GPU-proportional
    baseline). ``retune_round``: seconds between re-tunes of running jobs (Synergy's
    300 s round); ``None`` re-decides only at arrivals and completions."""

    mode: Literal["tune", "proportional"] = "tune"
    retune_round: float | None = Field(SYNERGY_ROUND_SECONDS, gt=0, allow_inf_nan=False)

    @field_validator("retune_round", mode="before")
    @classmethod
    def _off(cls, value: object) -> object:
        """``retune_round=none`` (or ``off``) on the command line switches rounds off."""
        return None if isinstance(value, str) and value.strip().lower() in ("none", "off") else value


@register(
    "synergy",
    "Fixed GPUs and plan, FIFO with backfill; CPUs and memory by sensitivity profile (tune) or proportional.",
    SynergyParams,
    speed_models=("synergy", "ground-truth"),
    speed_note="sizes each job's CPUs and memory, and only the synergy and ground-truth models make a job's "
    "speed depend on them: here every job runs at its recorded speed whatever it gets",
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
        retune_round=params.retune_round if params.mode == "tune" else None,
    )
