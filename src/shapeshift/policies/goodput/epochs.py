"""The batch a goodput job runs at, and the instants it re-chooses it (its epoch ends).

In the Sia artifact's simulator a job re-chooses its batch after every epoch it completes
(``sia-simulator/job.py``, ``Job.step`` calls ``update_local_bsz`` inside its loop over
epoch boundaries), not only when the scheduler gives it new GPUs. Within one 60 s round a
CIFAR-10 job crosses several epochs, so it runs at several batch sizes per round and
records a throughput row for each (``Job.update_params``): its own model is fitted on
several batches after its first round, and its batch follows its gradient noise as that
grows. A policy that acts for its jobs there (:mod:`.sia`) asks the engine to wake it at
the next such instant (``Schedule.wake_at``); these helpers say when that is. The Pollux
artifact's simulator does the same (petuum/adaptdl ``osdi21-artifact``,
``simulator/simulator.py``, ``Job.step``: "Re-scale batch size between epochs"), so
:mod:`.pollux` shares them.

Progress is in examples at the job's initial batch (the ``pollux`` throughput model's
unit); epoch ``e`` starts at ``boundaries[e]`` initial-batch steps (:mod:`shapeshift.perf.pollux.profiles`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from shapeshift.engine.batching import split_batch
from shapeshift.engine.state import JobStatus
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, BatchSpec, JobSpec, Schedule
from shapeshift.perf.pollux.ground_truth import typed_limits
from shapeshift.perf.pollux.knowledge import GoodputKnowledge
from shapeshift.perf.pollux.online import OnlineFits
from shapeshift.perf.pollux.profiles import ApplicationProfile, app_name, load_profile

#: GPUs per node of a placement.
Shape = tuple[int, ...]
#: (job, batch it ran at, progress for its noise, GPU type, shape) -> the batch to run at.
BatchChooser = Callable[[JobSpec, "int | None", float, str, Shape], int]
#: A policy's whole decision at a round (allocations and batches).
RoundDecision = Callable[[ClusterView], Schedule]

#: A boundary less than this many seconds of training away counts as crossed: event times
#: are exact to 1 us, so a wake-up asked for at a boundary may land a hair before it.
SLACK_S = 1e-5


def epoch_at(app: ApplicationProfile, done: float, rate: float) -> int:
    """The epoch a job is in at progress ``done``, running at ``rate``."""
    epoch = app.epoch_of(done / app.init_batch + 1e-9)
    ahead = epoch + 1 < app.max_epochs and rate > 0
    if ahead and (app.boundaries[epoch + 1] * app.init_batch - done) / rate <= SLACK_S:
        epoch += 1
    return epoch


def next_boundary(status: JobStatus, app: ApplicationProfile, now: float) -> float | None:
    """The instant ``status``'s job finishes its current epoch at its current rate (after
    its restart pause); None when it is not progressing or is in its last epoch."""
    if status.rate <= 0:
        return None
    done = status.progress_at(now)
    epoch = epoch_at(app, done, status.rate)
    if epoch + 1 >= app.max_epochs:
        return None
    start = max(now, status.stall_until)
    return start + max(app.boundaries[epoch + 1] * app.init_batch - done, 0.0) / status.rate


def own_batch(
    goodput: GoodputKnowledge,
    online: OnlineFits | None,
    spec: JobSpec,
    batch_now: int | None,
    progress: float,
    gpu_type: str,
    shape: Shape,
    by_placement: bool,
    cap_total: bool = True,
    cut: str = "regroup",
) -> int:
    """The best batch on ``shape`` (GPUs per node) of ``gpu_type`` for the job's own model
    there (``Job.update_local_bsz``; the application's model without ``online`` fits),
    with the noise it measured at ``batch_now`` and ``progress``. ``by_placement``: on a
    typed profile each GPU's batch stays within what was measured on that placement
    (``get_max_local_bsz``), else within the type's limit. ``cap_total``: the candidate
    rule of :class:`~shapeshift.perf.pollux.goodput.GoodputGrid`. ``cut``: how a candidate
    past the largest batch runs (:func:`cut_back`)."""
    assert spec.batch is not None
    g = sum(shape)
    table = goodput.job(spec, batch_now, progress, gpu_type)
    profile = load_profile(goodput.root, app_name(spec.model), gpu_type) if goodput.root else None
    if by_placement and profile is not None and profile.gpu_type is not None:
        cap = profile.local_cap(shape)
        table = replace(table, limits=replace(table.limits, max_local=cap, min_local=min(table.limits.min_local, cap)))
    fitted = online.params(spec.job_id, gpu_type) if online is not None else table.params
    if fitted is None:
        # No model of its own on this type yet: the artifact's ``update_local_bsz``
        # starts it at its initial batch, or its smallest per-GPU batch on every GPU.
        return min(max(spec.batch.initial, table.limits.min_local * g), spec.batch.max_size)
    best = int(replace(table, params=fitted, cap_total=cap_total).best(len(shape), g)[1][0])
    if cap_total or profile is None:
        return best
    return cut_back(typed_limits(spec.batch, profile, shape), best, g, cut)


def tuned(spec: JobSpec) -> JobSpec:
    """``spec`` with its batch adaptive within the same limits: a policy whose source tunes
    every job's batch runs a fixed one this way (the Sia artifact's ``cluster.py``,
    ``Cluster.__init__``: ``enable_bsz_tuning`` for every job under Sia)."""
    if spec.batch is None or spec.batch.adaptive:
        return spec
    return replace(spec, batch=replace(spec.batch, adaptive=True))


def cut_back(limits: BatchSpec, best: int, replicas: int, cut: str) -> int:
    """The batch to hand the engine for a goodput search's candidate ``best`` (global, on
    ``replicas`` GPUs), which may pass ``limits.max_size`` once each GPU's share is rounded up.

    Both artifacts' ``Job.update_local_bsz`` keep the candidate's accumulation steps and cut
    each GPU's batch to ``int(max_size / (replicas x (steps + 1)))``. ``artifact``: the largest
    batch is handed over, whose split (:func:`.split_batch`) is exactly that: a candidate past
    it rounds up the largest's own per-GPU share, so it has the largest's accumulation steps
    (YOLOv3 on 3 GPUs, largest 512: candidate 528 as 22 x 8 per GPU, run as 22 x 7 = 462).
    ``regroup`` (ours): the cut-back global batch, which :func:`.split_batch` re-splits into
    fewer, fuller micro-batches (462 runs as 20 x 8 = 480)."""
    if cut == "artifact":
        return min(best, limits.max_size)
    return split_batch(limits, best, replicas).global_batch


def running_batch(goodput: GoodputKnowledge, spec: JobSpec, alloc: Allocation, gpu_type: str) -> int:
    """The global batch ``alloc`` runs at, as the ground truth splits it (the batch whose
    gradient noise the job measures: the artifacts' ``grad_params`` of ``Job.step``)."""
    assert spec.batch is not None and alloc.batch_size is not None
    profile = load_profile(goodput.root, app_name(spec.model), gpu_type) if goodput.root else None
    shape = tuple(r.gpus for _, r in alloc.placement)
    limits = typed_limits(spec.batch, profile, shape) if profile is not None else spec.batch
    return split_batch(limits, alloc.batch_size, alloc.gpus).global_batch


def round_batch(
    view: ClusterView, status: JobStatus, gpu_type: str, place: dict[int, int], choose: BatchChooser
) -> int:
    """The batch a round gives a job placed on ``place`` (GPUs per node, of ``gpu_type``):
    ``choose``'s for its model, except that a job still in its checkpoint-restore pause on
    GPUs of the same type and shape (the artifacts' placement) keeps its batch. Both
    artifacts re-choose a batch only at the end of ``Job.step``'s loop, after the job has
    run; a job restoring for a whole round never gets there."""
    alloc = status.allocation
    shape = tuple(place[n] for n in sorted(place))
    if (
        alloc is not None
        and alloc.batch_size is not None
        and status.stall_until >= view.now
        and view.cluster.nodes[alloc.placement[0][0]].gpu_type == gpu_type
        and tuple(r.gpus for _, r in sorted(alloc.placement)) == shape
    ):
        return alloc.batch_size
    batch_now = alloc.batch_size if alloc is not None else None
    return choose(status.spec, batch_now, status.progress_at(view.now), gpu_type, shape)


class EpochRetuner:
    """Remembers, per running job whose batch the policy chose (an adaptive job's, or a
    fixed one's that the policy tunes: ``Allocation.batch_size`` set), the epoch and
    progress at which it was last chosen; at a wake-up re-chooses the batch of every job
    that has finished an epoch since, and says when the next one will."""

    def __init__(self, goodput: GoodputKnowledge, online: OnlineFits | None, choose: BatchChooser) -> None:
        self.goodput = goodput
        self.online = online
        self.choose = choose
        self._tuned: dict[str, tuple[int, float]] = {}

    def _app(self, spec: JobSpec, alloc: Allocation | None) -> ApplicationProfile | None:
        if alloc is None or alloc.batch_size is None or spec.batch is None:
            return None
        return self.goodput.apps.get(app_name(spec.model))

    def retune(self, view: ClusterView) -> Schedule:
        """Every running job that finished an epoch since its batch was chosen records the
        row it ran and takes the best batch for its model on the same GPUs, with the noise
        it measured in that epoch (the artifact's ``grad_params`` of its last step): a batch
        change on the same GPUs, not a restart."""
        desired = dict(view.allocations)
        for job_id, alloc in view.allocations.items():
            status = view.job(job_id)
            app, tuned = self._app(status.spec, alloc), self._tuned.get(job_id)
            if app is None or tuned is None or status.stall_until > view.now:
                continue
            if epoch_at(app, status.progress_at(view.now), status.rate) <= tuned[0]:
                continue
            gpu_type = view.cluster.nodes[alloc.placement[0][0]].gpu_type
            if self.online is not None:
                self.online.observe(status.spec, alloc, gpu_type)
            shape = tuple(r.gpus for _, r in alloc.placement)
            batch = self.choose(status.spec, alloc.batch_size, tuned[1], gpu_type, shape)
            if batch != alloc.batch_size:
                desired[job_id] = replace(alloc, batch_size=batch)
        return Schedule.replace(view.allocations, desired)

    def mark(self, view: ClusterView, schedule: Schedule) -> float | None:
        """Remember each running job's epoch and progress after ``schedule``; the next
        instant one of them finishes an epoch (for a job whose allocation changes now, a
        microsecond on, once the engine has set its new rate)."""
        self._tuned = {}
        wake: float | None = None
        for job_id in {*schedule.base, *schedule.changes}:
            alloc = schedule.changes.get(job_id, schedule.base.get(job_id))
            status = view.job(job_id)
            app = self._app(status.spec, alloc)
            if alloc is None or app is None:
                continue
            done = status.progress_at(view.now)
            self._tuned[job_id] = (epoch_at(app, done, status.rate), done)
            at = view.now + 1e-6 if job_id in schedule.changes else next_boundary(status, app, view.now)
            if at is not None and (wake is None or at < wake):
                wake = at
        return wake


def decide_between_epochs(view: ClusterView, retuner: EpochRetuner, round_decision: RoundDecision) -> Schedule:
    """A round timer runs the policy's whole decision; any other wake-up (an epoch
    boundary) re-chooses batches only, the round's allocations staying. Either way the
    engine is asked to wake the policy at the next epoch boundary of a running job."""
    schedule = round_decision(view) if view.timer_fired else retuner.retune(view)
    return replace(schedule, wake_at=retuner.mark(view, schedule))
