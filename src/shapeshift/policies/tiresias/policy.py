"""``tiresias``: discretized two-dimensional LAS (Gu et al., NSDI 2019), as its reference
simulator runs it.

Tiresias schedules without knowing job durations (paper Sec. 3.2, ``dlas_sim_jobs`` in
``simulator/run_sim.py`` of SymbioticLab/Tiresias, schedule ``dlas-gpu``):

* **Queues by attained service.** A job's service is GPUs x seconds run since it last
  entered queue 0. New jobs enter queue 0; a running job whose service reaches the limit
  of its queue moves to the end of the next queue (limits ``thresholds``, GPU-seconds;
  the reference's ``queue_limit`` is 3,250 and 7,200 for its three queues).
* **Order.** Queues in priority order; inside a queue, running jobs stay ahead of waiting
  ones and waiting jobs keep the order in which they entered the queue. The reference
  moves waiting jobs behind running ones after every decision, so the last queue does
  not become a preemptive FIFO.
* **Decision.** Jobs are visited in that order; a job whose GPUs fit in what is left of
  the partition's capacity runs (a waiting job starts, a running one keeps its GPUs),
  otherwise it waits and, if it was running, is preempted. A job that does not fit
  does not stop the scan: smaller jobs behind it may run.
* **Starvation (off by default, as in ``dlas-gpu``).** With ``starvation = k > 0``, a
  waiting job that has run before is promoted back to queue 0 once its pending time since
  its last promotion reaches k x its run time since then (the reference's
  ``solve_starvation``; the paper's STARVELIMIT).
* **Exact times.** The reference computes the instant of the next queue change
  (``jump_time``) and decides then; so does this policy, through ``Schedule.wake_at``,
  instead of a periodic timer. Nothing is decided between events.

The queues are kept by ``queues.LevelQueues`` (running parts by their GPU sums,
waiting parts by GPU count), so a decision costs what changed; it decides as walking the
queues as lists would (``tests/policies/tiresias/lists.py``, the differential test).

Placement: the reference counts GPUs only (``--scheme=count``) or places with YARN rules
(``--scheme=yarn``, its default). Ours defaults to ``model-aware``: placement-sensitive
models (the catalog's flag, after the paper's tensor-skew study; unknown models count as
sensitive) are consolidated on the fewest nodes, others take any free GPUs, which is what
Blox calls "Tiresias+". ``placement=skew`` is the paper's own profiler rule (Sec. 3.3:
consolidate when the model's tensor sizes are skewed, ``TensorSkewPlacement``).
``placement=yarn`` reproduces the reference's scheme and
``placement=consolidated`` consolidates every job. A job the count admits but no
placement fits waits, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from shapeshift.engine.contract import PolicyTraits
from shapeshift.engine.fractions import whole_gpu_spec
from shapeshift.engine.state import FreeResources, JobState
from shapeshift.model import Allocation, Schedule
from shapeshift.policies.framework.admission import AdmissionParams, make_admission
from shapeshift.policies.framework.base import ARRIVAL, COMPLETION
from shapeshift.policies.framework.composed import AcceptAll, Admission
from shapeshift.policies.framework.placement import PLACEMENTS, Placement
from shapeshift.policies.framework.queues import newcomers
from shapeshift.policies.framework.registry import register
from shapeshift.policies.tiresias.instants import QueueInstants
from shapeshift.policies.tiresias.placement import ModelAwarePlacement, TensorSkewPlacement
from shapeshift.policies.tiresias.queues import LevelQueues

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

#: The reference simulator's ``queue_limit`` (``simulator/jobs.py``): three queues.
REFERENCE_THRESHOLDS = (3250.0, 7200.0)
#: Service (GPU-seconds) by which a limit counts as reached despite floating-point rounding.
_TOLERANCE = 1e-6


@dataclass
class _Track:
    """A job's queue and the service and run time it had when it last entered queue 0
    (its promotion mark)."""

    queue: int
    gpus: int
    partition: str
    mark_service: float = 0.0
    mark_run: float = 0.0
    mark_time: float = 0.0


class TiresiasPolicy:
    """Discretized 2D-LAS over K queues (see the module docstring)."""

    name = "tiresias"
    triggers = frozenset({ARRIVAL, COMPLETION})
    #: Tiresias counts and places whole GPUs: a fraction of one gets a whole GPU (ours).
    traits = PolicyTraits(whole_gpus=True)
    default_round: float | None = None

    def __init__(
        self,
        thresholds: tuple[float, ...],
        admission: Admission,
        placement: Placement,
        gpu_time: bool = True,
        starvation: float = 0.0,
    ):
        self.thresholds = thresholds
        self.admission = admission
        self.placement = placement
        self.gpu_time = gpu_time
        self.starvation = starvation
        self._track: dict[str, _Track] = {}
        #: Per partition: its queues.
        self._queues: dict[str, LevelQueues] = {}
        #: Per partition: the next instant one of its jobs changes queue (``wake_at``), and
        #: the number of active jobs the last decision there left.
        self._next: dict[str, float] = {}
        self._seen: dict[str, int] = {}
        #: Per partition: running jobs' demotion instants and, with the starvation rule,
        #: waiting jobs' promotion instants (``instants``).
        self._instants = QueueInstants(self._track, self._next_change)
        self._accept_all = isinstance(admission, AcceptAll)

    # ----------------------------------------------------------- service
    def _service(self, view: ClusterView, job_id: str, track: _Track) -> float:
        if self.gpu_time:
            return view.attained(job_id) - track.mark_service
        return self._run(view, job_id) - track.mark_run

    @staticmethod
    def _run(view: ClusterView, job_id: str) -> float:
        status = view.job(job_id)
        extra = view.now - status.last_update if status.state is JobState.RUNNING else 0.0
        return status.run_seconds + extra

    def _update(self, view: ClusterView, job_id: str) -> _Track:
        """The job's queue now: demotions by service, promotions by starvation."""
        track = self._track[job_id]
        # A job woken exactly at its limit may be a rounding error short of it.
        service = self._service(view, job_id, track) + _TOLERANCE
        while track.queue < len(self.thresholds) and service >= self.thresholds[track.queue]:
            track.queue += 1
        if self.starvation > 0 and track.queue > 0 and view.job(job_id).state is JobState.PENDING:
            ran = self._run(view, job_id) - track.mark_run
            if ran > 0 and self._pending(view, job_id, track, ran) >= ran * self.starvation:
                track.queue = 0
                track.mark_service = view.attained(job_id)
                track.mark_run = self._run(view, job_id)
                track.mark_time = view.now
        return track

    @staticmethod
    def _pending(view: ClusterView, job_id: str, track: _Track, ran: float) -> float:
        first = view.job(job_id).first_start
        since = max(track.mark_time, first if first is not None else view.now)
        return max(view.now - since - ran, 0.0)

    def _next_change(self, view: ClusterView, job_id: str, track: _Track, runs: bool) -> float:
        """When this job's queue changes next if nothing else happens (the reference's
        ``jump_time``); ``runs``: the job runs after this decision."""
        status = view.job(job_id)
        if runs and track.queue < len(self.thresholds):
            rate = status.spec.num_gpus if self.gpu_time else 1.0
            left = self.thresholds[track.queue] - self._service(view, job_id, track)
            return view.now + max(left, 0.0) / max(rate, 1e-12)
        if not runs and self.starvation > 0 and track.queue > 0:
            ran = self._run(view, job_id) - track.mark_run
            if ran > 0:
                return view.now + max(ran * self.starvation - self._pending(view, job_id, track, ran), 0.0)
        return math.inf

    # ----------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Schedule:
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        free = view.scratch()
        finished: dict[str, list[tuple[str, _Track]]] = {}
        for job_id in view.finished:
            track = self._track.pop(job_id, None)
            if track is not None:
                self._instants.forget(track.partition, job_id)
                finished.setdefault(track.partition, []).append((job_id, track))
        stopped = self._stopped_outside(view)
        for partition in sorted(view.dirty_partitions):
            if partition not in stopped and self._unchanged(view, partition, finished):
                continue
            self._decide_partition(view, partition, free, changes, reasons, finished.get(partition, ()))
        wake = min(self._next.values(), default=math.inf)
        return Schedule(
            base=view.allocations,
            changes=changes,
            reasons=reasons,
            default_reason="waiting: the jobs ahead of it in its queue or in higher queues hold the GPUs it needs",
            wake_at=None if math.isinf(wake) else wake,
        )

    def _stopped_outside(self, view: ClusterView) -> set[str]:
        """Jobs the engine stopped or withdrew outside a decision (a live worker failed,
        a user cancelled): a running one re-queued goes ahead of its queue's waiting jobs,
        as a preemption does; one withdrawn for good leaves. Returns their partitions,
        which must be decided again."""
        partitions: set[str] = set()
        for job_id in view.touched:
            track = self._track.get(job_id)
            state = view.job(job_id).state
            if track is None or state is JobState.RUNNING:
                continue
            queues = self._queues.get(track.partition)
            if queues is None:
                continue
            was_running = job_id in queues.running[track.queue]
            if state is JobState.PENDING:
                if not was_running:
                    continue  # preempted by the last decision: already ahead of the waiting jobs
                queues.drop_running(track.queue, job_id)
                queues.prepend(track.queue, [(job_id, track.gpus)])
            else:
                if was_running:
                    queues.drop_running(track.queue, job_id)
                else:
                    queues.forget(job_id)
                del self._track[job_id]
                self._instants.forget(track.partition, job_id)
            partitions.add(track.partition)
        return partitions

    def _active(self, view: ClusterView, partition: str) -> int:
        return view.pending_count(partition) + len(view.running(partition))  # type: ignore[arg-type]

    def _unchanged(self, view: ClusterView, partition: str, finished: Mapping[str, object]) -> bool:
        """Nothing can change in ``partition``: no job finished or arrived there (the count of
        active jobs is what the last decision left) and none of its jobs reaches a queue
        change now. Only with accept-all admission, whose answer depends on nothing else."""
        return (
            self._accept_all
            and partition not in finished
            and self._seen.get(partition) == self._active(view, partition)
            and view.now < self._next.get(partition, math.inf) - _TOLERANCE
        )

    def _decide_partition(
        self,
        view: ClusterView,
        partition: str,
        free: FreeResources,
        changes: dict[str, Allocation | None],
        reasons: dict[str, str],
        finished: list[tuple[str, _Track]] | tuple[()],
    ) -> None:
        queues = self._queues.get(partition)
        if queues is None:
            queues = self._queues[partition] = LevelQueues(len(self.thresholds) + 1)
        for job_id, track in finished:  # finished jobs leave their queue
            if job_id in queues.running[track.queue]:
                queues.drop_running(track.queue, job_id)
            else:
                queues.forget(job_id)
        # A running job that enters or changes queue joins the waiting part of its new
        # queue at the end, as the list rule appends it; the walk keeps it if it fits.
        running_movers = self._enter_new_jobs(view, partition, queues, bool(finished))
        # Demotions and promotions append to their new queue. Service grows only while a
        # job runs, so without the starvation rule only running jobs can change queue.
        if self.starvation > 0:
            movers = self._instants.movers(view, partition, queues, running_movers)
        else:
            movers = self._due_now(view, partition)
        for job_id in movers:
            track = self._track[job_id]
            before = track.queue
            if self._update(view, job_id).queue != before:
                if job_id in queues.running[before]:
                    queues.drop_running(before, job_id)
                    running_movers.add(job_id)
                queues.append(track.queue, job_id, track.gpus)
        walk = queues.walk(view.capacity_gpus(partition))
        current = view.allocations
        preempted = [job_id for _, job_id, _ in walk.preempt]
        visited = {v.job_id for taken in walk.taken for v in taken}
        preempted += [job_id for job_id in running_movers if job_id not in visited]
        for job_id in preempted:
            changes[job_id] = None
            free.give(current[job_id])
        # After deciding, waiting jobs go behind the running ones: what the walk took and
        # kept (running movers, and waiting jobs that were placed) joins the running part
        # in walk order; a start that fails returns to its place; what the walk preempted
        # goes ahead of the waiting part.
        nodes = view.partitions[partition]
        started: list[str] = []
        put_back: list[str] = []
        for level, taken in enumerate(walk.taken):
            for visit in taken:
                if visit.job_id not in running_movers:
                    alloc = self.placement.find(whole_gpu_spec(view.job(visit.job_id).spec), nodes, free)
                    if alloc is None:
                        reasons[visit.job_id] = f"queue {level}: GPUs free but fragmented ({self.placement.name})"
                        queues.put_back(level, visit)
                        put_back.append(visit.job_id)
                        continue
                    changes[visit.job_id] = alloc
                    free.take(alloc)
                    started.append(visit.job_id)
                queues.add_running(level, visit.job_id, visit.gpus)
        by_level: dict[int, list[tuple[str, int]]] = {}
        for level, job_id, gpus in walk.preempt:
            by_level.setdefault(level, []).append((job_id, gpus))
        for level, jobs in by_level.items():
            queues.prepend(level, jobs)
        self._seen[partition] = self._active(view, partition)
        if self.starvation > 0:
            changed = [*movers, *started, *preempted, *running_movers, *put_back]
            self._next[partition] = self._instants.refresh(view, partition, queues, changed)
        else:  # due jobs still running get their next instant, whether or not they moved
            kept = [j for j in movers if j in queues.running[self._track[j].queue]]
            self._schedule_demotions(view, partition, preempted, [*started, *kept])

    def _enter_new_jobs(self, view: ClusterView, partition: str, queues: LevelQueues, finished: bool) -> set[str]:
        """New jobs enter the end of queue 0; returns those already running (a live
        controller adopting jobs), which the walk then treats as movers.

        With accept-all admission the new jobs are the newcomers at the end of the
        engine's queue (O(new)); a full pass over the partition's jobs is made only when
        that does not account for every active job, or for other admissions."""
        active = self._active(view, partition)
        if self._accept_all and not finished and self._seen.get(partition) == active:
            return set()
        fresh = newcomers(view.pending(partition), self._track) if self._accept_all else []
        if not self._accept_all or len(queues) + len(fresh) != active:
            candidates = [*view.running(partition), *self.admission.admit(view, partition)]
            fresh = [j for j in candidates if j not in self._track]
        running_new: set[str] = set()
        for job_id in fresh:
            spec = view.job(job_id).spec
            self._track[job_id] = _Track(0, spec.num_gpus, partition, mark_time=spec.submit_time)
            queues.append(0, job_id, spec.num_gpus)
            if view.job(job_id).state is JobState.RUNNING:
                running_new.add(job_id)
        return running_new

    def _due_now(self, view: ClusterView, partition: str) -> list[str]:
        """Running jobs whose demotion instant has come (a running job's service grows at
        a constant rate, so its instant is fixed until it stops); their instants go."""
        return self._instants.demotions(partition).take_until(view.now + _TOLERANCE)

    def _schedule_demotions(self, view: ClusterView, partition: str, stopped: list[str], started: list[str]) -> None:
        demotions = self._instants.demotions(partition)
        for job_id in stopped:
            demotions.drop(job_id)
        for job_id in started:
            demotions.set(job_id, self._next_change(view, job_id, self._track[job_id], True))
        self._next[partition] = demotions.first()


class TiresiasParams(AdmissionParams):
    #: Queue limits in GPU-seconds (seconds with ``service=time``); K queues = limits + 1.
    thresholds: list[float] = Field(default_factory=lambda: list(REFERENCE_THRESHOLDS), min_length=1)
    #: gpu-time: GPUs x seconds (``dlas-gpu``, the default); time: seconds (``dlas``).
    service: Literal["gpu-time", "time"] = "gpu-time"
    #: Promote a starving job when pending >= k x its run time (0 = off, as ``dlas-gpu``).
    starvation: float = Field(0.0, ge=0, allow_inf_nan=False)
    placement: Literal["model-aware", "skew", "consolidated", "first-fit", "scattered", "yarn"] = "model-aware"
    #: ``placement=skew``: consolidate models whose largest tensor is at least this share.
    skew_threshold: float = Field(0.5, gt=0, le=1)

    @field_validator("thresholds", mode="before")
    @classmethod
    def _list(cls, value: object) -> object:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, int | float):
            return [value]
        return value

    @field_validator("thresholds")
    @classmethod
    def _increasing(cls, value: list[float]) -> list[float]:
        if any(not math.isfinite(v) or v <= 0 for v in value) or sorted(set(value)) != value:
            raise ValueError("thresholds must be finite, > 0 and strictly increasing, e.g. 3250,7200")
        return value


@register(
    "tiresias",
    "Discretized 2D-LAS as the Tiresias reference simulator (dlas-gpu): queues by GPU-seconds (3,250, 7,200), "
    "running jobs ahead of waiting ones, exact demotion times; consolidates placement-sensitive models.",
    TiresiasParams,
)
def make_tiresias(params: TiresiasParams) -> TiresiasPolicy:
    if params.placement == "model-aware":
        placement: Placement = ModelAwarePlacement()
    elif params.placement == "skew":
        placement = TensorSkewPlacement(params.skew_threshold)
    else:
        placement = PLACEMENTS[params.placement]()
    return TiresiasPolicy(
        tuple(params.thresholds),
        make_admission(params),
        placement,
        gpu_time=params.service == "gpu-time",
        starvation=params.starvation,
    )

