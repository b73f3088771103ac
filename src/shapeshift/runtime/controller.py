"""The live controller: the engine driven by a polling loop over the wall clock.

It is the real version of the loop in ``tests/engine/test_wallclock.py``. Each tick it picks up
new submissions and cancellations from the store, folds in metric reports, polls the
backend for exited ranks (completion, failure), lets the engine decide and reconcile,
and persists what changed. The controller is also the engine's ``Executor``
(``launcher``), and rebuilds its state after a restart (``recovery``).

Only the control-loop thread touches the engine; the HTTP API talks to the store and to
a queue of metric reports, so there is no lock around scheduling state.

Every transition is persisted in ONE store transaction *before* memory changes, so a
crash or a failed write (the tick raises, the next tick retries) never leaves a finished
run on a running job (it would run again) nor a failure uncounted (``max_retries`` would
be bypassed). A launch that cannot start is a failure of that job alone.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

from shapeshift.client.lease import PREEMPTED_EXIT
from shapeshift.engine.contract import ROUND, Policy
from shapeshift.engine.engine import Engine
from shapeshift.engine.overheads import Overheads
from shapeshift.engine.state import JobState, JobStatus
from shapeshift.model import ClusterSpec, Schedule
from shapeshift.predict.primo_duration import EXPLAIN_SEPARATOR, with_explanation
from shapeshift.runtime import store as st
from shapeshift.runtime.admission import Admission
from shapeshift.runtime.backends.base import VANISHED, Backend, RunId
from shapeshift.runtime.isolation import JobIdentity
from shapeshift.runtime.jobfile import JobFile, job_from_json
from shapeshift.runtime.live_run import (
    LiveRun,
    allocation_from_json,
    allocation_to_json,
    effective_plan,
    plan_json,
    short_plan,
)
from shapeshift.runtime.metrics_export import DecisionStats, time_decisions
from shapeshift.runtime.perf_live import predicted_iter_time
from shapeshift.runtime.ports import RendezvousPorts
from shapeshift.runtime.recovery import Recovery
from shapeshift.runtime.service import ServerFactory
from shapeshift.runtime.state_files import (
    ADDRESS_FILE,
    DB_FILE,
    TOKEN_FILE,
    default_work_dir,
    ensure_token,
    prepare_state_dir,
    write_private,
)
from shapeshift.runtime.statelock import StateDirLock
from shapeshift.runtime.store import RunRecord, Store, crash_point
from shapeshift.runtime.supervision import SHUTDOWN_CHOICES, Supervision

__all__ = [
    "ADDRESS_FILE",
    "DB_FILE",
    "TOKEN_FILE",
    "Controller",
    "LiveRun",
    "allocation_from_json",
    "allocation_to_json",
    "effective_plan",
    "ensure_token",
    "plan_json",
    "short_plan",
]

log = logging.getLogger("shapeshift.controller")


#: Seconds between write probes of the state database (what ``/health`` reports).
PROBE_INTERVAL = 2.0


class Controller(Admission, Supervision, Recovery):
    """Engine + store + backend + HTTP API, on wall-clock time."""

    def __init__(
        self,
        state_dir: str | Path,
        cluster: ClusterSpec,
        policy: Policy,
        backend: Backend,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        poll_interval: float = 0.1,
        round_seconds: float | None = None,
        stop_grace: float = 30.0,
        on_shutdown: str = "leave",
        store_timeout: float | None = None,
        work_dir: str | Path | None = None,
        job_user: JobIdentity | None = None,
    ):
        if on_shutdown not in SHUTDOWN_CHOICES:
            raise ValueError(f"on_shutdown must be one of {SHUTDOWN_CHOICES}")
        self.state_dir = Path(state_dir)
        prepare_state_dir(self.state_dir)
        self.work_dir = Path(work_dir) if work_dir is not None else default_work_dir(self.state_dir)
        self.job_user = job_user
        self._lock = StateDirLock(self.state_dir)  # a second controller exits here
        try:
            self.token = ensure_token(self.state_dir)
            self.store = Store(self.state_dir / DB_FILE, write_timeout=store_timeout)
        except BaseException:
            self._lock.release()
            raise
        self.on_shutdown = on_shutdown
        self._stop_records: dict[str, tuple[str, str, dict[str, Any]]] = {}
        self._next_probe = 0.0
        self._cordoned: dict[int, Any] = {}
        self.cluster = cluster
        self.policy = policy
        self.backend = backend
        self.host = host
        self.port = port
        self.poll_interval = poll_interval
        self.stop_grace = stop_grace
        self.round_seconds = round_seconds
        if round_seconds is None and ROUND in policy.triggers:
            self.round_seconds = policy.default_round or 60.0
        self.decision_stats = DecisionStats()
        time_decisions(policy, self.decision_stats)
        self.engine = Engine(cluster, policy, self, Overheads(restore_penalty=0.0), on_decision=self._on_decision)
        self.runs: dict[str, LiveRun] = {}  # current run of each running job
        self.stopping: list[LiveRun] = []  # runs asked to stop, holding their slots until they exit
        self.slots: dict[int, dict[int, list[RunId]]] = {i: {} for i in range(len(cluster.nodes))}
        self.rendezvous = RendezvousPorts()
        self.reports: queue.SimpleQueue[tuple[str, int, list[dict[str, Any]]]] = queue.SimpleQueue()
        self.url = ""
        self._jobs: dict[str, JobFile] = {}
        self._last_id = 0
        self._adopting: dict[str, RunRecord] = {}
        self._reasons: dict[str, str] = {}
        self._next_round = 0.0
        self._stop = threading.Event()
        self._server: Any = None
        self._threads: list[threading.Thread] = []
        self._start_admission()  # the submit thread (group commit); the API may call it from now on

    # ------------------------------------------------------------- lifecycle
    def start(self, server: ServerFactory) -> None:
        """Recover persisted state, start the HTTP server ``server`` builds (e.g.
        ``shapeshift.runtime.api.make_server``) and the control loop."""
        self._recover(time.time())
        self._server = self._bind(server)
        self.port = self._server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        info = {"url": self.url, "pid": os.getpid(), "backend": self.backend.name, "work_dir": str(self.work_dir)}
        write_private(self.state_dir / ADDRESS_FILE, json.dumps(info))
        for target, name in ((self._server.serve_forever, "api"), (self._loop, "control")):
            thread = threading.Thread(target=target, name=f"shapeshift-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _bind(self, server: ServerFactory) -> Any:
        """With port 0, take the previous controller's port again when it is free: the
        re-adopted workers keep reporting to the address they were launched with."""
        if self.port == 0:
            try:
                return server(self, self.host, int(self.store.meta("port") or ""))
            except (OSError, ValueError):
                pass
        handle = server(self, self.host, self.port)
        self.store.set_meta("port", str(handle.server_address[1]))
        return handle

    def shutdown(self) -> None:
        """Stop serving. With ``on_shutdown="leave"`` (default) running jobs keep running
        and a restarted controller re-adopts them; with ``"drain"`` they are stopped (lease
        revoked, ``stop_grace`` seconds to checkpoint) and requeued first."""
        self._stop.set()
        for thread in self._threads:
            if thread.name == "shapeshift-control":
                thread.join(timeout=30)
        if self.on_shutdown == "drain":
            self._drain(time.time())
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._stop_admission()
        self.backend.close()
        self.store.close()
        self._lock.release()

    def wait(self) -> None:
        while not self._stop.wait(0.5):
            pass

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick(time.time())
            except Exception:  # keep serving; the next tick retries
                log.exception("control loop tick failed")
            self._stop.wait(self.poll_interval)

    # ------------------------------------------------------------------ tick
    def tick(self, now: float) -> None:
        if now >= self._next_probe:
            self.store.probe(now)
            self._next_probe = now + PROBE_INTERVAL
        self._ingest(now)
        self._drain_reports(now)
        self._poll_runs(now)  # before cancels: a run that already finished completes
        self._cancel(now)
        self._supervise(now)
        self._start_deferred(now)
        if self.round_seconds is not None and now >= self._next_round:
            if self.engine.has_work:
                self.engine.fire_timer()
            self._next_round = now + self.round_seconds
        if self.engine.wake_at is not None and now >= self.engine.wake_at:
            self.engine.fire_wakeup()
        self._cordon()
        self.engine.step(now)
        self._start_deferred(now)

    def _ingest(self, now: float) -> None:
        for row in self.store.jobs_after(self._last_id):
            self._last_id = max(self._last_id, int(row["id"]))
            if row["state"] != st.QUEUED:
                continue
            self._submit(row, now)
        for job_id in list(self._admitted):  # handed over after its row was read: not needed
            if int(job_id) <= self._last_id:
                self._admitted.pop(job_id, None)

    def _submit(self, row: dict[str, Any], now: float) -> JobStatus:
        # A job admitted by this process is reused as validated; after a restart, parse it.
        job = self._admitted.pop(row["id"], None) or job_from_json(row["spec"])
        self._jobs[row["id"]] = job
        status = self.engine.submit(job.spec(row["id"], row["submit_time"]), now)
        if status.state is JobState.REJECTED:
            self.store.set_state(row["id"], st.REJECTED, now, status.reject_reason, reason=status.reject_reason)
        else:
            status.work_done = float(row["progress"] or 0.0)
        return status

    def _drain_reports(self, now: float) -> None:
        latest: dict[str, dict[str, Any]] = {}
        while True:
            try:
                job_id, attempt, items = self.reports.get_nowait()
            except queue.Empty:
                break
            run = self.runs.get(job_id)
            status = self.engine.jobs.get(job_id)
            if run is None or run.attempt != attempt or status is None or not items:
                continue
            merged = latest.setdefault(job_id, {})
            times = [i["iter_time"] for i in items if "iter_time" in i]
            for item in items:
                merged.update(item)
            if times:
                merged["iter_time"] = sum(times) / len(times)
        for job_id, item in latest.items():
            status = self.engine.jobs[job_id]
            run = self.runs[job_id]
            run.last_report = now
            step = float(item.get("step", status.work_done))
            status.work_done = min(step, status.work_total)
            status.last_update = now
            status.stall_until = now
            self.engine.progress_changed(job_id)
            fields: dict[str, Any] = {"progress": status.work_done}
            if item.get("iter_time"):
                status.rate = 1.0 / item["iter_time"] if status.spec.iterations else 1.0
                fields["iter_time"] = item["iter_time"]
                predicted = predicted_iter_time(self.policy, status.spec.model, status.allocation)
                if predicted is not None:
                    fields["predicted_iter_time"] = predicted
                if not run.observed:
                    run.observed = True
                    self.engine.fire_wakeup()  # a plan-aware policy observes the measured speed
            if "loss" in item:
                fields["loss"] = item["loss"]
            self.store.update_job(job_id, **fields)

    def _cancel(self, now: float) -> None:
        for job_id in self.store.cancel_requests():
            status = self.engine.jobs.get(job_id)
            record = (st.CANCELLED, "cancelled by user", {"end_time": now, "reason": ""})
            if status is not None and status.state is JobState.RUNNING:
                self._preempt_now(job_id, now, kill=True, record=record)
            else:
                self.store.transition(job_id, record[0], now, record[1], unless_terminal=True, **record[2])
            self._withdraw(job_id)

    def _poll_runs(self, now: float) -> None:
        for run in list(self.stopping):
            codes = self.backend.poll(run.run_id)
            if all(c is not None for c in codes):
                self._finish_stopping(run, codes, now)
            elif run.deadline is not None and now >= run.deadline and not run.killed:
                self.backend.kill(run.run_id)
                run.killed = True
        for job_id, run in list(self.runs.items()):
            if run.launch_error:
                self._fail_over(job_id, [], now, detail=f"launch failed: {run.launch_error}")
                continue
            if not run.spawned:
                continue
            codes = self.backend.poll(run.run_id)
            failed = [(r, c) for r, c in enumerate(codes) if c is not None and c != 0]
            if not codes:  # no rank at all: nothing ran, so nothing finished
                failed = [(0, VANISHED)]
            if failed:
                self._fail_over(job_id, failed, now)
            elif all(c == 0 for c in codes):
                self._complete(job_id, run, now, codes)

    def _complete(self, job_id: str, run: LiveRun, now: float, codes: list[int | None]) -> None:
        status = self.engine.jobs[job_id]
        crash_point("before_completion")
        # Run result and job state in one transaction, before memory changes: a crash or a
        # failed write leaves the run active, and the next tick (or restart) completes it.
        self.store.transition(
            job_id,
            st.COMPLETED,
            now,
            run=(run.attempt, {"state": "done", "exit_codes": ",".join(str(c) for c in codes)}),
            end_time=now,
            progress=status.work_total,
            reason="",
        )
        crash_point("after_completion")
        self.engine.complete(job_id, now)
        del self.runs[job_id]
        self._release(run)

    def _finish_stopping(self, run: LiveRun, codes: list[int | None], now: float) -> None:
        self.stopping.remove(run)
        self._release(run)
        self.store.update_run(run.job_id, run.attempt, state="done")
        status = self.engine.jobs.get(run.job_id)
        # A job that finished all its work just as it was preempted is complete, not queued.
        if all(c == 0 for c in codes) and status is not None and status.state is JobState.PENDING:
            self.store.transition(
                run.job_id, st.COMPLETED, now, "finished while stopping", unless_terminal=True, end_time=now, reason=""
            )
            self._withdraw(run.job_id)

    def _fail_over(
        self,
        job_id: str,
        failed: list[tuple[int, int | None]],
        now: float,
        *,
        detail: str = "",
        final: bool = False,
    ) -> None:
        """Record a failed attempt (counted against ``max_retries``) and stop its ranks.

        The failure, the new job state and the run's revocation are one transaction
        written before any rank is killed, so a crash in between cannot lose the count."""
        if not detail:
            rank, code = failed[0]
            what = "vanished" if code == VANISHED else f"exited with {code}"
            if code == PREEMPTED_EXIT:
                what = "stopped itself (lease revoked?)"
            detail = f"rank {rank} {what}"
        row = self.store.job(job_id) or {}
        failures = int(row.get("failures", 0)) + 1
        job = self._jobs[job_id]
        if final or failures > job.max_retries:
            reason = detail if final else f"{detail}; gave up after {failures} failures"
            fields = {"failures": failures, "end_time": now, "result": reason, "reason": reason}
            self._preempt_now(job_id, now, kill=True, record=(st.FAILED, reason, fields))
            self._withdraw(job_id)
        else:
            reason = f"requeued from last checkpoint after failure ({detail})"
            fields = {"failures": failures, "reason": reason, "result": detail}
            self._preempt_now(job_id, now, kill=True, record=(st.QUEUED, reason, fields))
            self._reasons[job_id] = reason

    def _preempt_now(
        self, job_id: str, now: float, *, kill: bool, record: tuple[str, str, dict[str, Any]] | None = None
    ) -> None:
        """Take a running job's resources away outside a policy decision (failure, cancel);
        ``record`` is the job's new state, written with the run's revocation (``stop``)."""
        run = self.runs.get(job_id)
        if record is not None:
            self._stop_records[job_id] = record
        self.engine.reconcile(Schedule(base=dict(self.engine.allocations), changes={job_id: None}), now)
        self._stop_records.pop(job_id, None)
        crash_point("during_failover")
        if kill and run is not None and run.spawned:
            self.backend.kill(run.run_id)
            run.killed = True
        self.engine.fire_timer()

    def _withdraw(self, job_id: str) -> None:
        """Remove a waiting job from the engine's queue for good (cancelled or failed)."""
        status = self.engine.jobs.get(job_id)
        if status is None:
            return
        self.engine.pending[status.partition].pop(job_id, None)
        status.state = JobState.UNFINISHED
        self.engine.progress_changed(job_id)  # policies that track jobs let it go
        self._reasons.pop(job_id, None)

    # -------------------------------------------------------------- decisions
    def _on_decision(self, now: float, schedule: Schedule) -> None:
        changed: dict[str, dict[str, Any]] = {}
        for part in self.engine.pending.values():
            for job_id in part:
                reason = schedule.reasons.get(job_id) or self._reasons.get(job_id) or schedule.default_reason
                reason = with_explanation(reason.split(EXPLAIN_SEPARATOR)[0], self.policy, job_id)
                if self._reasons.get(job_id) != reason:
                    changed[job_id] = {"reason": reason}
        if changed:  # one transaction for the whole decision (a burst queues hundreds at once)
            self.store.update_jobs(changed)
            self._reasons.update((job_id, fields["reason"]) for job_id, fields in changed.items())
