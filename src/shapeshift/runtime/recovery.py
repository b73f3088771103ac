"""Controller restart: rebuild the engine from the store and re-adopt every run it
recorded as active, whatever became of its ranks meanwhile. The first tick then sees
each adopted run as it is: still running (supervised again), finished with every exit
status 0 (completed: it never runs a second time), or with a rank that failed or
vanished while nobody watched (a failure counted against ``max_retries``). Only a run
the cluster can no longer hold is requeued without counting a failure."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from shapeshift.engine.contract import PolicyError
from shapeshift.engine.engine import Engine
from shapeshift.engine.state import JobState
from shapeshift.model import Schedule
from shapeshift.runtime import store as st
from shapeshift.runtime.launcher import Launcher
from shapeshift.runtime.live_run import LiveRun, allocation_from_json

log = logging.getLogger("shapeshift.controller")


class Recovery(Launcher):
    """Mixin of ``Controller``: what a restarted controller does before its first tick."""

    engine: Engine
    _last_id: int
    #: Controller._submit: hands a stored job to the engine.
    _submit: Callable[[dict[str, Any], float], Any]

    def _recover(self, now: float) -> None:
        """Rebuild the engine from the store; re-adopt live runs, requeue the rest."""
        rows = self.store.jobs()
        self._last_id = max((int(r["id"]) for r in rows), default=0)
        live = {r["id"]: r for r in rows if r["state"] not in st.TERMINAL}
        for row in live.values():
            self._submit(row, now)
        for record in self.store.runs(state="stopping"):
            run = LiveRun(record.job_id, record.attempt, allocation_from_json(record.allocation), record.lease_key)
            run.ranks = [self._rank_from_record(r) for r in record.ranks]
            run.spawned, run.deadline = True, now + self.stop_grace
            self.backend.adopt(run.run_id, run.ranks)
            self._hold_slots(run)
            self.stopping.append(run)
        for record in self.store.runs(state="active"):
            if record.job_id not in live or self.engine.jobs[record.job_id].state is not JobState.PENDING:
                self.store.update_run(record.job_id, record.attempt, state="done")
                continue
            ranks = [self._rank_from_record(r) for r in record.ranks]
            self.backend.adopt((record.job_id, record.attempt), ranks)
            codes = self.backend.poll((record.job_id, record.attempt))
            alloc = allocation_from_json(record.allocation)
            self._adopting[record.job_id] = record
            try:
                self.engine.reconcile(Schedule(base=dict(self.engine.allocations), changes={record.job_id: alloc}), now)
                ended = ",".join("running" if c is None else str(c) for c in codes)
                self.store.event("adopted", record.job_id, f"attempt {record.attempt} (ranks: {ended})", now)
                continue
            except PolicyError as exc:  # the cluster changed under the run
                self._adopting.pop(record.job_id, None)
                self.runs.pop(record.job_id, None)
                log.warning("cannot re-adopt job %s: %s", record.job_id, exc)
            self.backend.kill((record.job_id, record.attempt))
            self.backend.forget((record.job_id, record.attempt))
            self.store.update_run(record.job_id, record.attempt, state="done")
            self.store.event("lost", record.job_id, f"attempt {record.attempt} did not survive the restart", now)
        for job_id, row in live.items():
            status = self.engine.jobs[job_id]
            if row["state"] == st.RUNNING and status.state is JobState.PENDING:
                reason = "requeued from last checkpoint after controller restart"
                self.store.set_state(job_id, st.QUEUED, now, reason, reason=reason)
        self.engine.fire_timer()
