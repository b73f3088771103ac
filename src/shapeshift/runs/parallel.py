"""Partitions in parallel: one simulation per virtual cluster, merged into the serial result.

Partitions (virtual clusters) never share nodes, so a policy whose decision for one
partition reads only that partition's jobs runs each partition's jobs on its own, in
separate processes, and the union of those runs *is* the serial run: the same start,
end and allocation for every job. The Helios simulator runs its VCs this way.

What the merge has to restore is what the serial loop counts across partitions:

* the job list and the rejections, in the serial order (arrival order, ties in input
  order);
* ``events``: every arrival and completion belongs to one partition, so they add up; a
  round or a wake-up firing is one event of the serial loop whichever partitions it
  concerns, so those count once per instant;
* ``decisions``: the serial loop makes one decision per iteration however many partitions
  changed. All events at an instant are handled in the instant's first iteration, and a
  later iteration at the same instant exists only for a job that finished the moment it
  started, so the serial count at an instant is the largest count of any one partition
  there: decisions = sum over instants of max over partitions.

Rounds and wake-ups are cluster-wide timers, and the serial loop decides every partition
when one fires. They still split exactly for policies that say so (``partition_local``):

* the round timer fires on the same grid (multiples of the round) in both, in a partition
  whenever it has work; the serial run adds rounds only where the partition has no job,
  and a decision there changes nothing;
* a wake-up asked for by one partition also decides the others in the serial run; such a
  policy keeps each partition's own request and decides nothing new in a partition where
  nothing happened (Gavel's other partitions are mid-round; LAS's leases end on round
  instants). Tiresias does not say so: it counts a queue change due up to 1 us early,
  so another partition's wake-up can move it.

A run is split only when those arguments hold (:func:`serial_reason` says why not):
CES powers nodes across partitions, history-based estimators learn from every
partition's jobs, a policy may read other partitions or decide something new at another
partition's wake-up, round instants are exact only for a round of whole seconds, and the
recordings and windows are kept by one process. A partition that ends stuck (jobs left
that never start) ends its run by another rule than the serial loop's, so such a split
run is done again in one process (:class:`NotSplittable`).
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from shapeshift.engine.contract import Policy, traits_of
from shapeshift.engine.engine import Rejection
from shapeshift.engine.state import JobState, JobStatus
from shapeshift.model import JobSpec
from shapeshift.runs.models import build_interference, build_throughput
from shapeshift.sim.simulator import SimulationResult, round_length, simulate
from shapeshift.workloads.workload import Workload

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView
    from shapeshift.model import Schedule
    from shapeshift.runs.spec import RunSpec


def serial_reason(spec: RunSpec, policy: Policy) -> str:
    """Why ``spec`` must run as one simulation ('' when it can be split by partition)."""
    if len(spec.cluster.partition_nodes()) < 2:
        return "the cluster has a single partition"
    if spec.energy is not None:
        return "energy management (CES) powers nodes down across partitions"
    if spec.window is not None or spec.record:
        return "windows and recordings are kept by a single simulation"
    try:
        rounds = round_length(policy, spec.round_seconds)
    except ValueError:
        return "the policy needs a round"
    if rounds is not None and not float(rounds).is_integer():
        return "round instants are exact across partitions only for a round of whole seconds"
    traits = traits_of(policy)
    if not traits.partition_local:
        return (
            f"policy {spec.policy} with these parameters is not partition-local (it learns across partitions, "
            "decides something new at another partition's wake-up, or decides jointly)"
        )
    if traits.lease and spec.round_seconds is not None and spec.round_seconds != policy.default_round:
        return "a lease wake-up falls on a round instant only with the policy's own round"
    return ""


class NotSplittable(Exception):
    """A partition's run ended stuck: the split cannot stand for the serial run."""


class _DecisionClock:
    """Wraps a policy and notes the instant of every decision."""

    def __init__(self, inner: Policy):
        self.inner = inner
        self.name = inner.name
        self.triggers = inner.triggers
        self.default_round = inner.default_round
        self.traits = traits_of(inner)
        self.instants: Counter[float] = Counter()

    def decide(self, view: ClusterView) -> Schedule:
        self.instants[view.now] += 1
        return self.inner.decide(view)


#: The ``JobStatus`` constructor fields after ``spec, partition, state``, in order: what a
#: worker sends back per job (plain values pickle far faster than the status objects).
_INIT_FIELDS = tuple(f.name for f in dataclasses.fields(JobStatus) if f.init)
assert _INIT_FIELDS[:3] == ("spec", "partition", "state")
_STATE_FIELDS = _INIT_FIELDS[3:]


@dataclasses.dataclass(frozen=True)
class _Part:
    """What one partition's simulation sends back to be merged."""

    states: list[tuple[Any, ...]]  # per job, in the partition's order: id, partition, state, _STATE_FIELDS
    rejections: list[Rejection]
    events: int
    instants: Counter[float]
    policy: str
    timers: list[float]
    wakes: list[float]
    stopped_idle: bool


def _simulate_part(spec: RunSpec, policy_args: dict[str, Any]) -> _Part:
    """One partition's jobs (``spec.workload``) on the whole cluster (node indices as in
    the serial run)."""
    from shapeshift.policies.framework.registry import make_policy

    jobs = spec.workload.jobs()
    clock = _DecisionClock(make_policy(spec.policy, policy_args))
    result = simulate(
        jobs,
        spec.cluster,
        clock,
        workload_name=spec.workload.name,
        throughput=build_throughput(spec.throughput.kind, spec.throughput.path, spec.cluster),
        overheads=spec.overheads,
        round_seconds=spec.round_seconds,
        interference=build_interference(spec.interference, spec.seed),
    )
    fields = attrgetter(*_STATE_FIELDS)
    states = [(s.job_id, s.partition, s.state.value, *fields(s)) for s in result.jobs]
    return _Part(
        states, result.rejections, result.events, clock.instants, result.policy,
        result.timer_instants, result.wake_instants, result.stopped_idle,
    )


def _status(spec: JobSpec, state: tuple[Any, ...]) -> JobStatus:
    return JobStatus(spec, state[1], JobState(state[2]), *state[3:])


def _collect(
    finished: Iterable[tuple[int, _Part]],
    count: int,
    jobs: int,
    progress: Callable[[int, int], None] | None,
) -> list[_Part]:
    """The parts in partition order, whatever order they finished in."""
    parts: list[_Part | None] = [None] * count
    done = 0
    for index, part in finished:
        parts[index] = part
        done += len(part.states)
        if progress is not None:
            progress(done, jobs)
    return [part for part in parts if part is not None]


def split_by_partition(spec: RunSpec) -> list[Workload]:
    """The workload of each partition, rows in input order; jobs naming no known partition
    (the engine rejects them at arrival) go with the first. Split as tables when the
    workload has one: a table pickles to a worker far faster than job objects."""
    names = sorted(spec.cluster.partition_nodes())
    workload = spec.workload
    if workload.has_frame:
        frame = workload.frame
        key = frame["vc"].where(frame["vc"].isin(names), names[0])
        parts = [frame[(key == name).to_numpy()] for name in names]
        return [Workload(workload.name, part) for part in parts if len(part)]
    groups: dict[str, list[JobSpec]] = {name: [] for name in names}
    for job in workload.jobs(include_cpu_only=True):
        groups.get(job.vc, groups[names[0]]).append(job)
    return [Workload(workload.name, jobs=group) for group in groups.values() if group]


def simulate_partitions(
    spec: RunSpec,
    policy_args: dict[str, Any],
    workers: int,
    progress: Callable[[int, int], None] | None = None,
    backend: str = "processes",
) -> SimulationResult:
    """The serial simulation of ``spec``, computed one partition per task on ``workers``
    processes, or with at most ``workers`` tasks at once on Ray (``backend="ray"``); the
    caller checked :func:`serial_reason`. ``progress(jobs_done, jobs)`` is called as
    partitions finish. Raises ``NotSplittable`` when a partition's run ended stuck."""
    started = time.perf_counter()
    pieces = [dataclasses.replace(spec, workload=piece) for piece in split_by_partition(spec)]
    calls = [(piece, policy_args) for piece in pieces]
    if backend == "ray":
        from shapeshift.runs.backends import ray_map

        finished = ray_map(_simulate_part, calls, in_flight=workers)
        jobs = spec.workload.jobs()  # meanwhile, as below
        parts = _collect(finished, len(pieces), len(jobs), progress)
    else:
        with ProcessPoolExecutor(max_workers=max(1, min(workers, len(pieces)))) as pool:
            futures = {pool.submit(_simulate_part, *call): i for i, call in enumerate(calls)}
            jobs = spec.workload.jobs()  # meanwhile: the job objects the merged statuses refer to
            finished = ((futures[future], future.result()) for future in as_completed(futures))
            parts = _collect(finished, len(pieces), len(jobs), progress)
    if any(part.stopped_idle for part in parts):
        raise NotSplittable("a partition was left with jobs that never start (its run ends by another rule)")
    by_id = {job.job_id: job for job in jobs}
    # Serial order: arrival time, ties in input order (``simulate`` sorts stably).
    rank = {job.job_id: i for i, job in enumerate(sorted(jobs, key=lambda j: j.submit_time))}
    states = sorted((state for part in parts for state in part.states), key=lambda state: rank[state[0]])
    rejections = sorted((r for part in parts for r in part.rejections), key=lambda r: rank[r.job_id])
    timers = sorted({at for part in parts for at in part.timers})
    wakes = sorted({at for part in parts for at in part.wakes})
    instants: dict[float, int] = {}
    for part in parts:
        for at, n in part.instants.items():
            instants[at] = max(instants.get(at, 0), n)
    return SimulationResult(
        policy=parts[0].policy if parts else spec.policy,
        workload=spec.workload.name,
        cluster=spec.cluster,
        jobs=[_status(by_id[state[0]], state) for state in states],
        rejections=rejections,
        events=sum(part.events - len(part.timers) - len(part.wakes) for part in parts) + len(timers) + len(wakes),
        decisions=sum(instants.values()),
        wall_seconds=time.perf_counter() - started,
        timer_instants=timers,
        wake_instants=wakes,
    )
