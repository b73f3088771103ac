"""Adaptive batch sizes in the engine: progress stays exact across batch changes."""

from __future__ import annotations

import math

import pytest

from shapeshift.engine.batching import split_batch
from shapeshift.engine.contract import ROUND
from shapeshift.engine.overheads import Overheads
from shapeshift.model import Allocation, BatchSpec, JobSpec, Resources, Schedule
from shapeshift.sim.simulator import simulate
from tests.conftest import by_id, shorthand_cluster


class ToyGoodput:
    """1000 examples of work. Batch 100: 10 examples/s. Batch 200: 20 examples/s x
    efficiency 0.8 before example 500, x 1.0 after (an "epoch boundary" at 500)."""

    def total_work(self, job):
        return 1000.0

    def target_rate(self, job):
        return None

    def rate(self, job, allocation):
        return self.rate_at(job, allocation, 0.0)[0]

    def rate_at(self, job, allocation, done):
        size = allocation.batch_size or job.batch.size
        if size == 100:
            return 10.0, math.inf
        return (16.0, 500.0) if done < 500 - 1e-9 else (20.0, math.inf)


class Scripted:
    """Batch 100 on node 0 at t=0; at t=20 the ``second`` allocation; then unchanged."""

    name = "scripted"
    triggers = frozenset({ROUND})
    default_round = 20.0

    def __init__(self, second):
        self.second = second

    def decide(self, view):
        desired = dict(view.allocations)
        if view.now == 0:
            desired["a"] = Allocation(((0, Resources(1)),), batch_size=100)
        elif view.now == 20 and "a" in desired:
            desired["a"] = self.second
        return Schedule.replace(view.allocations, desired)


JOB = JobSpec("a", 0.0, 1, iterations=1000, batch=BatchSpec(100, 100, 400, adaptive=True))


def test_batch_change_mid_run_keeps_progress_exact():
    # 0-20 s at batch 100: 200 examples. At 20 s batch 200 on the same GPU: adapted in
    # place (no pause, not a reconfiguration): 16/s until example 500: 300 / 16 = 18.75 s
    # (t = 38.75); then 20/s for the last 500: 25 s. Done at 63.75 s.
    second = Allocation(((0, Resources(1)),), batch_size=200)
    result = simulate([JOB], shorthand_cluster(1, 2), Scripted(second), throughput=ToyGoodput())
    a = by_id(result)["a"]
    assert a.end_time == pytest.approx(63.75)
    assert a.reconfigurations == 0 and a.work_done == 1000.0


def test_moving_gpus_with_a_new_batch_is_a_restart():
    # Same, but at 20 s the job moves to node 1 (other GPU): a reconfiguration with the
    # 30 s restore penalty: no progress 20-50 s, then 300/16 = 18.75 s (t = 68.75), then
    # 25 s: done at 93.75 s.
    second = Allocation(((1, Resources(1)),), batch_size=200)
    result = simulate(
        [JOB], shorthand_cluster(2, 1), Scripted(second), throughput=ToyGoodput(), overheads=Overheads(0.0, 30.0)
    )
    a = by_id(result)["a"]
    assert a.end_time == pytest.approx(93.75)
    assert a.reconfigurations == 1


def test_split_batch_follows_the_pollux_simulator():
    batch = BatchSpec(32768, 256, 32768, 32, 32768)
    # one GPU above the initial batch accumulates once: 2 x 16384
    one = split_batch(batch, 32768, 1)
    assert (one.atomic, one.accum) == (16384, 1)
    # 6 GPUs, 384 with max_local 12 (BERT): local 64 -> 5 accumulation steps, atomic 11,
    # capped so the global batch stays <= 384: int(384 / 36) = 10.
    bert = split_batch(BatchSpec(384, 12, 384, 4, 12), 384, 6)
    assert (bert.atomic, bert.accum, bert.global_batch) == (10, 5, 360)


def test_batch_column_round_trips_through_the_generic_format(tmp_path):
    from shapeshift.workloads.readers import read_workload

    src = tmp_path / "w.csv"
    src.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,53,cifar10,4,2048\nncf-1,10,ncf,1,32768\n")
    original = read_workload(src)
    out = tmp_path / "generic.csv"
    original.write(out)
    again = read_workload(out, "generic")
    assert [j.batch for j in again.jobs()] == [j.batch for j in original.jobs()]
    assert again.jobs()[1].batch == BatchSpec(2048, 128, 4096, 32, 1024, adaptive=True)


def test_a_bad_batch_cell_names_its_row(tmp_path):
    from shapeshift.errors import InputError
    from shapeshift.workloads.readers import read_workload

    path = tmp_path / "g.csv"
    path.write_text("job_id,submit_time,num_gpus,duration,batch\na,0,1,10,size=64\nb,0,1,10,size=x\n")
    with pytest.raises(InputError) as err:
        read_workload(path, "generic")
    assert err.value.field == "batch" and err.value.line == 3
