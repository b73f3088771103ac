"""The contract between the engine and the policies that drive it.

The engine owns this contract: a ``Policy`` looks at a ``ClusterView`` and declares the
desired state as a ``Schedule``; the engine reconciles reality towards it. Policies live
in ``shapeshift.policies`` and implement the contract; the engine never imports them.

Failure semantics (what a caller may rely on):

* a job a policy leaves out of its schedule simply waits (a running one is preempted),
  with the schedule's reason for it: that is a normal outcome, not an error;
* ``PolicyError`` means the policy asked for something impossible (an allocation that
  over-commits a node, a node outside the job's partition, a finished job). The engine
  raises it before applying the offending action; it is a bug in the policy, never bad
  user input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from shapeshift.model import Schedule

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

#: Trigger names: which events make the engine call ``Policy.decide``.
ARRIVAL = "arrival"
COMPLETION = "completion"
ROUND = "round"
EVENT_TRIGGERS = frozenset({ARRIVAL, COMPLETION})


class PolicyError(RuntimeError):
    """A policy asked for something impossible (over-allocation, a finished job...)."""


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
