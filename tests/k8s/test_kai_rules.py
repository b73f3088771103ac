"""KAI-Scheduler's fair share and scheduling cycle against the outcomes its docs state.

Each test cites the page of kai-scheduler/KAI-Scheduler v0.17.0-9 (commit d5bc503) it
transcribes; expectations are derived by hand from the rule quoted there.
"""

from __future__ import annotations

import pytest

from shapeshift.k8s.documents import parse_documents
from shapeshift.k8s.kai_config import KaiConfig, kai_from_documents
from shapeshift.k8s.kai_fairshare import decayed_usage, fair_shares
from shapeshift.k8s.kai_rules import Job, Running, run_cycle


def queue(
    name: str, quota: float = 0, *, weight: float = 1, limit: float = -1, priority: int = 100, parent: str = ""
) -> str:
    parent_line = f"  parentQueue: {parent}\n" if parent else ""
    return (
        f"kind: Queue\nmetadata: {{name: {name}}}\nspec:\n{parent_line}  priority: {priority}\n"
        f"  resources:\n    gpu: {{quota: {quota}, overQuotaWeight: {weight}, limit: {limit}}}\n"
    )


def config(*docs: str) -> KaiConfig:
    return kai_from_documents(parse_documents("---\n".join(docs), "kai.yaml"))


def gpu_shares(cfg: KaiConfig, total: float, demand: dict[str, float], usage=None) -> dict[str, float]:
    shares = fair_shares(cfg, {"gpu": total}, {q: {"gpu": v} for q, v in demand.items()}, usage)
    return {q: s.get("gpu", 0.0) for q, s in shares.items()}


def test_deep_dive_ten_gpus_three_queues():
    # scheduling-deep-dive/README.md, "Queue Priority" (diagram queue-priority): 10 GPUs;
    # Vision (priority 2, quota 2, weight 2), LLM (priority 2, quota 2, weight 1), Data
    # (priority 1, quota 3, weight 1). Quotas first: 2 + 2 + 3 = 7; the 3 surplus GPUs go
    # to priority 2 split 2:1: Vision 4, LLM 3, Data 3 (all asking for more than that).
    cfg = config(
        queue("vision", 2, weight=2, priority=2), queue("llm", 2, weight=1, priority=2), queue("data", 3, priority=1)
    )
    assert gpu_shares(cfg, 10, {"vision": 10, "llm": 10, "data": 10}) == {"vision": 4, "llm": 3, "data": 3}


def test_deserved_capped_by_request():
    # fairness/README.md, deserved calculation: fairShare += min(deserved, requested). 8 GPUs,
    # A deserves 4 but asks 2, B deserves 4 and asks 8: A 2, B 4 + the 2 left over = 6.
    cfg = config(queue("a", 4), queue("b", 4))
    assert gpu_shares(cfg, 8, {"a": 2, "b": 8}) == {"a": 2, "b": 6}


def test_priority_overrides_weight():
    # scheduling-deep-dive/README.md, Key Points: "A queue with priority=2, weight=1 gets
    # surplus before a queue with priority=1, weight=100". 6 GPUs, no quotas, both ask 6.
    cfg = config(queue("hi", 0, weight=1, priority=2), queue("lo", 0, weight=100, priority=1))
    assert gpu_shares(cfg, 6, {"hi": 6, "lo": 6}) == {"hi": 6, "lo": 0}


def test_same_priority_split_by_weight():
    # fairness/README.md: "Queues with the same priority will be reclaimed proportionally to
    # their weight"; over-quota share = remaining x weight / total weights. 9 GPUs, no
    # quotas, weights 2 and 1, both ask 9: 6 and 3.
    cfg = config(queue("a", 0, weight=2), queue("b", 0, weight=1))
    assert gpu_shares(cfg, 9, {"a": 9, "b": 9}) == {"a": 6, "b": 3}


def test_hierarchy_divides_the_parent_share():
    # fairness/README.md, "Hierarchical division: each queue's resources are further
    # distributed among its child queues". 12 GPUs: dept-a (quota 8) and dept-b (quota 4);
    # dept-a's 8 go to its children t1 (quota 6) and t2 (quota 2).
    cfg = config(
        queue("dept-a", 8), queue("dept-b", 4), queue("t1", 6, parent="dept-a"), queue("t2", 2, parent="dept-a")
    )
    shares = gpu_shares(cfg, 12, {"t1": 12, "t2": 12, "dept-b": 12})
    assert (shares["dept-a"], shares["dept-b"], shares["t1"], shares["t2"]) == (8, 4, 6, 2)


def test_limit_caps_the_fair_share():
    # queues/README.md: limit is a "Hard cap on resource consumption"; resource_division.go
    # treats a queue at its limit as satisfied. 10 GPUs, a limited to 3, b unlimited.
    cfg = config(queue("a", 0, limit=3), queue("b", 0))
    assert gpu_shares(cfg, 10, {"a": 10, "b": 10}) == {"a": 3, "b": 7}


def test_unlimited_quota_deserves_everything():
    # queues/README.md, Special Values: quota -1 is "Unlimited quota".
    cfg = config(queue("a", -1), queue("b", 0))
    assert gpu_shares(cfg, 8, {"a": 8, "b": 8}) == {"a": 8, "b": 0}


def test_usage_normalized_to_cluster_capacity():
    # time-based-fairshare/README.md, "Normalization to cluster capacity": 10 GPUs over 10
    # hours, a queue that used 24 GPU-hours (8 GPUs for 3 hours) scores 0.24.
    usage = decayed_usage([("q", "gpu", 8, 0, 3 * 3600)], {"gpu": 10}, 10 * 3600, half_life_s=None, window_s=10 * 3600)
    assert usage["q"]["gpu"] == pytest.approx(0.24)


def test_half_life_decay():
    # time-based-fairshare/README.md: "for a half life of one hour, a usage that occurred an
    # hour ago will be considered half as significant" as one consumed now. Two identical
    # short bursts, one ending now and one an hour earlier: ratio 1/2.
    h = 3600.0
    now = 10 * h
    recent = decayed_usage([("q", "gpu", 1, now - 1, now)], {"gpu": 1}, now, half_life_s=h, window_s=now)
    older = decayed_usage([("q", "gpu", 1, now - h - 1, now - h)], {"gpu": 1}, now, half_life_s=h, window_s=now)
    assert older["q"]["gpu"] / recent["q"]["gpu"] == pytest.approx(0.5, rel=1e-3)


def test_k_value_reduces_the_share_of_heavy_users():
    # time-based-fairshare design (docs/developer/designs/time-based-fairshare/
    # time-based-fairshare.md) and resource_division.go calcShareWeights:
    # P = max(0, W' + k (W' - U')). Weights 1:1 (W' = 0.5), usage 0 and 0.5, k = 1:
    # P = 1.0 and 0.5, so 12 surplus GPUs split 8 : 4.
    cfg = config(queue("fresh"), queue("heavy"))
    shares = gpu_shares(cfg, 12, {"fresh": 12, "heavy": 12}, usage={"heavy": {"gpu": 0.5}})
    assert (shares["fresh"], shares["heavy"]) == (8, 4)


def job(name: str, queue: str, gpus: float, *, pods: int = 1, priority: int = 50, created: float = 0) -> Job:
    return Job(name, queue, {"gpu": gpus}, pods, priority, created)


def test_preemption_within_queue_by_priority():
    # scheduling-deep-dive/README.md, "Workload Priority" (diagram workload-preemption): the
    # Vision queue's 2 GPUs run train (50) and build (100); more train jobs cannot preempt
    # (equal priority; build is non-preemptible); inference (125) preempts the train job.
    cfg = config(queue("vision", 2))
    running = [Running(job("train", "vision", 1), 0), Running(job("build", "vision", 1, priority=100), 0)]
    out = run_cycle(cfg, {"gpu": 2}, [job("train2", "vision", 1, created=1)], running)
    assert out.started == [] and out.evicted == []
    out = run_cycle(cfg, {"gpu": 2}, [job("inference", "vision", 1, priority=125, created=2)], running)
    assert out.evicted == ["train"] and out.started == ["inference"]


def test_preemption_never_crosses_queues():
    # Same page, "What Preemption Cannot Do: cross queue boundaries". Queue B holds both
    # GPUs within its quota; A's high-priority job neither preempts nor reclaims.
    cfg = config(queue("a", 0), queue("b", 2))
    out = run_cycle(cfg, {"gpu": 2}, [job("inf", "a", 1, priority=125)], [Running(job("t", "b", 2))])
    assert out.started == [] and out.evicted == []


def test_in_quota_resources_are_protected_from_reclaim():
    # Same page, FAQ "Why can't my inference workload in Queue-A preempt training in
    # Queue-B?": if Queue-B is at its quota, its resources are protected and Queue-A's job
    # stays pending. A (quota 2), B (quota 2), 4 GPUs: B runs 2 in quota, A runs 2; A asks 1 more.
    cfg = config(queue("a", 2), queue("b", 2))
    running = [Running(job("b1", "b", 2)), Running(job("a1", "a", 2))]
    out = run_cycle(cfg, {"gpu": 4}, [job("a2", "a", 1)], running)
    assert out.started == [] and out.evicted == []


def test_reclaim_over_quota_preemptible_work():
    # Same page, "Reclaim": a queue below its deserved quota reclaims preemptible work of a
    # queue above it. A (quota 2), B (quota 2), 4 GPUs all used by B (two 2-GPU train jobs,
    # one over quota); A's 2-GPU job reclaims B's over-quota job, the most recent one.
    cfg = config(queue("a", 2), queue("b", 2))
    running = [Running(job("b1", "b", 2), 0), Running(job("b2", "b", 2), 5)]
    out = run_cycle(cfg, {"gpu": 4}, [job("a1", "a", 2)], running)
    assert out.evicted == ["b2"] and out.started == ["a1"]


def test_non_preemptible_never_goes_over_quota():
    # Same page, FAQ "What happens when a non-preemptible workload can't fit in-quota?":
    # "It will not go over-quota" even with free GPUs. Quota 1, 4 free GPUs, 2-GPU job at 125.
    cfg = config(queue("a", 1), queue("b", 0))
    out = run_cycle(cfg, {"gpu": 4}, [job("inf", "a", 2, priority=125)], [])
    assert out.started == []
    out = run_cycle(cfg, {"gpu": 4}, [job("train", "a", 2)], [])  # preemptible: may use surplus
    assert out.started == ["train"]


def test_non_preemptible_preempts_in_its_own_queue():
    # Same FAQ: it "can trigger preemption of lower-priority preemptible workloads in its own
    # queue to free up in-quota capacity". Quota 2 = capacity 2, a train job holds both.
    cfg = config(queue("a", 2))
    out = run_cycle(cfg, {"gpu": 2}, [job("inf", "a", 2, priority=125)], [Running(job("t", "a", 2))])
    assert out.evicted == ["t"] and out.started == ["inf"]


def test_gang_all_or_nothing():
    # docs/batch/README.md (PodGroup minMember): all pods of a gang start together or none.
    # 6 free GPUs; a 4-pod job of 2 GPUs per pod (8) does not start; a 3-pod one (6) does.
    cfg = config(queue("a", 8))
    assert run_cycle(cfg, {"gpu": 6}, [job("big", "a", 2, pods=4)], []).started == []
    assert run_cycle(cfg, {"gpu": 6}, [job("fits", "a", 2, pods=3)], []).started == ["fits"]


def test_limit_is_a_hard_cap_even_with_free_gpus():
    # queues/README.md: limit is a "Hard cap on resource consumption". Limit 4, 8 free GPUs:
    # a 5-GPU job waits, a 4-GPU job starts.
    cfg = config(queue("a", 2, limit=4))
    assert run_cycle(cfg, {"gpu": 8}, [job("five", "a", 5)], []).started == []
    assert run_cycle(cfg, {"gpu": 8}, [job("four", "a", 4)], []).started == ["four"]


def test_starved_queue_allocated_first():
    # fairness/README.md, "Scheduling Priority: Queues below fair share are prioritized for
    # receiving more resources". 4 GPUs, a and b (quota 2 each); a already holds 2, both ask
    # 2 more: b, further below its fair share, gets the 2 free GPUs.
    cfg = config(queue("a", 2), queue("b", 2))
    out = run_cycle(
        cfg, {"gpu": 4}, [job("a2", "a", 2, created=0), job("b1", "b", 2, created=1)], [Running(job("a1", "a", 2))]
    )
    assert out.started == ["b1"]
