"""What the controller asks of a backend: start ranks, tell whether they still run, stop them.

The controller owns all scheduling state and persists it; a backend only turns a run
(one launch attempt of a job, one process per rank) into processes somewhere and reports
exit codes. ``adopt`` re-attaches to ranks a previous controller left running, which is
what makes a controller restart invisible to running jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

#: Exit code reported for a rank whose process disappeared without leaving an exit status
#: (killed together with its wrapper, or its node died).
VANISHED = -999

RunId = tuple[str, int]


@dataclass(frozen=True)
class RankLaunch:
    """One process of a run: what to execute, where, and where its output and exit status go."""

    rank: int
    node: int
    node_name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(hash=False)
    log: str
    exit_file: str
    slots: tuple[int, ...] = ()


class Backend(Protocol):
    """Every method must return promptly: the control loop calls them and must never
    wait on a slow or dead node (a backend polls, it does not block)."""

    name: str

    def spawn(self, run: RunId, ranks: list[RankLaunch]) -> None:
        """Start every rank of ``run``."""

    def poll(self, run: RunId) -> list[int | None]:
        """Per rank: ``None`` while it runs, else its exit code (``VANISHED`` if unknown)."""

    def terminate(self, run: RunId) -> None:
        """Ask the ranks to stop (SIGTERM): a lease-aware script checkpoints and exits."""

    def kill(self, run: RunId) -> None:
        """Stop the ranks now."""

    def adopt(self, run: RunId, ranks: list[RankLaunch]) -> None:
        """Re-attach to ranks started by a previous controller (they may have exited since)."""

    def forget(self, run: RunId) -> None:
        """Drop bookkeeping for a run whose ranks have all exited."""

    def dead_nodes(self) -> set[str]:
        """Names of nodes that cannot run anything now (the controller cordons them).
        Must answer at once: the control loop calls it every tick."""

    def close(self) -> None:
        """Release the backend's own resources; running ranks are left running."""
