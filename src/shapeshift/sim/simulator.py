"""Trace-driven, event-driven simulation.

Time jumps from one event to the next: arrivals (pre-sorted, read by a cursor),
completions (a heap), for round-based policies a round timer that only runs while there
is work, and the exact instant a policy asked to decide again (``Schedule.wake_at``).
Everything that happens at the same instant is applied first (completions, then
arrivals, then the timer and the wake-up) and the policy decides once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from shapeshift.engine.contract import ROUND, Policy
from shapeshift.engine.engine import Engine, Rejection
from shapeshift.engine.overheads import Overheads
from shapeshift.engine.replay import Replaying
from shapeshift.engine.state import JobState, JobStatus
from shapeshift.model import ClusterSpec, JobSpec
from shapeshift.perf.colocation import InterferenceModel
from shapeshift.perf.throughput import ThroughputModel, TraceSpeedModel
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor

ProgressCallback = Callable[[int, int], None]


@dataclass
class SimulationResult:
    policy: str
    workload: str
    cluster: ClusterSpec
    jobs: list[JobStatus]
    rejections: list[Rejection]
    events: int
    decisions: int
    wall_seconds: float
    #: Instants at which the round timer and a wake-up fired (each counted in ``events``):
    #: what a run split by partition merges (``shapeshift.runs.parallel``).
    timer_instants: list[float] = field(default_factory=list)
    wake_instants: list[float] = field(default_factory=list)
    #: The run stopped after ``IDLE_ROUNDS_LIMIT`` unchanged rounds with jobs left.
    stopped_idle: bool = False


#: Unchanged rounds with nothing running or arriving after which a run stops (the jobs
#: left are reported unfinished). Large, because a waiting job can become worth starting
#: only later: under Sia's restart factor age / (age + penalty), a never-started 1-GPU job
#: is worth its GPU only once age > 4.75 x penalty (p = -0.5, lambda_n = 1.1).
IDLE_ROUNDS_LIMIT = 1000


def round_length(policy: Policy, round_seconds: float | None) -> float | None:
    """The round timer to run: the user's, else the policy's default if it needs rounds."""
    if round_seconds is not None:
        if round_seconds <= 0:
            raise ValueError("--round must be > 0 seconds")
        return round_seconds
    if ROUND in policy.triggers:
        if policy.default_round is None:
            raise ValueError(f"policy {policy.name} is round-based; pass --round SECONDS")
        return policy.default_round
    return None


def simulate(
    jobs: Sequence[JobSpec],
    cluster: ClusterSpec,
    policy: Policy,
    *,
    workload_name: str = "workload",
    throughput: ThroughputModel | None = None,
    overheads: Overheads | None = None,
    round_seconds: float | None = None,
    progress: ProgressCallback | None = None,
    interference: InterferenceModel | None = None,
) -> SimulationResult:
    """Run ``jobs`` (sorted by submit time) to completion under ``policy``. ``interference``
    sets the speed of jobs that share GPUs (clusters with ``gpu_share_limit`` above 1)."""
    started = time.perf_counter()
    hand_replay(policy)
    completions = CompletionQueue()
    executor = SimulatedExecutor(throughput or TraceSpeedModel(cluster), completions, interference)
    engine = Engine(cluster, policy, executor, overheads)
    statuses = engine.jobs
    completions.is_live = lambda job_id, version: statuses[job_id].version == version
    period = round_length(policy, round_seconds)
    arrivals = sorted(jobs, key=lambda j: j.submit_time)
    n = len(arrivals)
    cursor = 0
    next_round = 0.0
    events = 0
    finished = 0
    idle_rounds = 0
    timer_instants: list[float] = []
    wake_instants: list[float] = []
    stopped_idle = False
    report_every = max(n // 200, 1)
    inf = math.inf
    # Bound once: this loop runs once per event.
    peek, pop = completions.peek_time, completions.pop
    crossed_boundary, running = executor.crossed_boundary, JobState.RUNNING

    while True:
        t_arrival = arrivals[cursor].submit_time if cursor < n else inf
        t_done = peek()
        # Rounds run while there is work. Across an idle gap the timer jumps to the first
        # boundary at or after the next arrival, so a job submitted on a boundary is
        # scheduled in that round, as round-based simulators do.
        if period is not None and not engine.has_work and next_round < t_arrival < inf:
            next_round = math.ceil(t_arrival / period) * period
        t_round = next_round if period is not None and (engine.has_work or t_arrival <= next_round) else inf
        t_wake = engine.wake_at if engine.wake_at is not None else inf
        now = min(t_arrival, t_done, t_round, t_wake)
        if now == inf:
            break
        while peek() <= now:
            _, job_id, version = pop()
            status = statuses[job_id]
            if status.version == version and status.state is running:
                if crossed_boundary(status, now):
                    engine.progress_changed(job_id)
                    continue
                engine.complete(job_id, now)
                finished += 1
                events += 1
        while cursor < n and arrivals[cursor].submit_time <= now:
            if engine.submit(arrivals[cursor], now).state is JobState.REJECTED:
                finished += 1
            cursor += 1
            events += 1
        timer_only = (t_round == now or t_wake == now) and now < t_arrival and now < t_done
        if t_round == now:
            engine.fire_timer()
            next_round = now + period  # type: ignore[operator]
            events += 1
            timer_instants.append(now)
        if t_wake == now:
            engine.fire_wakeup()
            events += 1
            wake_instants.append(now)
        schedule = engine.step(now)
        if period is not None and next_round <= now:
            next_round = (math.floor(now / period) + 1) * period
        if timer_only and cursor >= n and completions.quiet_from(now):
            # Nothing will complete (no job runs, or every running job is stuck at speed
            # 0) and nothing will arrive: a policy that keeps its schedule unchanged
            # would spin the timer forever. Some policies' choices move with time alone
            # (Sia's restart factor grows with a waiting job's age), so give up only
            # after many unchanged rounds, not a few.
            idle_rounds = idle_rounds + 1 if schedule is None or not schedule.changes else 0
            if idle_rounds >= IDLE_ROUNDS_LIMIT:
                stopped_idle = True
                break
        if progress is not None and events % report_every == 0:
            progress(finished, n)

    for status in engine.jobs.values():
        if status.state in (JobState.PENDING, JobState.RUNNING):
            status.state = JobState.UNFINISHED
    if progress is not None:
        progress(finished, n)
    return SimulationResult(
        policy=policy.name,
        workload=workload_name,
        cluster=cluster,
        jobs=list(engine.jobs.values()),
        rejections=engine.rejections,
        events=events,
        decisions=engine.decisions,
        wall_seconds=time.perf_counter() - started,
        timer_instants=timer_instants,
        wake_instants=wake_instants,
        stopped_idle=stopped_idle,
    )


def replay(
    jobs: Sequence[JobSpec], cluster: ClusterSpec, policy: Policy, *, round_seconds: float | None = None
) -> list[JobStatus]:
    """``simulate`` as the ``Replay`` a planning policy is handed (``shapeshift.engine.replay``):
    the default speed model and overheads, every job's final status."""
    return simulate(list(jobs), cluster, policy, round_seconds=round_seconds).jobs


def hand_replay(policy: Policy) -> None:
    """Give ``policy`` the simulator when it plans by simulating (``Replaying``)."""
    if isinstance(policy, Replaying):
        policy.use_replay(replay)
