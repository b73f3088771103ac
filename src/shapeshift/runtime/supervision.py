"""Liveness of runs the controller watches: time limits, progress heartbeats, and what
happens to running jobs when the controller shuts down.

* **Time limit** (job file ``time_limit``, like Slurm's ``TimeLimit``): an attempt running
  longer is killed and the job fails with "time limit ... exceeded" (not retried: running
  it again would hit the same limit).
* **Heartbeat** (job file ``heartbeat_timeout``, default 300 s): once an attempt has sent a
  metric report, going that long without another counts as a failed rank (hung, e.g.
  stopped with SIGSTOP or deadlocked in a collective): it is killed and requeued from its
  checkpoint, counted against ``max_retries``. Jobs that never report are exempt.
* **Dead nodes** (``Backend.dead_nodes``, e.g. a Ray node that died) are cordoned: the
  controller holds every free resource of the node in the engine, so no policy places a
  new run there; runs already there vanish and are requeued elsewhere; the resources
  come back when the node does.
* **Shutdown** (``serve --on-shutdown``): ``leave`` (default) leaves running jobs running,
  unsupervised until a controller restarts on the same state directory and re-adopts
  them (their leases stay valid meanwhile; metric reports are lost); ``drain`` revokes
  every lease, gives the jobs ``stop_grace`` seconds to checkpoint, kills what remains
  and requeues them, so nothing runs while no controller watches.
"""

from __future__ import annotations

import time
from typing import Any

from shapeshift.engine.engine import Engine
from shapeshift.model import Allocation, ClusterSpec, Resources
from shapeshift.runtime import store as st
from shapeshift.runtime.jobfile import JobFile
from shapeshift.runtime.live_run import LiveRun

SHUTDOWN_CHOICES = ("leave", "drain")


class Supervision:
    """Mixin of ``Controller``: time limits, heartbeats and the draining shutdown."""

    engine: Engine
    runs: dict[str, LiveRun]
    stopping: list[LiveRun]
    stop_grace: float
    _jobs: dict[str, JobFile]
    backend: Any
    cluster: ClusterSpec
    #: node index -> resources held back from the engine while the node is dead
    _cordoned: dict[int, Resources]

    def _cordon(self) -> None:
        dead = self.backend.dead_nodes()
        free = self.engine.free
        for i, node in enumerate(self.cluster.nodes):
            held = self._cordoned.get(i)
            if node.name in dead:
                extra = Resources(int(free.gpus[i]), max(float(free.cpus[i]), 0.0), max(float(free.mem[i]), 0.0))
                if extra.gpus or extra.cpus or extra.mem_gb:
                    free.take(Allocation(((i, extra),)))
                    self._cordoned[i] = extra if held is None else held + extra
            elif held is not None:
                free.give(Allocation(((i, held),)))
                del self._cordoned[i]
                self.engine.fire_timer()  # capacity came back: decide again

    def _supervise(self, now: float) -> None:
        for job_id, run in list(self.runs.items()):
            if not run.spawned or run.launch_error:
                continue
            job = self._jobs[job_id]
            if job.time_limit is not None and now - run.started >= job.time_limit:
                detail = f"time limit of {job.time_limit:g} s exceeded (attempt {run.attempt})"
                self._fail_over(job_id, [], now, detail=detail, final=True)  # type: ignore[attr-defined]
            elif (
                job.heartbeat_timeout and run.last_report is not None and now - run.last_report > job.heartbeat_timeout
            ):
                detail = f"no progress report for {job.heartbeat_timeout:g} s (hung?)"
                self._fail_over(job_id, [], now, detail=detail)  # type: ignore[attr-defined]

    def _drain(self, now: float) -> None:
        """Stop every running job and requeue it; called after the control loop has ended."""
        reason = "requeued from last checkpoint: the controller shut down (--on-shutdown drain)"
        for job_id in list(self.runs):
            record = (st.QUEUED, "controller shutdown", {"reason": reason})
            self._preempt_now(job_id, now, kill=False, record=record)  # type: ignore[attr-defined]
        deadline = time.monotonic() + self.stop_grace
        while self.stopping:
            killing = time.monotonic() >= deadline
            for run in list(self.stopping):
                codes = self.backend.poll(run.run_id)
                if all(c is not None for c in codes):
                    self._finish_stopping(run, codes, time.time())  # type: ignore[attr-defined]
                elif killing and not run.killed:
                    self.backend.kill(run.run_id)
                    run.killed = True
            time.sleep(0.05)
