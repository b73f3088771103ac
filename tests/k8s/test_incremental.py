"""The incremental bookkeeping of kueue/kai decisions, and the configurations derived
from a cluster's virtual clusters."""

from __future__ import annotations

import pytest

from shapeshift.cluster import shorthand_cluster
from shapeshift.k8s.kai_config import read_kai
from shapeshift.k8s.kueue_config import read_kueue
from shapeshift.k8s.kueue_cycle import run_cycles
from shapeshift.k8s.kueue_quota import QuotaTree, add_usage, empty_usage, usage_of
from shapeshift.k8s.queue_metrics import queue_fairness
from shapeshift.k8s.vc_queues import kai_yaml, kueue_yaml, vc_gpus
from shapeshift.model import ClusterSpec
from tests.conftest import job, run
from tests.k8s.test_kueue_rules import config, cq, running, wl


def test_release_is_the_inverse_of_charge_with_lending_limits():
    # team-a: 9 nominal, lendingLimit 3 (local quota 6). Charge 8 then 4, release 8: the
    # usage must equal charging 4 alone (a: 4, cohort: 0, since 4 <= local 6).
    tree = QuotaTree(config(cq("team-a-cq", 9, limits=", lendingLimit: 3"), cq("team-b-cq", 12)))
    fr = ("default-flavor", "cpu")
    usage = empty_usage()
    for amount in (8.0, 4.0, -8.0):
        add_usage(tree, usage, ("cq", "team-a-cq"), fr, amount)
    alone = usage_of(tree, [("team-a-cq", {fr: 4.0})])
    assert usage[("cq", "team-a-cq")][fr] == alone[("cq", "team-a-cq")][fr] == 4
    assert usage[("cohort", "team-ab")][fr] == alone[("cohort", "team-ab")][fr] == 0


def test_two_preemptors_in_one_cycle_when_targets_do_not_overlap():
    # Two cohorts, each: a queue of 2 CPUs lending to a borrower (c1, d1 each hold 4 of 4
    # CPUs, 2 borrowed). a1 and b1 (2 CPUs each, within nominal, reclaimWithinCohort Any)
    # need c1 and d1 evicted: different targets, so both preempt in the first cycle
    # (scheduler.go skips a preemptor only when its targets overlap another's).
    reclaim = "  preemption: {reclaimWithinCohort: Any}\n"
    cfg = config(
        cq("a", 2, cohort="x", spec=reclaim),
        cq("c", 2, cohort="x"),
        cq("b", 2, cohort="y", spec=reclaim),
        cq("d", 2, cohort="y"),
    )
    held = [running(wl("c1", "c", 4)), running(wl("d1", "d", 4))]
    out = run_cycles(cfg, [wl("a1", "a", 2), wl("b1", "b", 2)], held, max_cycles=1)
    assert sorted(out.preempted) == ["c1", "d1"]


def test_vc_queue_configs():
    # Partitions a (2 nodes x 4) and b (1 x 4): Kueue nominal 8 and 4 in one cohort, KAI
    # deserved 8 and 4 (over-quota weights the same) under a parent deserving 12.
    cluster = ClusterSpec(shorthand_cluster(3, 4).nodes, {"a": ("node000", "node001"), "b": ("node002",)})
    assert vc_gpus(cluster) == {"a": 8, "b": 4}


def test_vc_queue_configs_read_back(tmp_path):
    base = shorthand_cluster(3, 4)
    names = [n.name for n in base.nodes]
    cluster = ClusterSpec(base.nodes, {"a": tuple(names[:2]), "b": (names[2],)})
    (tmp_path / "kueue.yaml").write_text(kueue_yaml(cluster))
    (tmp_path / "kai.yaml").write_text(kai_yaml(cluster))
    kueue = read_kueue(tmp_path / "kueue.yaml")
    nominal = {n: q.resource_groups[0].flavors[0].resources[0].nominal for n, q in kueue.cluster_queues.items()}
    assert nominal == {"vc-a": 8, "vc-b": 4}
    assert {q.cohort for q in kueue.cluster_queues.values()} == {"all-vcs"}
    assert kueue.local_queues[("a", "a")].cluster_queue == "vc-a"
    kai = read_kai(tmp_path / "kai.yaml")
    gpu = {
        q: (kai.queues[q].resource("gpu").quota, kai.queues[q].resource("gpu").over_quota_weight) for q in kai.leaves
    }
    assert gpu == {"a": (8, 8), "b": (4, 4)} and kai.queues["all-vcs"].resource("gpu").quota == 12


def test_queue_fairness_of_any_policy():
    # fifo on 1 x 4: a1 (vc a, 4 GPUs) 0-100, b1 (vc b, 4 GPUs) waits 90 s, runs 100-150.
    # GPU time: a 400, b 200 -> shares 2/3, 1/3; deserved 1/2 each: ratios 4/3, 2/3,
    # Jain (2)^2 / (2 (16/9 + 4/9)) = 4 / (40/9) = 0.9; worst mean wait 90 s (b).
    result = run([job("a1", 0, 4, 100, vc="a"), job("b1", 10, 4, 50, vc="b")], "1x4", "fifo")
    fair = queue_fairness(result.jobs, {"a": 2.0, "b": 2.0})
    assert fair["queues_jain_share_vs_deserved"] == pytest.approx(0.9)
    assert fair["queues_worst_mean_wait_s"] == pytest.approx(90)
    # slowdowns: a 100/100 = 1, b 140/50 = 2.8: Jain 3.8^2 / (2 (1 + 7.84)) = 0.8167
    assert fair["queues_jain_slowdown"] == pytest.approx(3.8**2 / (2 * 8.84))


def test_shipped_philly_examples_are_the_generated_ones():
    from pathlib import Path

    from shapeshift.cluster_file import load_cluster_file
    from shapeshift.datasets import lookup

    found = lookup("philly-vcs")
    if found is None:
        pytest.skip("philly-vcs not available")
    cluster = load_cluster_file(found[1])
    examples = Path(__file__).resolve().parents[2] / "examples" / "k8s"
    assert (examples / "philly-kueue.yaml").read_text().split("\n", 1)[1] == kueue_yaml(cluster)
    assert (examples / "philly-kai.yaml").read_text().split("\n", 1)[1] == kai_yaml(cluster)


def test_pending_queues_keep_queue_order():
    # Groups by (queue, requests, priority); a workload added out of order (an evicted one
    # coming back) still takes its place by priority, then creation time.
    from shapeshift.k8s.kueue_cycle import PendingQueues

    queued = PendingQueues()
    for w in (wl("b", "a", 1, created=2.0), wl("c", "a", 1, created=3.0), wl("a", "a", 1, created=1.0)):
        queued.add(w)
    group = next(iter(queued.groups["a"].values()))
    assert [w.name for w in group] == ["a", "b", "c"]
    queued.pop_head(group[0])
    assert [w.name for w in group] == ["b", "c"] and queued.names == {"b", "c"}


class _Waiting:
    """The parts of a ClusterView that ``PendingQueues.sync`` reads: one waiting queue."""

    def __init__(self, waiting, touched=(), gone=()):
        from collections import OrderedDict
        from types import SimpleNamespace

        from shapeshift.engine.state import JobState

        self.partitions = {"": None}
        self._waiting = OrderedDict.fromkeys(waiting)
        self.touched = tuple(touched)
        self.allocations = {}
        self._states = {
            j: SimpleNamespace(state=JobState.COMPLETED if j in gone else JobState.PENDING) for j in touched
        }

    def pending(self, partition):
        return self._waiting.keys()

    def pending_count(self, partition):
        return len(self._waiting)

    def job(self, job_id):
        return self._states[job_id]


def test_pending_queues_follow_the_waiting_queue_by_its_tail():
    # The engine appends every job entering its waiting queue, so the new jobs are the tail
    # after the last one held; a job withdrawn from the queue is among the touched jobs; and
    # a job held nowhere that is not in the tail (one admitted and evicted again within a
    # decision) is caught by the count of waiting jobs (3 waiting, 2 held) and added.
    from shapeshift.k8s.kueue_cycle import PendingQueues

    made = {n: wl(n, "a", 1, created=i) for i, n in enumerate("abcde")}
    queued = PendingQueues()
    queued.sync(_Waiting("ab"), made.__getitem__)
    assert queued.names == {"a", "b"}
    queued.pop_head(made["a"])  # admitted and started: it leaves the engine's queue too
    queued.sync(_Waiting("bc"), made.__getitem__)
    assert queued.names == {"b", "c"}
    queued.sync(_Waiting("b", touched="c", gone="c"), made.__getitem__)  # c withdrawn
    assert queued.names == {"b"}
    queued.sync(_Waiting("dbe"), made.__getitem__)  # d not in the tail after b
    assert queued.names == {"b", "d", "e"}
    assert [w.name for g in queued.groups["a"].values() for w in g] == ["b", "d", "e"]
