"""A what-if simulation, handed to the policies that plan by simulating.

Some policies choose by simulating alternatives: ``auto`` scores every candidate
combination by simulating the current jobs under it, and Lucid's system tuner replays
recent history under every candidate setting. Policies never import the simulator (the
simulator depends on the policies, not the other way round), so whoever runs such a
policy hands it one: a policy that implements ``Replaying`` is given a ``Replay`` through
``use_replay`` before its first decision (``shapeshift.sim.simulator.simulate`` does it for
the policy it runs, the run path and the live runtime for the policy they build).

Failure semantics: a policy that needs a replay and was never given one raises
``PolicyError`` at the decision that needs it, naming itself; a replay raises what the
simulation raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from shapeshift.engine.contract import Policy, PolicyError

if TYPE_CHECKING:
    from shapeshift.engine.state import JobStatus
    from shapeshift.model import ClusterSpec, JobSpec


class Replay(Protocol):
    def __call__(
        self, jobs: Sequence[JobSpec], cluster: ClusterSpec, policy: Policy, *, round_seconds: float | None = None
    ) -> list[JobStatus]:
        """Simulate ``jobs`` (from their submit times) on ``cluster`` under ``policy`` until
        none remains, with the default speed model and overheads; every job's final status."""
        ...


@runtime_checkable
class Replaying(Protocol):
    def use_replay(self, replay: Replay) -> None:
        """Keep ``replay`` for the decisions that simulate alternatives."""
        ...


def require(replay: Replay | None, who: str) -> Replay:
    """``replay``, or the ``PolicyError`` of a policy run without one."""
    if replay is None:
        raise PolicyError(
            f"{who} simulates alternatives but was given no simulation: run it through shapeshift.runs.run "
            "or shapeshift.sim.simulator.simulate, or hand it one with use_replay"
        )
    return replay
