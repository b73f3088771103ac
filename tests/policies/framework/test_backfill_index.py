"""Backfill through the shape-indexed queue gives the decisions of a full scan."""

from __future__ import annotations

import pytest

from shapeshift.policies.framework.composed import AcceptAll, ComposedPolicy, FifoOrdering
from shapeshift.policies.framework.placement import FirstFit
from shapeshift.workloads.generators import poisson
from tests.conftest import jcts, job, run


def test_fifo_backfill_skips_a_blocked_shape_and_starts_what_fits():
    """1 node x 4 GPUs, FIFO with backfill. a (2 GPUs, 100 s) starts at 0. b and c (4 GPUs,
    10 s each, one shape) cannot fit while a runs. d (1 GPU, 50 s) backfills at 3. e (2 GPUs,
    10 s) arrives at 4 with 1 GPU free and waits; d ends at 53, freeing 2: b and c still do
    not fit, e starts 53-63. a ends at 100: b runs 100-110, then c 110-120.
    JCTs: a 100, b 109, c 118, d 50, e 59."""
    trace = [
        job("a", 0, 2, 100.0),
        job("b", 1, 4, 10.0),
        job("c", 2, 4, 10.0),
        job("d", 3, 1, 50.0),
        job("e", 4, 2, 10.0),
    ]
    result = run(trace, "1x4", "fifo", {"backfill": True})
    assert jcts(result) == {"a": 100.0, "b": 109.0, "c": 118.0, "d": 50.0, "e": 59.0}


class EvenPairs(FirstFit):
    """A placement whose answer is not monotone in free GPUs: a 2-GPU job fits only when an
    even number of GPUs is free, so a job that failed can fit after another job starts."""

    name = "even-pairs"

    def find(self, job, nodes, free):
        if job.num_gpus == 2 and int(free.gpus[nodes].sum()) % 2 == 1:
            return None
        return super().find(job, nodes, free)


def test_a_blocked_shape_wakes_after_a_start_and_resumes_after_it():
    """1 x 4 GPUs, FIFO with backfill, the even-pairs placement. r (1 GPU, 1000 s) runs from 0,
    leaving 3 free. At t=1 x1, x2 (2 GPUs), y (1 GPU), x3 (2 GPUs) arrive, 10 s each. The full
    scan in queue order: x1 and x2 fail (3 free, odd), y starts (2 free), x3 fits (even) and
    starts. So y and x3 run 1-11. At 11 three are free again: x1 and x2 fail. At 1000 r ends,
    4 free: x1 starts (2 left), x2 starts; both end at 1010.
    JCTs: r 1000, y 10, x3 10, x1 1009, x2 1009. Resuming the 2-GPU group at x2 instead of
    after y would start x2 at 1; never waking it would leave x3 waiting."""
    trace = [job("r", 0, 1, 1000.0), *(job(n, 1, g, 10.0) for n, g in (("x1", 2), ("x2", 2), ("y", 1), ("x3", 2)))]
    policy = ComposedPolicy("fifo-bf", AcceptAll(), FifoOrdering(), EvenPairs(), head_of_line_blocking=False)
    assert jcts(run(trace, "1x4", policy)) == {"r": 1000.0, "y": 10.0, "x3": 10.0, "x1": 1009.0, "x2": 1009.0}


@pytest.mark.parametrize("policy", ["fifo", "sjf"])
@pytest.mark.parametrize("cluster", ["3x8", "2x4"])
def test_shape_index_decides_as_the_full_scan(policy, cluster, monkeypatch):
    """Differential check on a loaded seeded trace: every job starts and ends at the same
    instant with and without the index (the full scan is the reference rule)."""
    jobs = poisson(300, 60.0, seed=7, max_gpus=8).jobs()
    indexed = run(jobs, cluster, policy, {"backfill": True})
    monkeypatch.setattr(ComposedPolicy, "_shape_queue", lambda self, view, partition: None)
    scanned = run(jobs, cluster, policy, {"backfill": True})
    times = lambda r: {j.job_id: (j.first_start, j.end_time) for j in r.jobs}  # noqa: E731
    assert times(indexed) == times(scanned)
    assert any(j.first_start > j.spec.submit_time for j in scanned.jobs)  # the queue did form


class _View:
    """The two things ``StaticKeyQueue`` reads: a partition's pending ids and each job's spec."""

    def __init__(self, gpus: dict[str, int]):
        self._gpus = gpus
        self.pending_ids = dict.fromkeys(gpus)

    def pending(self, partition):
        return self.pending_ids.keys()

    def job(self, job_id):
        from types import SimpleNamespace

        return SimpleNamespace(spec=SimpleNamespace(num_gpus=self._gpus[job_id]))


def test_a_size_bound_skips_wider_jobs_and_keeps_key_order():
    """Keys a=1 (8 GPUs), b=2 (1), c=3 (4), d=4 (1), e=5 (2). Walking with a bound that is 4
    until b is handed out, then 2: a (8 > 4) is skipped, b handed, c (4 > 2) skipped, d and e
    handed in key order. Without a bound the walk hands all five in key order; skipped
    jobs stay queued for the next decision."""
    from shapeshift.policies.framework.queues import StaticKeyQueue

    gpus = {"a": 8, "b": 1, "c": 4, "d": 1, "e": 2}
    keys = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
    view = _View(gpus)
    queue = StaticKeyQueue("", lambda v, j: keys[j])
    queue.sync(view)
    bound = {"left": 4}
    handed = []
    for _, job_id in queue.iterate(view, lambda: bound["left"]):
        handed.append(job_id)
        bound["left"] = 2
    assert handed == ["b", "d", "e"]
    queue.sync(view)  # nothing started: everyone is still waiting
    assert [j for _, j in queue.iterate(view)] == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("lease", [0, 300])
def test_srtf_and_las_decide_as_without_the_size_bound(lease, monkeypatch):
    """Differential check: skipping waiting jobs wider than the GPUs left never changes a
    start or an end (the unbounded walk is the reference rule), on a trace long enough to
    queue wide jobs behind narrow ones."""
    from shapeshift.policies.framework.queues import StaticKeyQueue

    jobs = poisson(300, 60.0, seed=3, max_gpus=8).jobs()
    both = lambda: [run(jobs, "2x8", "srtf", {"lease": lease}), run(jobs, "2x8", "las", {"lease": lease})]  # noqa: E731
    runs = {True: both()}
    plain = StaticKeyQueue.iterate
    monkeypatch.setattr(StaticKeyQueue, "iterate", lambda self, view, max_gpus=None: plain(self, view))
    runs[False] = both()
    times = lambda r: {j.job_id: (j.first_start, j.end_time) for j in r.jobs}  # noqa: E731
    for with_bound, without in zip(runs[True], runs[False], strict=True):
        assert times(with_bound) == times(without)
        assert any(j.first_start > j.spec.submit_time for j in without.jobs)
