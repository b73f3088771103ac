"""Where a simulation's events come from, each kind behind one small interface.

A source says when it next fires (``due``; ``inf`` when it holds nothing) and, once that
instant has come, fires everything it holds for it into the engine (``fire``), returning
how many events that was. The simulation loop only takes the earliest instant, fires the
sources due then in a fixed order (completions, arrivals, the round timer, the policy's
wake-up), lets the policy decide once and the engine reconcile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from shapeshift.engine.engine import Engine
from shapeshift.engine.state import JobState
from shapeshift.model import JobSpec
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor

_INF = math.inf


class EventSource(Protocol):
    def due(self) -> float:
        """The next instant this source fires at (``inf``: none)."""
        ...

    def fire(self, now: float) -> int:
        """Fire everything due at ``now`` into the engine; how many events that was."""
        ...


class Completions:
    """Jobs finishing, from the executor's heap of finish times. An entry that is a rate
    boundary (``SimulatedExecutor.crossed_boundary``) only updates the job's progress and
    is not counted; an entry left behind by a preempted or changed job is skipped."""

    def __init__(self, queue: CompletionQueue, engine: Engine, executor: SimulatedExecutor):
        # Bound once: fired once per completion instant.
        self.due = queue.peek_time
        self._pop = queue.pop
        self._statuses = engine.jobs
        self._complete = engine.complete
        self._progress_changed = engine.progress_changed
        self._crossed = executor.crossed_boundary
        #: Jobs completed so far.
        self.completed = 0

    def fire(self, now: float) -> int:
        peek, pop, statuses, running = self.due, self._pop, self._statuses, JobState.RUNNING
        completed = 0
        while peek() <= now:
            _, job_id, version = pop()
            status = statuses[job_id]
            if status.version == version and status.state is running:
                if self._crossed(status, now):
                    self._progress_changed(job_id)
                    continue
                self._complete(job_id, now)
                completed += 1
        self.completed += completed
        return completed


class Arrivals:
    """The workload's jobs, submitted at their submit times (read by a cursor)."""

    def __init__(self, jobs: Sequence[JobSpec], engine: Engine):
        self._jobs = sorted(jobs, key=lambda j: j.submit_time)
        self.total = len(self._jobs)
        self._cursor = 0
        self._submit = engine.submit
        #: The next job's submit time (asked once per event, moved only when jobs arrive).
        self._next = self._jobs[0].submit_time if self._jobs else _INF
        #: Jobs rejected on arrival so far (they can never run).
        self.rejected = 0

    @property
    def exhausted(self) -> bool:
        return self._cursor >= self.total

    def due(self) -> float:
        return self._next

    def fire(self, now: float) -> int:
        jobs, n, cursor, submit = self._jobs, self.total, self._cursor, self._submit
        start = cursor
        while cursor < n and jobs[cursor].submit_time <= now:
            if submit(jobs[cursor], now).state is JobState.REJECTED:
                self.rejected += 1
            cursor += 1
        self._cursor = cursor
        self._next = jobs[cursor].submit_time if cursor < n else _INF
        return cursor - start


class RoundTimer:
    """A scheduling round every ``period`` seconds, run only while there is work. Across
    an idle gap it jumps to the first boundary at or after the next arrival, so a job
    submitted on a boundary is scheduled in that round, as round-based simulators do."""

    def __init__(self, period: float, engine: Engine, arrivals: Arrivals):
        self.period = period
        self._engine = engine
        self._arrivals = arrivals
        self._next = 0.0
        #: Instants the timer fired at.
        self.instants: list[float] = []

    def due(self) -> float:
        t_arrival = self._arrivals.due()
        has_work = self._engine.has_work
        if not has_work and self._next < t_arrival < _INF:
            self._next = math.ceil(t_arrival / self.period) * self.period
        return self._next if has_work or t_arrival <= self._next else _INF

    def fire(self, now: float) -> int:
        self._engine.fire_timer()
        self._next = now + self.period
        self.instants.append(now)
        return 1

    def passed(self, now: float) -> None:
        """The loop has decided at ``now``: a boundary it passed over moves past ``now``."""
        if self._next <= now:
            self._next = (math.floor(now / self.period) + 1) * self.period


class WakeUp:
    """The exact instant the policy asked to decide again (``Schedule.wake_at``)."""

    def __init__(self, engine: Engine):
        self._engine = engine
        #: Instants the wake-up fired at.
        self.instants: list[float] = []

    def due(self) -> float:
        wake = self._engine.wake_at
        return wake if wake is not None else _INF

    def fire(self, now: float) -> int:
        self._engine.fire_wakeup()
        self.instants.append(now)
        return 1
