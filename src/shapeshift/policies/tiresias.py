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

import heapq
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from shapeshift.engine.state import FreeResources, JobState
from shapeshift.model import Allocation, Schedule
from shapeshift.policies.admission import AdmissionParams, make_admission
from shapeshift.policies.base import ARRIVAL, COMPLETION
from shapeshift.policies.composed import AcceptAll, Admission
from shapeshift.policies.placement import PLACEMENTS, Placement
from shapeshift.policies.registry import register
from shapeshift.policies.tiresias_placement import ModelAwarePlacement, TensorSkewPlacement
from shapeshift.wording import count

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
        #: Per partition, per queue: job ids in queue order.
        self._queues: dict[str, list[list[str]]] = {}
        #: Per partition: the next instant one of its jobs changes queue (``wake_at``), and
        #: the number of active jobs the last decision there left.
        self._next: dict[str, float] = {}
        self._seen: dict[str, int] = {}
        #: Running jobs' demotion instants, and a heap of them per partition.
        self._due: dict[str, float] = {}
        self._heap: dict[str, list[tuple[float, str]]] = {}
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
        finished: dict[str, list[str]] = {}
        for job_id in view.finished:
            track = self._track.pop(job_id, None)
            self._due.pop(job_id, None)
            if track is not None:
                finished.setdefault(track.partition, []).append(job_id)
        for partition in sorted(view.dirty_partitions):
            if self._unchanged(view, partition, finished):
                continue
            self._decide_partition(view, partition, free, changes, reasons, finished.get(partition, ()))
        wake = min(self._next.values(), default=math.inf)
        return Schedule(
            base=view.allocations,
            changes=changes,
            reasons=reasons,
            default_reason="waiting in a lower-priority queue",
            wake_at=None if math.isinf(wake) else wake,
        )

    def _active(self, view: ClusterView, partition: str) -> int:
        return view.pending_count(partition) + len(view.running(partition))  # type: ignore[arg-type]

    def _unchanged(self, view: ClusterView, partition: str, finished: dict[str, list[str]]) -> bool:
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
        finished: list[str] | tuple[str, ...],
    ) -> None:
        queues = self._queues.setdefault(partition, [[] for _ in range(len(self.thresholds) + 1)])
        if finished:  # finished jobs leave their queue
            gone = set(finished)
            for queue in queues:
                queue[:] = [j for j in queue if j not in gone]
        running = list(view.running(partition))
        if finished or self._seen.get(partition) != self._active(view, partition) or not self._accept_all:
            for job_id in [*running, *self.admission.admit(view, partition)]:
                if job_id not in self._track:  # a new job enters the end of queue 0
                    spec = view.job(job_id).spec
                    self._track[job_id] = _Track(0, spec.num_gpus, partition, mark_time=spec.submit_time)
                    queues[0].append(job_id)
        # Demotions and promotions append to their new queue. Service grows only while a
        # job runs, so without the starvation rule only running jobs can change queue.
        movers = [j for q in queues for j in q] if self.starvation > 0 else self._due_now(view, partition)
        moved = False
        for job_id in movers:
            track = self._track[job_id]
            before = track.queue
            after = self._update(view, job_id).queue
            if after != before:
                queues[before].remove(job_id)
                queues[after].append(job_id)
                moved = True
        capacity = view.capacity_gpus(partition)
        is_running = set(running)
        keep: set[str] = set()
        start: list[str] = []
        everyone = self._everyone_fits(view, partition, queues)
        if everyone is not None:  # the scan below would keep every job: skip it
            keep, start, capacity = set(is_running), everyone, 0
        for level, queue in enumerate(queues):
            if capacity == 0:
                break
            for job_id in queue:
                gpus = self._track[job_id].gpus
                if gpus <= capacity:
                    capacity -= gpus
                    if job_id in is_running:
                        keep.add(job_id)
                    else:
                        start.append(job_id)
                    if capacity == 0:
                        break
                elif job_id not in is_running:
                    reasons[job_id] = f"queue {level}: needs {count(gpus, 'GPU')}, {capacity} left"
        current = view.allocations
        if everyone is None:
            for job_id in running:
                if job_id not in keep:
                    changes[job_id] = None
                    free.give(current[job_id])
        nodes = view.partitions[partition]
        for job_id in start:
            alloc = self.placement.find(view.job(job_id).spec, nodes, free)
            if alloc is None:
                level = self._track[job_id].queue
                reasons[job_id] = f"queue {level}: GPUs free but fragmented ({self.placement.name})"
                continue
            changes[job_id] = alloc
            free.take(alloc)
            keep.add(job_id)
        # After deciding, waiting jobs go behind the running ones (nothing moves when every
        # job of the partition runs on).
        if (moved or keep != is_running) and (everyone is None or len(keep) != len(is_running) + len(everyone)):
            for queue in queues:
                queue[:] = [j for j in queue if j in keep] + [j for j in queue if j not in keep]
        self._seen[partition] = self._active(view, partition)
        if self.starvation > 0:
            watched = [j for q in queues for j in q]
            self._next[partition] = min(
                (self._next_change(view, j, self._track[j], j in keep) for j in watched), default=math.inf
            )
        else:
            self._schedule_demotions(view, partition, keep, is_running, movers)

    def _everyone_fits(self, view: ClusterView, partition: str, queues: list[list[str]]) -> list[str] | None:
        """The waiting jobs in queue order when they fit the free GPUs together, else None.

        Then every job of the partition fits its capacity: the scan keeps every running
        job and starts every waiting one in queue order, which this finds from the few
        waiting jobs' positions instead of walking every queue (the cluster-sized cost of
        each decision when nothing queues). Only without the starvation rule, where the
        queues hold exactly the partition's active jobs, and without GPU sharing, where the
        running jobs hold exactly the GPUs that are not free."""
        if self.starvation > 0 or not self._accept_all or view.sharing is not None:
            return None
        left = view.free_gpus(partition)
        waiting = []
        for job_id in view.pending(partition):
            track = self._track[job_id]
            left -= track.gpus
            if left < 0:
                return None
            waiting.append((track.queue, queues[track.queue].index(job_id), job_id))
        waiting.sort()
        return [job_id for *_, job_id in waiting]

    def _due_now(self, view: ClusterView, partition: str) -> list[str]:
        """Running jobs whose demotion instant has come (a heap per partition: a running
        job's service grows at a constant rate, so its instant is fixed until it stops)."""
        heap = self._heap.setdefault(partition, [])
        due: list[str] = []
        while heap and heap[0][0] <= view.now + _TOLERANCE:
            at, job_id = heapq.heappop(heap)
            if self._due.get(job_id) == at:
                del self._due[job_id]
                due.append(job_id)
        return due

    def _schedule_demotions(
        self, view: ClusterView, partition: str, keep: set[str], was_running: set[str], movers: list[str]
    ) -> None:
        heap = self._heap[partition]
        for job_id in was_running - keep:
            self._due.pop(job_id, None)
        for job_id in [*(keep - was_running), *(j for j in movers if j in keep)]:
            at = self._next_change(view, job_id, self._track[job_id], True)
            if math.isinf(at):
                self._due.pop(job_id, None)
                continue
            self._due[job_id] = at
            heapq.heappush(heap, (at, job_id))
        while heap and self._due.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        self._next[partition] = heap[0][0] if heap else math.inf


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

