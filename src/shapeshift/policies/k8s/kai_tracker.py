"""The ``kai`` policy's bookkeeping: KAI's kept cycle state (``k8s.kai_rules.KaiState``)
and historical usage (``k8s.kai_usage``) brought up to the engine's state at each
decision, reading only what changed since the last one, and updated after the cycle with
what the engine will run."""

from __future__ import annotations

from collections.abc import Callable

from shapeshift.engine.view import ClusterView
from shapeshift.k8s import kai_rules
from shapeshift.k8s.kai_config import KaiConfig
from shapeshift.k8s.kai_fairshare import with_ancestors
from shapeshift.k8s.kai_usage import UsageAccumulator
from shapeshift.model import GPU_MILLI, Allocation, Schedule


class KaiTracker:
    def __init__(self, config: KaiConfig, job_of: Callable[[ClusterView, str], kai_rules.Job]):
        self.config = config
        self.job_of = job_of
        self.state: kai_rules.KaiState | None = None  # sized at the first decision
        self.capacity = 0.0
        fairness = config.fairness
        self.usage = UsageAccumulator(fairness.half_life_s, fairness.window_s) if fairness.time_based else None
        self._held: dict[str, tuple[str, float]] = {}  # running job -> (queue, GPUs) as usage counts it
        self._waiting: dict[str, int] = {}  # per partition, the engine's waiting jobs the state holds

    def _wait(self, view: ClusterView, job_id: str) -> None:
        assert self.state is not None
        self.state.add_pending(self.job_of(view, job_id))
        partition = view.job(job_id).partition
        self._waiting[partition] = self._waiting.get(partition, 0) + 1

    def _unwait(self, view: ClusterView, job_id: str) -> None:
        assert self.state is not None
        self.state.remove_pending(job_id)
        self._waiting[view.job(job_id).partition] -= 1

    def _run(self, view: ClusterView, job_id: str, started: float, gpus: float) -> None:
        assert self.state is not None
        job = self.job_of(view, job_id)
        self.state.add_running(kai_rules.Running(job, started))
        self._held[job_id] = (job.queue, gpus)
        if self.usage is not None:
            self.usage.start(job.queue, gpus, view.now)

    def _stop(self, view: ClusterView, job_id: str) -> None:
        assert self.state is not None
        self.state.remove_running(job_id)
        queue, gpus = self._held.pop(job_id)
        if self.usage is not None:
            self.usage.stop(queue, gpus, view.now)

    def sync(self, view: ClusterView) -> kai_rules.KaiState:
        """Bring the state up to the engine's: the jobs whose state changed since the last
        decision (``view.touched``: finished, withdrawn, started or stopped elsewhere) and
        the arrivals, which the engine appends to its queues, so they are found from the
        end of each queue without walking the jobs that were already waiting."""
        if self.state is None:
            self.capacity = float(sum(view.capacity_gpus(p) for p in view.partitions))
            self.state = kai_rules.KaiState(self.config, {"gpu": self.capacity})
            for job_id, alloc in view.allocations.items():
                self._run(view, job_id, 0.0, _gpus_held(alloc))
        state = self.state
        held = view.allocations
        for job_id in view.touched:
            alloc = held.get(job_id)
            if alloc is not None:
                if job_id in state.pending:
                    self._unwait(view, job_id)
                if job_id not in state.running:
                    self._run(view, job_id, 0.0, _gpus_held(alloc))
                continue
            if job_id in state.running:
                self._stop(view, job_id)
            waiting = job_id in view.pending(view.job(job_id).partition)
            if waiting and job_id not in state.pending:
                self._wait(view, job_id)
            elif not waiting and job_id in state.pending:
                self._unwait(view, job_id)
        for partition in view.partitions:
            missing = view.pending_count(partition) - self._waiting.get(partition, 0)
            if missing <= 0:
                continue
            queue = view.pending(partition)
            try:
                newest_first = reversed(queue)  # type: ignore[call-overload]
            except TypeError:
                newest_first = list(queue)
            for job_id in newest_first:
                if job_id not in state.pending:
                    self._wait(view, job_id)
                    missing -= 1
                    if not missing:
                        break
        return state

    def historical_usage(self, now: float) -> dict[str, dict[str, float]] | None:
        """Normalized usage per queue (ancestors included), None without time-based fair share."""
        if self.usage is None:
            return None
        return with_ancestors(self.config, {q: {"gpu": u} for q, u in self.usage.usage(self.capacity, now).items()})

    def settle(self, view: ClusterView, outcome: kai_rules.Outcome, evicted: list[str], schedule: Schedule) -> None:
        """After the cycle (which ran its started jobs and queued its evicted ones): the
        engine runs only the placed ones; the others wait again."""
        state = self.state
        assert state is not None
        for job_id in evicted:
            queue, gpus = self._held.pop(job_id)
            if self.usage is not None:
                self.usage.stop(queue, gpus, view.now)
            self._waiting[view.job(job_id).partition] += 1
        for job_id in outcome.started:
            alloc = schedule.allocation(job_id)
            job = self.job_of(view, job_id)
            if alloc is None:
                if job_id in state.running:
                    state.remove_running(job_id)
                    state.add_pending(job)
                continue
            self._waiting[view.job(job_id).partition] -= 1
            self._held[job_id] = (job.queue, _gpus_held(alloc))
            if self.usage is not None:
                self.usage.start(job.queue, _gpus_held(alloc), view.now)


def _gpus_held(alloc: Allocation) -> float:
    """GPUs an allocation holds against its queue: a share of one GPU counts as that share
    (KAI's ``gpu-fraction``, docs/gpu-sharing/README.md)."""
    return float(alloc.gpus) if alloc.gpu_milli is None else alloc.gpu_milli / GPU_MILLI
