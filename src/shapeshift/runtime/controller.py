"""The live controller: the engine driven by a polling loop over the wall clock.

It is the real version of the loop in ``tests/test_wallclock.py``. Each tick it picks up
new submissions and cancellations from the store, folds in metric reports, polls the
backend for exited ranks (completion, failure), lets the engine decide and reconcile,
and persists what changed. The controller is also the engine's ``Executor``: a launch
becomes a *run* (one process per GPU rank) that is written to the store before its
processes start, a stop revokes the run's lease and gives it ``stop_grace`` seconds to
checkpoint, and a reconfiguration is a stop followed by a launch with the new plan that
waits until the old ranks have let go of their slots.

Only the control-loop thread touches the engine; the HTTP API talks to the store and to
a queue of metric reports, so there is no lock around scheduling state.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import secrets
import shlex
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shapeshift.client.lease import PREEMPTED_EXIT
from shapeshift.engine.engine import Engine
from shapeshift.engine.overheads import Overheads
from shapeshift.engine.state import JobState, JobStatus
from shapeshift.model import Allocation, ClusterSpec, ExecutionPlan, Resources, Schedule
from shapeshift.policies.base import ROUND, Policy, PolicyError
from shapeshift.runtime import store as st
from shapeshift.runtime.backends.base import VANISHED, Backend, RankLaunch, RunId
from shapeshift.runtime.jobfile import JobFile, job_from_json
from shapeshift.runtime.store import RunRecord, Store

log = logging.getLogger("shapeshift.controller")

TOKEN_FILE = "token"
ADDRESS_FILE = "controller.json"
DB_FILE = "state.db"


def ensure_token(state_dir: Path) -> str:
    """The bearer token for mutating requests; generated (mode 0600) on first start."""
    path = state_dir / TOKEN_FILE
    if path.exists():
        return path.read_text().strip()
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def allocation_to_json(alloc: Allocation) -> dict[str, Any]:
    return {
        "placement": [[n, r.gpus, r.cpus, r.mem_gb] for n, r in alloc.placement],
        "plan": str(alloc.plan) if alloc.plan is not None else None,
    }


def allocation_from_json(data: dict[str, Any]) -> Allocation:
    plan = ExecutionPlan.parse(data["plan"]) if data.get("plan") else None
    return Allocation(tuple((int(n), Resources(int(g), float(c), float(m))) for n, g, c, m in data["placement"]), plan)


def effective_plan(spec_plan: ExecutionPlan | None, alloc: Allocation) -> ExecutionPlan:
    """The plan a run executes: the policy's, else the requested one if it fits, else pure DP."""
    if alloc.plan is not None:
        return alloc.plan
    if spec_plan is not None and spec_plan.gpus == alloc.gpus:
        return spec_plan
    return ExecutionPlan(dp=max(alloc.gpus, 1))


def short_plan(plan: ExecutionPlan) -> str:
    """``dp=2,ga=2``: only what differs from the defaults (``dp`` always shown)."""
    default = ExecutionPlan()
    parts = [f"dp={plan.dp}"]
    for key, attr in (("tp", "tp"), ("pp", "pp"), ("ga", "grad_accum"), ("mb", "micro_batches")):
        if getattr(plan, attr) != getattr(default, attr):
            parts.append(f"{key}={getattr(plan, attr)}")
    if plan.zero is not default.zero:
        parts.append(f"zero={plan.zero.value}")
    if plan.grad_ckpt:
        parts.append("gc=1")
    return ",".join(parts)


def plan_json(plan: ExecutionPlan) -> str:
    return json.dumps(
        {
            "dp": plan.dp,
            "tp": plan.tp,
            "pp": plan.pp,
            "zero": plan.zero.value,
            "grad_accum": plan.grad_accum,
            "grad_ckpt": plan.grad_ckpt,
            "micro_batches": plan.micro_batches,
        }
    )


@dataclass
class LiveRun:
    """An attempt in memory: its record, its ranks, and whether it is being stopped."""

    job_id: str
    attempt: int
    allocation: Allocation
    lease_key: str
    ranks: list[RankLaunch] = field(default_factory=list)
    spawned: bool = False
    deadline: float | None = None  # set when stopping: SIGKILL after this wall time
    killed: bool = False

    @property
    def run_id(self) -> RunId:
        return (self.job_id, self.attempt)


class Controller:
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
    ):
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.token = ensure_token(self.state_dir)
        self.store = Store(self.state_dir / DB_FILE)
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
        self.engine = Engine(cluster, policy, self, Overheads(restore_penalty=0.0), on_decision=self._on_decision)
        self.runs: dict[str, LiveRun] = {}  # current run of each running job
        self.stopping: list[LiveRun] = []  # runs asked to stop, holding their slots until they exit
        self.slots: dict[int, dict[int, RunId]] = {i: {} for i in range(len(cluster.nodes))}
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

    # ------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Recover persisted state, start the API server and the control loop."""
        from shapeshift.runtime.api import make_server

        self._recover(time.time())
        self._server = make_server(self, self.host, self.port)
        self.port = self._server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        address = self.state_dir / ADDRESS_FILE
        tmp = address.with_suffix(".tmp")
        tmp.write_text(json.dumps({"url": self.url, "pid": os.getpid(), "backend": self.backend.name}))
        os.replace(tmp, address)
        for target, name in ((self._server.serve_forever, "api"), (self._loop, "control")):
            thread = threading.Thread(target=target, name=f"shapeshift-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def shutdown(self) -> None:
        """Stop serving. Running jobs keep running: a restarted controller re-adopts them."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self.backend.close()
        self.store.close()

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
        self._ingest(now)
        self._drain_reports(now)
        self._cancel(now)
        self._poll_runs(now)
        self._start_deferred(now)
        if self.round_seconds is not None and now >= self._next_round:
            if self.engine.has_work:
                self.engine.fire_timer()
            self._next_round = now + self.round_seconds
        self.engine.step(now)
        self._start_deferred(now)

    def _ingest(self, now: float) -> None:
        for row in self.store.jobs_after(self._last_id):
            self._last_id = max(self._last_id, int(row["id"]))
            if row["state"] != st.QUEUED:
                continue
            self._submit(row, now)

    def _submit(self, row: dict[str, Any], now: float) -> JobStatus:
        job = job_from_json(row["spec"])
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
            step = float(item.get("step", status.work_done))
            status.work_done = min(step, status.work_total)
            status.last_update = now
            status.stall_until = now
            fields: dict[str, Any] = {"progress": status.work_done}
            if item.get("iter_time"):
                status.rate = 1.0 / item["iter_time"] if status.spec.iterations else 1.0
                fields["iter_time"] = item["iter_time"]
            if "loss" in item:
                fields["loss"] = item["loss"]
            self.store.update_job(job_id, **fields)

    def _cancel(self, now: float) -> None:
        for job_id in self.store.cancel_requests():
            status = self.engine.jobs.get(job_id)
            if status is not None and status.state is JobState.RUNNING:
                self._preempt_now(job_id, now, kill=True)
            self._withdraw(job_id)
            self.store.set_state(job_id, st.CANCELLED, now, "cancelled by user", end_time=now, reason="")

    def _poll_runs(self, now: float) -> None:
        for run in list(self.stopping):
            codes = self.backend.poll(run.run_id)
            if all(c is not None for c in codes):
                self._finish_stopping(run, codes, now)
            elif run.deadline is not None and now >= run.deadline and not run.killed:
                self.backend.kill(run.run_id)
                run.killed = True
        for job_id, run in list(self.runs.items()):
            if not run.spawned:
                continue
            codes = self.backend.poll(run.run_id)
            failed = [(r, c) for r, c in enumerate(codes) if c is not None and c != 0]
            if failed:
                self._fail_over(job_id, failed, now)
            elif all(c == 0 for c in codes):
                self._complete(job_id, run, now)

    def _complete(self, job_id: str, run: LiveRun, now: float) -> None:
        status = self.engine.jobs[job_id]
        self.engine.complete(job_id, now)
        del self.runs[job_id]
        self._release(run)
        self.store.update_run(job_id, run.attempt, state="done")
        self.store.set_state(job_id, st.COMPLETED, now, end_time=now, progress=status.work_total, reason="")

    def _finish_stopping(self, run: LiveRun, codes: list[int | None], now: float) -> None:
        self.stopping.remove(run)
        self._release(run)
        self.store.update_run(run.job_id, run.attempt, state="done")
        status = self.engine.jobs.get(run.job_id)
        # A job that finished all its work just as it was preempted is complete, not queued.
        if all(c == 0 for c in codes) and status is not None and status.state is JobState.PENDING:
            self._withdraw(run.job_id)
            self.store.set_state(run.job_id, st.COMPLETED, now, "finished while stopping", end_time=now, reason="")

    def _fail_over(self, job_id: str, failed: list[tuple[int, int | None]], now: float) -> None:
        rank, code = failed[0]
        what = "vanished" if code == VANISHED else f"exited with {code}"
        if code == PREEMPTED_EXIT:
            what = "stopped itself (lease revoked?)"
        self._preempt_now(job_id, now, kill=True)
        row = self.store.job(job_id) or {}
        failures = int(row.get("failures", 0)) + 1
        job = self._jobs[job_id]
        detail = f"rank {rank} {what}"
        if failures > job.max_retries:
            self._withdraw(job_id)
            reason = f"{detail}; gave up after {failures} failures"
            self.store.set_state(job_id, st.FAILED, now, reason, failures=failures, end_time=now, result=reason)
        else:
            reason = f"requeued from last checkpoint after failure ({detail})"
            self.store.set_state(job_id, st.QUEUED, now, reason, failures=failures, reason=reason, result=detail)
            self._reasons[job_id] = reason

    def _preempt_now(self, job_id: str, now: float, *, kill: bool) -> None:
        """Take a running job's resources away outside a policy decision (failure, cancel)."""
        run = self.runs.get(job_id)
        self.engine.reconcile(Schedule(base=dict(self.engine.allocations), changes={job_id: None}), now)
        if kill and run is not None:
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
        self._reasons.pop(job_id, None)

    # -------------------------------------------------------------- executor
    def on_submit(self, job: JobStatus) -> None:
        spec = job.spec
        job.work_total = float(spec.iterations if spec.iterations is not None else spec.duration or 0.0)

    def launch(self, job: JobStatus, allocation: Allocation, now: float, pause: float) -> None:
        job.last_update = now
        job.stall_until = now
        adopted = self._adopting.pop(job.job_id, None)
        if adopted is not None:
            run = LiveRun(job.job_id, adopted.attempt, allocation, adopted.lease_key, spawned=True)
            run.ranks = [self._rank_from_record(r) for r in adopted.ranks]
            self.runs[job.job_id] = run
            for r in run.ranks:
                for slot in r.slots:
                    self.slots[r.node][slot] = run.run_id
            return
        row = self.store.job(job.job_id) or {}
        attempt = int(row.get("attempts", 0)) + 1
        spec = self._jobs[job.job_id]
        rate_hint = (spec.duration / spec.iterations) if spec.duration and spec.iterations else 0.0
        job.rate = (1.0 / rate_hint) if rate_hint else (0.0 if spec.iterations else 1.0)
        run = LiveRun(job.job_id, attempt, allocation, secrets.token_urlsafe(16))
        self.runs[job.job_id] = run
        plan = effective_plan(job.spec.plan, allocation)
        fields: dict[str, Any] = {
            "attempts": attempt,
            "plan": short_plan(plan),
            "placement": self._placement_text(allocation),
            "reason": "",
        }
        if row.get("first_start") is None:
            fields["first_start"] = now
        self.store.set_state(job.job_id, st.RUNNING, now, f"attempt {attempt} on {fields['placement']}", **fields)
        self._reasons.pop(job.job_id, None)
        self._try_spawn(run, now)

    def stop(self, job: JobStatus, now: float) -> None:
        run = self.runs.pop(job.job_id, None)
        job.rate = 0.0
        self.store.set_state(job.job_id, st.QUEUED, now, "preempted", reason="preempted; waiting to resume")
        if run is None or not run.spawned:
            return
        self.store.update_run(run.job_id, run.attempt, state="stopping", revoked=1)
        self.backend.terminate(run.run_id)
        run.deadline = now + self.stop_grace
        self.stopping.append(run)

    def reconfigure(self, job: JobStatus, allocation: Allocation, now: float, pause: float) -> None:
        self.store.event("reconfigured", job.job_id, f"to {short_plan(effective_plan(job.spec.plan, allocation))}", now)
        self.stop(job, now)
        self.launch(job, allocation, now, pause)

    # --------------------------------------------------------------- spawning
    def _start_deferred(self, now: float) -> None:
        for run in list(self.runs.values()):
            if not run.spawned:
                self._try_spawn(run, now)

    def _try_spawn(self, run: LiveRun, now: float) -> None:
        """Start a run once the slots it needs are free (a stopping run may still hold them)."""
        chosen: dict[int, list[int]] = {}
        for node, res in run.allocation.placement:
            capacity = self.cluster.nodes[node].gpus
            free = [s for s in range(capacity) if s not in self.slots[node]]
            if len(free) < res.gpus:
                return
            chosen[node] = free[: res.gpus]
        if any(r.job_id == run.job_id for r in self.stopping):
            return  # the previous attempt is still checkpointing
        run.ranks = self._layout(run, chosen)
        for r in run.ranks:
            for slot in r.slots:
                self.slots[r.node][slot] = run.run_id
        record = RunRecord(
            job_id=run.job_id,
            attempt=run.attempt,
            allocation=allocation_to_json(run.allocation),
            ranks=[
                {
                    "rank": r.rank,
                    "node": r.node,
                    "node_name": r.node_name,
                    "log": r.log,
                    "exit": r.exit_file,
                    "slots": list(r.slots),
                }
                for r in run.ranks
            ],
            lease_key=run.lease_key,
            state="active",
            revoked=False,
            started=now,
        )
        self.store.add_run(record)  # persisted before any process exists
        run.spawned = True
        self.backend.spawn(run.run_id, run.ranks)

    def job_dir(self, job_id: str) -> Path:
        return self.state_dir / "jobs" / job_id

    def _layout(self, run: LiveRun, chosen: dict[int, list[int]]) -> list[RankLaunch]:
        job = self._jobs[run.job_id]
        plan = effective_plan(job.execution_plan, run.allocation)
        run_dir = self.job_dir(run.job_id) / f"attempt{run.attempt}"
        ckpt = self.job_dir(run.job_id) / "checkpoint"
        ckpt.mkdir(parents=True, exist_ok=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        per_node = [(node, slots) for node, slots in sorted(chosen.items())] or [(run.allocation.nodes[0], [])]
        world = max(sum(len(s) for _, s in per_node), 1)
        layout = [[self.cluster.nodes[n].name, len(s) or 1] for n, s in per_node]
        master_port = free_port()
        gpus_visible = _real_gpu_count() > 0
        ranks: list[RankLaunch] = []
        rank = 0
        for node_rank, (node, slots) in enumerate(per_node):
            for local_rank, slot in enumerate(slots or [None]):
                fields = {
                    "job_id": run.job_id,
                    "name": job.name,
                    "iterations": job.iterations if job.iterations is not None else "",
                    "global_batch": job.global_batch if job.global_batch is not None else "",
                    "model": job.model,
                    "plan": str(plan),
                    "checkpoint_dir": str(ckpt),
                    "world_size": world,
                    "rank": rank,
                    "python": sys.executable,
                }
                argv = tuple(shlex.split(job.command.format(**fields)))
                env = {
                    **os.environ,
                    **job.env,
                    "SHAPESHIFT_JOB_ID": run.job_id,
                    "SHAPESHIFT_ATTEMPT": str(run.attempt),
                    "SHAPESHIFT_PLAN": plan_json(plan),
                    "SHAPESHIFT_PLAN_TEXT": str(plan),
                    "SHAPESHIFT_RANK_LAYOUT": json.dumps(layout),
                    "SHAPESHIFT_CHECKPOINT_DIR": str(ckpt),
                    "SHAPESHIFT_CONTROLLER": self.url,
                    "SHAPESHIFT_LEASE_KEY": run.lease_key,
                    "SHAPESHIFT_ITERATIONS": str(fields["iterations"]),
                    "SHAPESHIFT_GLOBAL_BATCH": str(fields["global_batch"]),
                    "SHAPESHIFT_NODE": self.cluster.nodes[node].name,
                    "SHAPESHIFT_GPU_SLOTS": "" if slot is None else str(slot),
                    "WORLD_SIZE": str(world),
                    "RANK": str(rank),
                    "LOCAL_RANK": str(local_rank),
                    "LOCAL_WORLD_SIZE": str(len(slots) or 1),
                    "NODE_RANK": str(node_rank),
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(master_port),
                }
                if gpus_visible:
                    env["CUDA_VISIBLE_DEVICES"] = "" if slot is None else str(slot)
                ranks.append(
                    RankLaunch(
                        rank=rank,
                        node=node,
                        node_name=self.cluster.nodes[node].name,
                        argv=argv,
                        env=env,
                        log=str(run_dir / f"rank{rank}.log"),
                        exit_file=str(run_dir / f"rank{rank}.exit"),
                        slots=() if slot is None else (slot,),
                    )
                )
                rank += 1
        return ranks

    def _rank_from_record(self, r: dict[str, Any]) -> RankLaunch:
        return RankLaunch(
            rank=r["rank"],
            node=r["node"],
            node_name=r["node_name"],
            argv=(),
            env={},
            log=r["log"],
            exit_file=r["exit"],
            slots=tuple(r["slots"]),
        )

    def _release(self, run: LiveRun) -> None:
        self.backend.forget(run.run_id)
        for node_slots in self.slots.values():
            for slot in [s for s, owner in node_slots.items() if owner == run.run_id]:
                del node_slots[slot]

    def _placement_text(self, alloc: Allocation) -> str:
        return ",".join(f"{self.cluster.nodes[n].name}:{r.gpus}" for n, r in alloc.placement)

    # -------------------------------------------------------------- decisions
    def _on_decision(self, now: float, schedule: Schedule) -> None:
        for part in self.engine.pending.values():
            for job_id in part:
                reason = schedule.reasons.get(job_id) or self._reasons.get(job_id) or schedule.default_reason
                if self._reasons.get(job_id) != reason:
                    self._reasons[job_id] = reason
                    self.store.update_job(job_id, reason=reason)

    # ---------------------------------------------------------------- recovery
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
            for r in run.ranks:
                for slot in r.slots:
                    self.slots[r.node][slot] = run.run_id
            self.stopping.append(run)
        for record in self.store.runs(state="active"):
            if record.job_id not in live or self.engine.jobs[record.job_id].state is not JobState.PENDING:
                self.store.update_run(record.job_id, record.attempt, state="done")
                continue
            ranks = [self._rank_from_record(r) for r in record.ranks]
            self.backend.adopt((record.job_id, record.attempt), ranks)
            codes = self.backend.poll((record.job_id, record.attempt))
            alloc = allocation_from_json(record.allocation)
            if all(c in (None, 0) for c in codes):
                self._adopting[record.job_id] = record
                try:
                    self.engine.reconcile(
                        Schedule(base=dict(self.engine.allocations), changes={record.job_id: alloc}), now
                    )
                    self.store.event("adopted", record.job_id, f"attempt {record.attempt}", now)
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

    # ------------------------------------------------------------------ views
    def node_table(self) -> list[dict[str, Any]]:
        """Per node: capacity, used slots and which jobs hold them (read by the API)."""
        result = []
        for i, node in enumerate(self.cluster.nodes):
            owners = dict(self.slots.get(i, {}))
            jobs = sorted({job for job, _ in owners.values()}, key=int)
            result.append(
                {
                    "name": node.name,
                    "gpus": node.gpus,
                    "used": len(owners),
                    "free": node.gpus - len(owners),
                    "jobs": jobs,
                    "gpu_type": node.gpu_type,
                }
            )
        return result


_GPU_COUNT: int | None = None


def _real_gpu_count() -> int:
    """Physical GPUs visible here (0 on CPU machines: slots are then purely logical)."""
    global _GPU_COUNT
    if _GPU_COUNT is None:
        override = os.environ.get("SHAPESHIFT_REAL_GPUS")
        _GPU_COUNT = int(override) if override is not None else len(list(Path("/dev").glob("nvidia[0-9]*")))
    return _GPU_COUNT
