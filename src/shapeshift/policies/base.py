"""The ``Policy`` protocol: a policy looks at the cluster and declares the desired state.

A policy never launches or stops anything itself. It returns a ``Schedule`` (which job
should run where, with which plan) and the engine reconciles reality towards it. That
is why the same policy object drives the simulator and a live cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from shapeshift.model import Schedule

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

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
