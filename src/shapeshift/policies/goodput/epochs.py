"""When a goodput job next finishes an epoch: the instants its batch is re-tuned.

In the Sia artifact's simulator a job re-chooses its batch after every epoch it completes
(``sia-simulator/job.py``, ``Job.step`` calls ``update_local_bsz`` inside its loop over
epoch boundaries), not only when the scheduler gives it new GPUs. Within one 60 s round a
CIFAR-10 job crosses several epochs, so it runs at several batch sizes per round and
records a throughput row for each (``Job.update_params``): its own model is fitted on
several batches after its first round, and its batch follows its gradient noise as that
grows. A policy that acts for its jobs there (:mod:`.sia`) asks the engine to wake it at
the next such instant (``Schedule.wake_at``); these helpers say when that is.

Progress is in examples at the job's initial batch (the ``pollux`` throughput model's
unit); epoch ``e`` starts at ``boundaries[e]`` initial-batch steps (:mod:`shapeshift.perf.pollux.profiles`).
"""

from __future__ import annotations

from shapeshift.engine.state import JobStatus
from shapeshift.perf.pollux.profiles import ApplicationProfile

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
