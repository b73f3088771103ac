"""``kueue`` and ``kai`` as Shapeshift policies: simulated end to end on hand-computed traces."""

from __future__ import annotations

import random

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.policies.framework.registry import make_policy
from tests.conftest import by_id, jcts, job, run

KUEUE = """
kind: ResourceFlavor
metadata: {name: default-flavor}
---
kind: ClusterQueue
metadata: {name: team-a-cq}
spec:
  namespaceSelector: {}
  cohortName: team-ab
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources: [{name: nvidia.com/gpu, nominalQuota: 2}]
---
kind: ClusterQueue
metadata: {name: team-b-cq}
spec:
  namespaceSelector: {}
  cohortName: team-ab
  preemption: {reclaimWithinCohort: %s}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources: [{name: nvidia.com/gpu, nominalQuota: 2}]
---
kind: LocalQueue
metadata: {name: a, namespace: team-a}
spec: {clusterQueue: team-a-cq}
---
kind: LocalQueue
metadata: {name: b, namespace: team-b}
spec: {clusterQueue: team-b-cq}
"""

NO_COST = Overheads(0.0, 0.0)


def _jobs():
    return [job("a1", 0, 4, 100, tenant="a"), job("b1", 10, 2, 50, tenant="b")]


@pytest.mark.parametrize(("reclaim", "expected"), [("Any", {"a1": 150, "b1": 50}), ("Never", {"a1": 100, "b1": 140})])
def test_kueue_borrow_then_reclaim(tmp_path, reclaim, expected):
    # 4 GPUs; team-a and team-b each 2 nominal, one cohort. a1 (4 GPUs, 100 s) borrows
    # team-b's 2 at 0. b1 (2 GPUs) arrives at 10, within team-b's nominal quota.
    # reclaimWithinCohort Any: a1 is evicted at 10, b1 runs 10-60; a1 needs 4 and waits
    # until 60, then runs its remaining 90 s: ends at 150. Never: b1 waits until 100, ends 150.
    path = tmp_path / "kueue.yaml"
    path.write_text(KUEUE % reclaim)
    policy = make_policy("kueue", {"config": str(path), "queue_from": "tenant"})
    result = run(_jobs(), "1x4", policy, overheads=NO_COST)
    assert jcts(result) == expected
    assert by_id(result)["a1"].preemptions == (1 if reclaim == "Any" else 0)


KAI = """
kind: Queue
metadata: {name: a}
spec: {resources: {gpu: {quota: 2}}}
---
kind: Queue
metadata: {name: b}
spec: {resources: {gpu: {quota: 2}}}
"""


def test_kai_reclaims_over_quota_work(tmp_path):
    # 4 GPUs; queues a and b deserve 2 each. a1 (4 GPUs) runs over quota from 0; b1 (2)
    # at 10: b is within its fair share (2), a above it (4 > 2): a1 is reclaimed, b1 runs
    # 10-60, a1 resumes at 60 with 90 s left: ends at 150.
    path = tmp_path / "kai.yaml"
    path.write_text(KAI)
    policy = make_policy("kai", {"config": str(path), "queue_from": "tenant"})
    result = run(_jobs(), "1x4", policy, overheads=NO_COST)
    assert jcts(result) == {"a1": 150, "b1": 50}



def test_kai_job_allocated_then_reclaimed_in_one_cycle_waits_for_the_next_cycle(tmp_path):
    # 6 GPUs; queue a deserves 2, b 4 (fair shares 2 and 4: the quotas use every GPU). r1
    # (a, 3 GPUs) runs over quota from 0. At 10, a2 (a, 2) and b1 (b, 4) arrive. Allocate:
    # b is the more starved queue but b1 does not fit the 3 free GPUs; a2 fits and is
    # allocated. Reclaim for b1 (b within its share, a at 5 > 2): victims newest first, a2
    # then r1, free 6; b1 starts at 10. a2's allocation was undone within the session
    # (statement), so it waits for KAI's next cycle one schedule period (1 s) later, when
    # 2 GPUs are free: a2 runs 11-111. Placing a2 at 10 would be the undone allocation.
    path = tmp_path / "kai.yaml"
    path.write_text(
        "kind: Queue\nmetadata: {name: a}\nspec:\n  resources:\n    gpu: {quota: 2}\n---\n"
        "kind: Queue\nmetadata: {name: b}\nspec:\n  resources:\n    gpu: {quota: 4}\n"
    )
    policy = make_policy("kai", {"config": str(path)})
    jobs = [
        job("r1", 0, 3, 1000, queue_name="a"),
        job("a2", 10, 2, 100, queue_name="a"),
        job("b1", 10, 4, 100, queue_name="b"),
    ]
    result = by_id(run(jobs, "1x6", policy, overheads=NO_COST))
    assert (result["b1"].first_start, result["a2"].first_start) == (10, 11)
    assert result["r1"].preemptions == 1

def test_unknown_queue_is_one_input_error(tmp_path):
    path = tmp_path / "kai.yaml"
    path.write_text(KAI)
    policy = make_policy("kai", {"config": str(path), "queue_from": "tenant"})
    with pytest.raises(InputError, match="queue 'z'"):
        run([job("x", 0, 1, 10, tenant="z")], "1x4", policy)


def test_bad_config_file_is_an_input_error(tmp_path):
    path = tmp_path / "kueue.yaml"
    path.write_text("kind: Deployment\nmetadata: {name: web}\n")
    with pytest.raises(InputError, match="unknown kind"):
        make_policy("kueue", {"config": str(path)})
    with pytest.raises(InputError, match="cannot read"):
        make_policy("kai", {"config": str(tmp_path / "missing.yaml")})


def test_kueue_priority_class(tmp_path):
    path = tmp_path / "kueue.yaml"
    path.write_text(KUEUE % "Any" + "---\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: 1000\n")
    policy = make_policy("kueue", {"config": str(path), "priority_class": "high"})
    assert policy.priority == 1000
    with pytest.raises(InputError, match="priority_class 'low'"):
        make_policy("kueue", {"config": str(path), "priority_class": "low"})


def test_kai_time_based_fair_share_runs(tmp_path):
    # Two queues with no quota, weight 1 each, 4 GPUs, half-life 100 s. a1 uses all 4 GPUs
    # 0-100; a2 and b1 (4 GPUs each) wait from 50. At 100, a's decayed usage over the decayed
    # capacity is 1 - 0.5 = 0.5 of the window's 0.5^0..0.5^36 weight (~0.5); b's is 0. With
    # k = 1: P_a = 0.5 + (0.5 - 0.5) = 0.5, P_b = 1.0: portions 4/3 and 8/3, floored to 1
    # and 2, the last GPU to b (larger remainder): fair shares a 1, b 3. Queue order
    # (queue_order.go): both within fair share and quota, same priority, then the smaller
    # (allocated + job) / fair share: b (4/3) before a (4): b1 runs 100-110, then a2.
    shard = (
        "---\nkind: SchedulingShard\nmetadata: {name: default}\n"
        "spec: {usageDBConfig: {clientType: prometheus, usageParams: {halfLifePeriod: 100s, windowSize: 1h}}}\n"
    )
    path = tmp_path / "kai.yaml"
    path.write_text(KAI.replace("quota: 2", "quota: 0") + shard)
    policy = make_policy("kai", {"config": str(path), "queue_from": "tenant"})
    jobs = [job("a1", 0, 4, 100, tenant="a"), job("a2", 50, 4, 10, tenant="a"), job("b1", 50, 4, 10, tenant="b")]
    result = by_id(run(jobs, "1x4", policy, overheads=NO_COST))
    assert result["b1"].first_start == 100 and result["a2"].first_start == 110


def test_kai_kept_state_matches_the_engine_at_every_decision(tmp_path):
    # The policy keeps its waiting and running jobs between decisions, reading only the
    # jobs the engine lists as touched and the arrivals at the end of its queues. At every
    # decision that kept state must hold exactly the engine's waiting and running jobs.
    # Seeded jobs over two queues with priority classes (preemption, reclaim, evictions
    # re-queued) on 2 x 4 GPUs.
    path = tmp_path / "kai.yaml"
    path.write_text(KAI)
    policy = make_policy("kai", {"config": str(path), "queue_from": "tenant"})
    rng = random.Random(3)
    jobs = [
        job(
            f"j{i}",
            rng.uniform(0, 500),
            rng.choice((1, 2, 4)),
            rng.uniform(10, 200),
            tenant=rng.choice("ab"),
            priority_class=rng.choice(("train", "train", "build", "inference")),
        )
        for i in range(60)
    ]
    decide = policy.decide
    checked = []

    def checking(view):
        schedule = decide(view)
        state = policy.tracker.state
        waiting = {j for p in view.partitions for j in view.pending(p)}
        running = set(view.allocations)
        for job_id, alloc in schedule.changes.items():
            (running.discard if alloc is None else running.add)(job_id)
            (waiting.add if alloc is None else waiting.discard)(job_id)
        assert set(state.pending) == waiting and set(state.running) == running
        checked.append(view.now)
        return schedule

    policy.decide = checking
    # (non-preemptible 4-GPU jobs never start: their queue deserves 2 GPUs)
    run(jobs, "2x4", policy, overheads=NO_COST)
    assert len(checked) > 60
