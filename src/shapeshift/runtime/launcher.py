"""The controller as the engine's ``Executor``: a launch becomes a *run* (one process per
GPU rank), written to the store before its processes start; a stop revokes the run's
lease and gives it ``stop_grace`` seconds to checkpoint; a reconfiguration is a stop
followed by a launch that waits until the old ranks have let go of their slots."""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from shapeshift.engine.engine import Engine
from shapeshift.engine.state import JobStatus
from shapeshift.model import Allocation, ClusterSpec
from shapeshift.runtime import store as st
from shapeshift.runtime.backends.base import Backend, RankLaunch, RunId
from shapeshift.runtime.isolation import JobIdentity, JobUidRange
from shapeshift.runtime.jobfile import JobFile, render_command
from shapeshift.runtime.live_run import LiveRun, allocation_to_json, effective_plan, plan_json, short_plan
from shapeshift.runtime.ports import RendezvousPorts
from shapeshift.runtime.store import RunRecord, Store, crash_point

#: The controller's own settings that lead to its secrets; a job never inherits them.
PRIVATE_ENV = frozenset({"SHAPESHIFT_STATE", "SHAPESHIFT_TOKEN"})


class Launcher:
    """Mixin of ``Controller``: launching, stopping and laying out runs."""

    state_dir: Path
    work_dir: Path
    job_user: JobIdentity | None
    cluster: ClusterSpec
    store: Store
    backend: Backend
    url: str
    stop_grace: float
    runs: dict[str, LiveRun]
    stopping: list[LiveRun]
    #: ``slots[node][gpu]`` = the runs whose ranks use that GPU slot (two or more only on a
    #: cluster whose ``gpu_share_limit`` lets jobs share GPUs).
    slots: dict[int, dict[int, list[RunId]]]
    #: Rendezvous ports (``MASTER_PORT``) of the runs laid out and not yet released.
    rendezvous: RendezvousPorts
    engine: Engine
    _jobs: dict[str, JobFile]
    _adopting: dict[str, Any]
    _reasons: dict[str, str]
    #: Controller._preempt_now: the job state a forced stop records with the run's revocation.
    _stop_records: dict[str, tuple[str, str, dict[str, Any]]]

    # -------------------------------------------------------------- executor
    def on_submit(self, job: JobStatus) -> None:
        spec = job.spec
        job.work_total = float(spec.iterations if spec.iterations is not None else spec.duration or 0.0)

    def launch(self, job: JobStatus, allocation: Allocation, now: float, pause: float) -> None:
        job.last_update = now
        job.stall_until = now
        adopted = self._adopting.pop(job.job_id, None)
        if adopted is not None:
            run = LiveRun(
                job.job_id, adopted.attempt, allocation, adopted.lease_key, spawned=True, started=adopted.started
            )
            run.ranks = [self._rank_from_record(r) for r in adopted.ranks]
            self.runs[job.job_id] = run
            self._hold_slots(run)
            return
        row = self.store.job(job.job_id) or {}
        attempt = int(row.get("attempts", 0)) + 1
        spec = self._jobs[job.job_id]
        rate_hint = (spec.duration / spec.iterations) if spec.duration and spec.iterations else 0.0
        job.rate = (1.0 / rate_hint) if rate_hint else (0.0 if spec.iterations else 1.0)
        if spec.model and spec.iterations:
            job.rate = 0.0  # a plan-aware policy must learn the speed from reports, not from a guess
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
        run = self.runs.get(job.job_id)
        state, detail, fields = self._stop_records.get(job.job_id) or (
            st.QUEUED,
            "preempted",
            {"reason": "preempted; waiting to resume"},
        )
        revoke = (run.attempt, {"state": "stopping", "revoked": 1}) if run is not None and run.spawned else None
        # the job's new state and the run's revocation together, before any signal is sent
        self.store.transition(job.job_id, state, now, detail, run=revoke, unless_terminal=True, **fields)
        self.runs.pop(job.job_id, None)
        job.rate = 0.0
        if run is None or not run.spawned:
            if run is not None:
                self.rendezvous.release(run.run_id)  # laid out, never started
            return
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
            if not run.spawned and not run.launch_error:
                self._try_spawn(run, now)

    def _try_spawn(self, run: LiveRun, now: float) -> None:
        """Start a run once the slots it needs are free (a stopping run may still hold them)."""
        chosen = self._shared_slots(run) if self.engine.sharing is not None else self._free_slots(run)
        if chosen is None:
            return
        if any(r.job_id == run.job_id for r in self.stopping):
            return  # the previous attempt is still checkpointing
        if self._uid_taken(run):
            return  # another job with the same uid from the range still runs
        try:
            run.ranks = self._layout(run, chosen)
        except Exception as exc:  # this job's problem alone; the next tick records the failure
            run.launch_error = f"{type(exc).__name__}: {exc}"
            return
        self._hold_slots(run)
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
        run.started = now
        try:
            self.backend.spawn(run.run_id, run.ranks)
        except Exception as exc:  # argument list too long, a NUL byte, no such node...
            run.launch_error = f"{type(exc).__name__}: {exc}"
            self.backend.kill(run.run_id)  # the ranks that did start
        crash_point("after_run_start")

    def _uid_taken(self, run: LiveRun) -> bool:
        """Whether a started run of another job holds the uid this job would get: two
        jobs sharing a uid could read and signal each other."""
        if not isinstance(self.job_user, JobUidRange):
            return False
        uid = self.job_user.uid_of(run.job_id)
        others = [r for r in self.runs.values() if r.spawned] + self.stopping
        return any(r.job_id != run.job_id and self.job_user.uid_of(r.job_id) == uid for r in others)

    def _free_slots(self, run: LiveRun) -> dict[int, list[int]] | None:
        """One job per GPU: the lowest free slots of each node, or ``None`` to wait."""
        chosen: dict[int, list[int]] = {}
        for node, res in run.allocation.placement:
            capacity = self.cluster.nodes[node].gpus
            free = [s for s in range(capacity) if not self.slots[node].get(s)]
            if len(free) < res.gpus:
                return None
            chosen[node] = free[: res.gpus]
        return chosen

    def _shared_slots(self, run: LiveRun) -> dict[int, list[int]] | None:
        """On a sharing cluster: exactly the GPUs the engine's ledger gave the job, so two
        jobs the policy put on one GPU run their ranks on the same slot (the same
        ``CUDA_VISIBLE_DEVICES``). Wait (``None``) while a slot is still held by a run
        the ledger no longer lists there: a stopped run that is still checkpointing."""
        ledger = self.engine.sharing
        assert ledger is not None
        chosen: dict[int, list[int]] = {}
        for node, gpu in ledger.devices.get(run.job_id, ()):
            partners = set(ledger.occupants(node, gpu))
            if any(holder[0] not in partners for holder in self.slots[node].get(gpu, ())):
                return None
            chosen.setdefault(node, []).append(gpu)
        return chosen

    def _hold_slots(self, run: LiveRun) -> None:
        for r in run.ranks:
            for slot in r.slots:
                self.slots[r.node].setdefault(slot, []).append(run.run_id)

    def job_dir(self, job_id: str) -> Path:
        """Outside the state directory (``work_dir``), so a job cannot walk to the token."""
        return self.work_dir / job_id

    def _layout(self, run: LiveRun, chosen: dict[int, list[int]]) -> list[RankLaunch]:
        job = self._jobs[run.job_id]
        plan = effective_plan(job.execution_plan, run.allocation)
        run_dir = self.job_dir(run.job_id) / f"attempt{run.attempt}"
        ckpt = self.job_dir(run.job_id) / "checkpoint"
        self.work_dir.mkdir(mode=0o711, parents=True, exist_ok=True)  # traversable, not listable
        ckpt.mkdir(mode=0o700, parents=True, exist_ok=True)  # private: checkpoints
        # The controller's, never the job's: the wrapper writes exit files there as the
        # controller's user, and would follow a link a job-owned directory let the job plant.
        run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # may hold secrets
        user = self.job_user.for_job(run.job_id) if self.job_user is not None else None
        if user is not None:
            user.give(ckpt)  # 0700 and the job's: no other job's uid may enter it
        per_node = [(node, slots) for node, slots in sorted(chosen.items())] or [(run.allocation.nodes[0], [])]
        world = max(sum(len(s) for _, s in per_node), 1)
        layout = [[self.cluster.nodes[n].name, len(s) or 1] for n, s in per_node]
        master_port = self.rendezvous.take(run.run_id)
        gpus_visible = _real_gpu_count() > 0
        ranks: list[RankLaunch] = []
        rank = 0
        for node_rank, (node, slots) in enumerate(per_node):
            for local_rank, slot in enumerate(slots or [None]):
                fields = job.template_values(run.job_id, str(ckpt), world, rank, sys.executable)
                fields["plan"] = str(plan)
                argv = render_command(job.command, fields)
                if user is not None:
                    argv = user.wrap(argv)
                env = {
                    **{k: v for k, v in os.environ.items() if k not in PRIVATE_ENV},
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
        self.rendezvous.release(run.run_id)
        for node_slots in self.slots.values():
            for slot in [s for s, holders in node_slots.items() if run.run_id in holders]:
                node_slots[slot].remove(run.run_id)
                if not node_slots[slot]:
                    del node_slots[slot]

    def _placement_text(self, alloc: Allocation) -> str:
        return ",".join(f"{self.cluster.nodes[n].name}:{r.gpus}" for n, r in alloc.placement)

    def node_table(self) -> list[dict[str, Any]]:
        """Per node: capacity, used slots and which jobs hold them (read by the API)."""
        result = []
        dead = self.backend.dead_nodes()
        for i, node in enumerate(self.cluster.nodes):
            owners = {slot: list(holders) for slot, holders in self.slots.get(i, {}).items() if holders}
            jobs = sorted({job for holders in owners.values() for job, _ in holders}, key=int)
            result.append(
                {
                    "name": node.name,
                    "gpus": node.gpus,
                    "used": len(owners),
                    "free": node.gpus - len(owners),
                    "jobs": jobs,
                    "gpu_type": node.gpu_type,
                    "down": node.name in dead,
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
