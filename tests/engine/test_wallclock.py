"""The engine does not know what time is: drive the same policy with a polling loop over a
fake wall clock and a toy executor, and get exactly the simulator's schedule."""

from __future__ import annotations

from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.engine import Engine
from shapeshift.engine.state import JobState, JobStatus
from shapeshift.model import Allocation
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from tests.conftest import job


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


class TimerExecutor:
    """Runs a job by remembering when its work will be done on the wall clock; reports
    completions only when polled (as a live backend would learn of exited processes)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.finish: dict[str, float] = {}

    def on_submit(self, job: JobStatus) -> None:
        job.work_total = job.spec.duration

    def launch(self, job: JobStatus, allocation: Allocation, now: float, pause: float) -> None:
        job.rate, job.last_update, job.stall_until = 1.0, now, now + pause
        self.finish[job.job_id] = self.clock.now() + pause + job.work_total - job.work_done

    def reconfigure(self, job: JobStatus, allocation: Allocation, now: float, pause: float) -> None:
        self.launch(job, allocation, now, pause)

    def stop(self, job: JobStatus, now: float) -> None:
        job.rate = 0.0
        del self.finish[job.job_id]

    def poll(self) -> list[str]:
        done = sorted(j for j, t in self.finish.items() if t <= self.clock.now())
        for j in done:
            del self.finish[j]
        return done


def test_same_policy_same_schedule_on_a_wall_clock():
    trace = [job(f"j{i}", float(i * 7 % 50), 1 + i % 4, float(20 + i * 13 % 90)) for i in range(25)]
    trace.sort(key=lambda j: j.submit_time)
    cluster = shorthand_cluster(2, 4)

    simulated = simulate(trace, cluster, make_policy("fifo", {"backfill": "true"}))
    expected = {j.job_id: (j.first_start, j.end_time) for j in simulated.jobs}

    clock = FakeClock()
    executor = TimerExecutor(clock)
    engine = Engine(cluster, make_policy("fifo", {"backfill": "true"}), executor)
    pending = list(trace)
    while pending or engine.has_work:
        now = clock.now()
        for job_id in executor.poll():
            engine.complete(job_id, now)
        while pending and pending[0].submit_time <= now:
            engine.submit(pending.pop(0), now)
        engine.step(now)
        clock.sleep(1.0)  # a live controller's polling interval; all trace times are integers

    live = {j.job_id: (j.first_start, j.end_time) for j in engine.jobs.values()}
    assert all(j.state is JobState.COMPLETED for j in engine.jobs.values())
    assert live == expected
