"""A decision reads the engine's free resources without copying them, never writes them,
and does not test again a job that did not fit while nothing was given back."""

from __future__ import annotations

import numpy as np

from shapeshift.policies.framework.registry import make_policy
from shapeshift.policies.slurm.plan import Free, Need
from shapeshift.policies.slurm.shapes import free_borrowed
from tests.conftest import by_id, job, run
from tests.policies.slurm.test_slurm import _conf


def test_a_borrowed_free_copies_on_its_first_change():
    gpus, cpus, mem = np.array([4, 4]), np.array([8.0, 8.0]), np.array([100.0, 100.0])
    free = free_borrowed(gpus, cpus, mem)
    assert free.borrowed and free.gpus is gpus  # read in place
    free.take([(1, Need(2, 3.0, 10.0))])
    # The lender's arrays are as they were; the Free's own show node 1 less 2 GPUs,
    # 3 CPUs and 10 of memory.
    assert gpus.tolist() == [4, 4] and cpus.tolist() == [8.0, 8.0] and mem.tolist() == [100.0, 100.0]
    assert free.gpus.tolist() == [4, 2] and free.cpus.tolist() == [8.0, 5.0] and free.mem.tolist() == [100.0, 90.0]
    assert not free.borrowed
    lent = free_borrowed(gpus, cpus, mem)
    lent.give([(0, Need(1, 1.0, 1.0))])
    assert gpus.tolist() == [4, 4] and lent.gpus.tolist() == [5, 4]
    owned = free_borrowed(gpus, cpus, mem).own()
    assert owned.gpus is not gpus and owned.gpus.tolist() == [4, 4]
    # Built from lists (or arrays of other types) it is a copy from the start.
    assert not Free([1], [1.0], [1.0]).borrowed
    assert not free_borrowed(np.array([1], np.int32), cpus[:1], mem[:1]).borrowed


class _Checking:
    """Slurm's decisions, each checked to leave the engine's free arrays as they were
    (the engine applies the schedule afterwards)."""

    def __init__(self) -> None:
        self.inner = make_policy("slurm", {})
        self.decisions = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def decide(self, view):
        lent = view.free()
        before = (lent.gpus.copy(), lent.cpus.copy(), lent.mem.copy())
        schedule = self.inner.decide(view)
        after = view.free()
        assert all(np.array_equal(a, b) for a, b in zip(before, (after.gpus, after.cpus, after.mem), strict=True))
        self.decisions += 1
        return schedule


def test_decisions_that_start_jobs_and_backfill_leave_the_engine_arrays_alone(tmp_path):
    # test_simulated_backfill_and_main_scheduler's jobs: r starts in the main scheduler
    # at 0, big waits for it, s is backfilled at 2 (it ends by big's reserved start).
    jobs = [
        job("r", 0, 2, 50, user="u", tenant="A", vc="p", time_limit=100),
        job("big", 1, 4, 10, user="u", tenant="A", vc="p", time_limit=600),
        job("s", 2, 2, 30, user="u", tenant="A", vc="p", time_limit=60),
    ]
    policy = _Checking()
    result = by_id(run(jobs, _conf(tmp_path), policy))
    assert result["r"].first_start == 0 and result["s"].first_start == 2 and result["big"].first_start == 50
    assert policy.decisions >= 3


def test_the_head_is_tested_again_only_once_something_was_given_back(tmp_path):
    # a holds all 4 GPUs 0..100. b (2 GPUs, submitted at 1) heads the queue and does not
    # fit; c (1 GPU) arrives at 2 behind it. Nothing is given back before a ends at 100,
    # so b is tested twice: at 1 (no room) and at 100 (room: b and c start).
    shapes = (("a", 0, 4, 100), ("b", 1, 2, 10), ("c", 2, 1, 10))
    jobs = [job(j, t, g, d, vc="p", time_limit=600) for j, t, g, d in shapes]
    policy = make_policy("slurm", {})
    tests: list[int] = []
    real = policy.fit_head

    def counting(need, groups, free, largest):
        tests.append(need.gpus)
        return real(need, groups, free, largest)

    policy.fit_head = counting
    result = by_id(run(jobs, _conf(tmp_path, "sched/builtin", "PriorityType=priority/basic\n"), policy))
    assert result["b"].first_start == 100 and result["c"].first_start == 100
    assert tests.count(2) == 2
