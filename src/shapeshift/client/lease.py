"""Optimistic leases: iteration-level preemption without a round trip per step.

A job holds its GPUs until the controller revokes the lease. The script checks a local
flag each step (a memory read); a background thread polls the controller's lease endpoint
every ``poll_interval`` seconds and SIGTERM from the backend sets the same flag, so
revocation is noticed within a step or two while the step loop never waits on the
network. If the controller is unreachable (restarting), the lease is presumed valid:
that is the optimistic part, and it is what lets running jobs survive a controller crash.

Distributed jobs stop in two phases: rank 0 learns of the revocation, then all ranks
agree on the stop iteration (``Lease.agree`` takes an all-reduce of the flag), so every
rank checkpoints and exits at the same iteration.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Exit status of a worker that stopped because its lease was revoked (EX_TEMPFAIL):
#: it checkpointed and wants to be relaunched, it did not fail.
PREEMPTED_EXIT = 75


@dataclass(frozen=True)
class WorkerEnv:
    """What the backend tells every rank through environment variables."""

    job_id: str = ""
    attempt: int = 0
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    plan: dict[str, Any] | None = None
    checkpoint_dir: str = ""
    controller: str = ""
    lease_key: str = ""
    master_addr: str = "127.0.0.1"
    master_port: int = 29500

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> WorkerEnv:
        env = os.environ if environ is None else environ
        plan = env.get("SHAPESHIFT_PLAN")
        return cls(
            job_id=env.get("SHAPESHIFT_JOB_ID", ""),
            attempt=int(env.get("SHAPESHIFT_ATTEMPT", "0")),
            rank=int(env.get("RANK", "0")),
            world_size=int(env.get("WORLD_SIZE", "1")),
            local_rank=int(env.get("LOCAL_RANK", "0")),
            plan=json.loads(plan) if plan else None,
            checkpoint_dir=env.get("SHAPESHIFT_CHECKPOINT_DIR", ""),
            controller=env.get("SHAPESHIFT_CONTROLLER", ""),
            lease_key=env.get("SHAPESHIFT_LEASE_KEY", ""),
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=int(env.get("MASTER_PORT", "29500")),
        )

    @property
    def managed(self) -> bool:
        """True when launched by a Shapeshift controller (else the script runs standalone)."""
        return bool(self.controller and self.job_id and self.lease_key)


class Lease:
    """The right to keep running; ``revoked`` turns true when the controller wants the GPUs back."""

    def __init__(
        self,
        env: WorkerEnv | None = None,
        *,
        poll_interval: float = 0.5,
        handle_sigterm: bool = True,
        poll: bool | None = None,
    ):
        self.env = env or WorkerEnv.from_env()
        self.poll_interval = poll_interval
        self._revoked = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        # Only rank 0 polls: it is the one that learns of the revocation (phase one).
        should_poll = self.env.managed and self.env.rank == 0 if poll is None else poll
        if should_poll:
            self._thread = threading.Thread(target=self._poll_loop, name="shapeshift-lease", daemon=True)
            self._thread.start()
        if handle_sigterm and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda signum, frame: self._revoked.set())

    @property
    def revoked(self) -> bool:
        """The local flag: cheap enough to check every step."""
        return self._revoked.is_set()

    def revoke(self) -> None:
        self._revoked.set()

    def agree(self, all_reduce_max: Callable[[int], int] | None = None) -> bool:
        """Phase two for distributed jobs: ``all_reduce_max(local_flag)`` returns the maximum
        over ranks, so every rank sees the same answer at the same iteration."""
        flag = int(self.revoked)
        return bool(all_reduce_max(flag)) if all_reduce_max is not None else bool(flag)

    def close(self) -> None:
        self._closed.set()

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _poll_loop(self) -> None:
        url = f"{self.env.controller}/jobs/{self.env.job_id}/lease?key={self.env.lease_key}"
        while not self._closed.wait(self.poll_interval):
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if json.loads(response.read()).get("revoked"):
                        self._revoked.set()
                        return
            except Exception:
                continue  # optimistic: an unreachable controller does not revoke the lease
