"""Trace-driven, event-driven simulation.

Time jumps from one event to the next. The events come from four sources
(``shapeshift.sim.sources``): arrivals, completions, for round-based policies a round
timer that only runs while there is work, and the exact instant a policy asked to decide
again (``Schedule.wake_at``). The loop takes the earliest instant, fires every source
due then (completions, then arrivals, then the timer and the wake-up), and the policy
decides once and the engine reconciles.
"""

from __future__ import annotations

import gc
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
from shapeshift.sim.sources import Arrivals, Completions, RoundTimer, WakeUp

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
#: only later, when a policy weighs it by a factor that grows with its age.
IDLE_ROUNDS_LIMIT = 1000
#: Allocations between two collections of the youngest generation while a run lasts.
YOUNG_COLLECTION = 50_000


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
    # The jobs and everything built before the run are alive throughout it: frozen, the
    # collector's full passes (which grow with the heap) leave them out. A nested run
    # (a planning policy's replay) finds the heap frozen already and leaves it so.
    # A run also makes millions of short-lived objects and few reference cycles: the
    # youngest generation is collected every 50,000 allocations rather than 700, which
    # cuts the collector's time about threefold (a 100,000-job Slurm replay: 1.15 s to
    # 0.36 s) and leaves what a run holds alive unchanged.
    outermost = not gc.get_freeze_count()
    if outermost:
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], YOUNG_COLLECTION), *thresholds[1:])
    try:
        return _simulate(
            jobs, cluster, policy, workload_name, throughput, overheads, round_seconds, progress, interference
        )
    finally:
        if outermost:
            gc.set_threshold(*thresholds)
            gc.unfreeze()


def _simulate(
    jobs: Sequence[JobSpec],
    cluster: ClusterSpec,
    policy: Policy,
    workload_name: str,
    throughput: ThroughputModel | None,
    overheads: Overheads | None,
    round_seconds: float | None,
    progress: ProgressCallback | None,
    interference: InterferenceModel | None,
) -> SimulationResult:
    started = time.perf_counter()
    hand_replay(policy)
    queue = CompletionQueue()
    executor = SimulatedExecutor(throughput or TraceSpeedModel(cluster), queue, interference)
    engine = Engine(cluster, policy, executor, overheads)
    statuses = engine.jobs
    queue.is_live = lambda job_id, version: statuses[job_id].version == version
    period = round_length(policy, round_seconds)
    completions = Completions(queue, engine, executor)
    arrivals = Arrivals(jobs, engine)
    timer = RoundTimer(period, engine, arrivals) if period is not None else None
    wakeup = WakeUp(engine)
    n = arrivals.total
    events = 0
    idle_rounds = 0
    stopped_idle = False
    report_every = max(n // 200, 1)
    inf = math.inf

    # Bound once: this loop runs once per event. The sources are few and fixed, so the
    # loop asks each by name instead of gathering their instants into a list every event.
    # Completions and the timer move with every event; the next arrival moves only when
    # arrivals fire, and the wake-up only when it fires or a decision asks for one or
    # replaces one, so those two are asked again only then.
    done_due, done_fire = completions.due, completions.fire
    arrival_due, arrival_fire = arrivals.due, arrivals.fire
    timer_due = timer.due if timer is not None else None
    wake_due, wake_fire = wakeup.due, wakeup.fire
    t_arrival, t_wake = arrival_due(), wake_due()

    while True:
        t_done = done_due()
        t_timer = timer_due() if timer_due is not None else inf
        now = min(t_done, t_arrival, t_timer, t_wake)
        if now == inf:
            break
        # Fired in this order when due at the same instant: the work (completions, then
        # arrivals) before the clocks.
        work = False
        if t_done == now:
            events += done_fire(now)
            work = True
        if t_arrival == now:
            events += arrival_fire(now)
            t_arrival = arrival_due()
            work = True
        if t_timer == now and timer is not None:
            events += timer.fire(now)
        woke = t_wake == now
        if woke:
            events += wake_fire(now)
        schedule = engine.step(now)
        if woke or (schedule is not None and (schedule.wake_at is not None or t_wake < inf)):
            t_wake = wake_due()  # a decision that asks for no wake-up leaves none standing
        if timer is not None:
            timer.passed(now)
        if not work and arrivals.exhausted and queue.quiet_from(now):
            # Only a clock fired, nothing will complete (no job runs, or every running job
            # is stuck at speed 0) and nothing will arrive: a policy that keeps its
            # schedule unchanged would spin the timer forever. Some policies' choices move
            # with time alone (a waiting job's worth grows with its age), so give up only
            # after many unchanged rounds, not a few.
            idle_rounds = idle_rounds + 1 if schedule is None or not schedule.changes else 0
            if idle_rounds >= IDLE_ROUNDS_LIMIT:
                stopped_idle = True
                break
        if progress is not None and events % report_every == 0:
            progress(completions.completed + arrivals.rejected, n)

    for status in engine.jobs.values():
        if status.state in (JobState.PENDING, JobState.RUNNING):
            status.state = JobState.UNFINISHED
    if progress is not None:
        progress(completions.completed + arrivals.rejected, n)
    return SimulationResult(
        policy=policy.name,
        workload=workload_name,
        cluster=cluster,
        jobs=list(engine.jobs.values()),
        rejections=engine.rejections,
        events=events,
        decisions=engine.decisions,
        wall_seconds=time.perf_counter() - started,
        timer_instants=timer.instants if timer is not None else [],
        wake_instants=wakeup.instants,
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
