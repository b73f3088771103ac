"""The contract between the engine and the policies that drive it, written out whole.

The engine owns this contract: a ``Policy`` looks at a ``ClusterView`` and declares the
desired state as a ``Schedule``; the engine reconciles reality towards it. Policies live
in ``shapeshift.policies`` and implement the contract; the engine never imports them.

Beyond ``Policy`` itself the contract has two parts, so that nothing is found by probing
an object for an attribute it may or may not have:

* ``PolicyTraits``: the facts a policy declares about itself (whether a run may be split
  by partition, its lease). A policy declares them as ``traits``; one that declares
  nothing, or leaves a field out, gets the field's default here, which is always the
  safe reading (a run that is not split, no lease). ``traits_of`` reads them.
* one small ``runtime_checkable`` protocol per optional capability (``ReportsSummary``,
  ``KeepsTimeline``, ``Prepares``, ``Adopts``, ``AdaptsInterference``, ``HasKnowledge``
  for policies; ``TracksSharing`` for executors; ``RateBoundaries`` for throughput
  models). A caller asks ``isinstance(obj, Capability)`` once and calls the method; an
  object without the capability is never called, and its absence is never an error.

Wrappers (a component that powers nodes down, a recorder, a clock) forward one object:
``traits = traits_of(inner)``, and keep the wrapped policy as ``inner`` for its
capabilities.

Failure semantics (what a caller may rely on):

* a job a policy leaves out of its schedule simply waits (a running one is preempted),
  with the schedule's reason for it: that is a normal outcome, not an error;
* ``PolicyError`` means the policy asked for something impossible (an allocation that
  over-commits a node, a node outside the job's partition, a finished job). The engine
  raises it before applying the offending action; it is a bug in the policy, never bad
  user input;
* an exception raised by a capability's method propagates to whoever called it (the
  run fails); capabilities are never retried or skipped on error.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from shapeshift.model import Schedule

if TYPE_CHECKING:
    from shapeshift.engine.sharing import GpuLedger
    from shapeshift.engine.state import JobStatus
    from shapeshift.engine.view import ClusterView
    from shapeshift.model import Allocation, ClusterSpec, JobSpec
    from shapeshift.perf.colocation import InterferenceModel

#: Trigger names: which events make the engine call ``Policy.decide``.
ARRIVAL = "arrival"
COMPLETION = "completion"
ROUND = "round"
EVENT_TRIGGERS = frozenset({ARRIVAL, COMPLETION})


class PolicyError(RuntimeError):
    """A policy asked for something impossible (over-allocation, a finished job...)."""


class PreemptKind(enum.StrEnum):
    """What a preemption does to the job it stops (``PolicyTraits.preempts_as``)."""

    KEEP = "keep"
    REQUEUE = "requeue"
    CANCEL = "cancel"


@dataclass(frozen=True)
class PolicyTraits:
    """What a policy declares about itself, beyond what it decides.

    Every field's default is the reading that is always correct, only slower or plainer:
    a policy that forgets a field runs serially, never wrongly."""

    #: The run may be simulated one partition at a time (``shapeshift.runs.parallel``,
    #: ``--workers``) and give the same decisions: each partition's decisions read only
    #: that partition, and timers due elsewhere change nothing here.
    partition_local: bool = False
    #: Seconds a running job keeps its GPUs before it may be evicted (0: no lease). A
    #: lease's wake-ups fall on round instants only with the policy's own round.
    lease: float = 0.0
    #: The policy's own rule for jobs its placement can never hold although the cluster's
    #: capacity could (Slurm's equal per-node GPU share, for one): given a job, the
    #: cluster and its partition's node indexes, the reason it can never be placed, or
    #: ''. The engine asks it once per job at arrival, after its own checks, and rejects
    #: such a job with the reason, as the real scheduler refuses it at submission. A
    #: field of the traits, so that wrappers forwarding the traits keep it.
    refuses: Callable[[JobSpec, ClusterSpec, Sequence[int]], str] | None = None
    #: The policy allocates whole GPUs only, as its source does (Slurm's ``gres/gpu``,
    #: Kueue's ``nvidia.com/gpu`` quota, Gavel, Pollux): a job asking for a fraction of a
    #: GPU (``JobSpec.gpu_milli``) gets one whole GPU. On a cluster of fractional GPUs the
    #: engine refuses (``PolicyError``) a whole GPU given for a fraction by a policy that
    #: does not declare this, and a share of a GPU given by one that does, so that which
    #: rule a run followed is never a guess.
    whole_gpus: bool = False
    #: The policy's own rule for what preempting a job does to it, given the job's id:
    #: ``KEEP`` (it waits with its progress, as from a checkpoint: every policy's reading
    #: without the rule), ``REQUEUE`` (it waits and starts again from nothing: Slurm's
    #: requeue) or ``CANCEL`` (it ends, neither completed nor unfinished: Slurm's
    #: cancel). The engine asks it once per preemption, before stopping the job. A field
    #: of the traits, so that wrappers forwarding the traits keep it.
    preempts_as: Callable[[str], PreemptKind] | None = None


#: What a policy that declares nothing gets.
DEFAULT_TRAITS = PolicyTraits()


@runtime_checkable
class Policy(Protocol):
    #: Registry name, used in outputs.
    name: str
    #: Which events make the engine call ``decide``: any of "arrival", "completion", "round".
    triggers: frozenset[str]
    #: Round length in seconds used when the policy needs rounds and the user gave none.
    default_round: float | None

    def decide(self, view: ClusterView) -> Schedule:
        """Return the desired allocations; jobs left out stay queued (or are preempted)."""
        ...


@runtime_checkable
class DeclaresTraits(Protocol):
    """A policy (or wrapper) that declares its ``PolicyTraits``."""

    traits: PolicyTraits


def traits_of(policy: object) -> PolicyTraits:
    """``policy``'s declared traits, or the defaults where it declares none."""
    return policy.traits if isinstance(policy, DeclaresTraits) else DEFAULT_TRAITS


@runtime_checkable
class ReportsSummary(Protocol):
    """A policy with figures of its own for the run's ``summary.json``."""

    def summary_fields(self) -> dict[str, Any]:
        """Extra summary fields, read once after the run (names must not clash with the
        run's own fields; a clash overwrites them)."""
        ...


@runtime_checkable
class KeepsTimeline(Protocol):
    """A policy that records its own evaluations over the run (``auto``)."""

    @property
    def timeline(self) -> list[Any]:
        """One entry per evaluation, in time order."""
        ...

    @property
    def switches(self) -> int:
        """How many evaluations changed the policy in force."""
        ...

    def write_timeline(self, path: str | Path) -> None:
        """Write the timeline as CSV to ``path`` (an ``OSError`` propagates)."""
        ...


@runtime_checkable
class Prepares(Protocol):
    """A policy part that updates what it has learned before each decision."""

    def prepare(self, view: ClusterView) -> None:
        """Called once per decision, before any partition is decided."""
        ...


@runtime_checkable
class Adopts(Protocol):
    """An admission part that can take over the jobs another one let in."""

    def adopt(self, view: ClusterView, job_ids: Iterable[str]) -> None:
        """Count ``job_ids`` as already admitted."""
        ...


@runtime_checkable
class AdaptsInterference(Protocol):
    """A policy that changes how jobs sharing GPUs slow each other (AntMan's GPU
    operator manager)."""

    def interference_model(self, default: InterferenceModel) -> InterferenceModel:
        """The model to simulate with, given the run's ``default``; called once per run."""
        ...


@runtime_checkable
class HasKnowledge(Protocol):
    """A policy that predicts iteration times from a fitted performance model (``knowledge``
    answers ``knowledge(model_name)`` with the model's fit, ``None`` when unknown)."""

    @property
    def knowledge(self) -> Any: ...


@runtime_checkable
class TracksSharing(Protocol):
    """An executor that models jobs slowing each other on shared GPUs."""

    def use_sharing(self, ledger: GpuLedger) -> None:
        """Handed the engine's GPU ledger once, on clusters where jobs may share GPUs."""
        ...

    def sharing_changed(self, job: JobStatus, now: float) -> None:
        """``job``'s GPU partners changed at ``now`` (its progress is already folded in):
        set its new speed."""
        ...


@runtime_checkable
class RateBoundaries(Protocol):
    """A throughput model whose rate depends on progress (goodput that changes as a job
    trains): it says until which progress the rate holds."""

    def rate_at(self, job: JobSpec, allocation: Allocation, done: float) -> tuple[float, float]:
        """``(rate, horizon)``: the rate at progress ``done`` and the progress up to which
        it holds (``inf``: to the end). A horizon at or below ``done`` is not allowed."""
        ...
