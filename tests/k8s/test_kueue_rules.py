"""Kueue admission rules against the outcomes its documentation states.

Every test cites the page of kubernetes-sigs/kueue (v0.20.0-devel, commit ff69552)
site/content/en/docs/concepts/ it transcribes, and derives the expectation by hand from
the rule quoted there.
"""

from __future__ import annotations

from shapeshift.k8s.documents import parse_documents
from shapeshift.k8s.kueue_config import KueueConfig, kueue_from_documents
from shapeshift.k8s.kueue_cycle import run_cycles
from shapeshift.k8s.kueue_quota import QuotaTree, dominant_share, usage_of
from shapeshift.k8s.kueue_rules import FIT, PREEMPT, Admitted, Options, Workload, assign_flavors

FLAVOR = "kind: ResourceFlavor\nmetadata: {name: default-flavor}\n"


def cq(name: str, cpu: float, *, cohort: str = "team-ab", extra: str = "", limits: str = "", spec: str = "") -> str:
    cohort_line = f"  cohortName: {cohort}\n" if cohort else ""
    return (
        f"kind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n  namespaceSelector: {{}}\n{cohort_line}{spec}"
        "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: default-flavor\n"
        f"      resources:\n      - {{name: cpu, nominalQuota: {cpu}{limits}}}\n{extra}"
    )


def config(*docs: str) -> KueueConfig:
    return kueue_from_documents(parse_documents("---\n".join((FLAVOR, *docs)), "test.yaml"))


def wl(name: str, queue: str, cpu: float, *, priority: int = 0, created: float = 0.0) -> Workload:
    return Workload(name, queue, {"cpu": cpu}, priority, created)


def running(w: Workload, at: float = 0.0, flavor: str = "default-flavor") -> Admitted:
    return Admitted(w, {r: flavor for r in w.requests}, at)


# cluster_queue.md, "Borrowing example": team-a-cq 9 CPUs, team-b-cq 12 CPUs, one cohort.
BORROW = (cq("team-a-cq", 9), cq("team-b-cq", 12))


def test_borrowing_up_to_the_cohort_total():
    # "If team-b-cq has no admitted Workloads, team-a-cq can admit Workloads with resources
    # adding up to 12+9=21 CPUs": 21 is admitted, borrowing 12.
    out = run_cycles(config(*BORROW), [wl("a", "team-a-cq", 21)])
    assert out.names() == ["a"]


def test_borrowing_never_beyond_the_cohort_total():
    # 22 > 21: no flavor can ever hold it (potential available 21), so it stays pending.
    out = run_cycles(config(*BORROW), [wl("a", "team-a-cq", 22)])
    assert out.names() == [] and [w.name for w in out.pending] == ["a"]


def test_nominal_quota_heads_go_before_borrowing_heads():
    # "If team-b-cq has pending Workloads and team-a-cq has all its nominalQuota used, Kueue
    # will admit Workloads in team-b-cq before admitting any new Workloads in team-a-cq."
    # team-a holds 9 (its nominal); a2 (older, 6 CPUs) would borrow, b1 (12) fits nominal:
    # b1 first, then 21 - 9 - 12 = 0 left, so a2 waits.
    cfg = config(*BORROW)
    a1 = wl("a1", "team-a-cq", 9)
    out = run_cycles(cfg, [wl("a2", "team-a-cq", 6, created=1), wl("b1", "team-b-cq", 12, created=2)], [running(a1)])
    assert out.names() == ["a1", "b1"] and [w.name for w in out.pending] == ["a2"]


def test_borrowing_limit():
    # cluster_queue.md, "BorrowingLimit": team-a-cq 9 with borrowingLimit 1 "can admit
    # Workloads with resources adding up to 9+1=10 CPUs".
    cfg = config(cq("team-a-cq", 9, limits=", borrowingLimit: 1"), cq("team-b-cq", 12))
    assert run_cycles(cfg, [wl("a", "team-a-cq", 10)]).names() == ["a"]
    assert run_cycles(cfg, [wl("a", "team-a-cq", 11)]).names() == []


def test_no_borrowing_limit_means_the_whole_cohort():
    # Same page: "If borrowingLimit is empty ... team-b-cq can use up to 12+9 CPUs."
    cfg = config(cq("team-a-cq", 9, limits=", borrowingLimit: 1"), cq("team-b-cq", 12))
    assert run_cycles(cfg, [wl("b", "team-b-cq", 21)]).names() == ["b"]


def test_lending_limit():
    # cluster_queue.md, "LendingLimit": team-b-cq 12 with lendingLimit 1; team-a-cq (9)
    # "can admit Workloads with resources adding up to 9+1=10 CPUs".
    cfg = config(cq("team-a-cq", 9), cq("team-b-cq", 12, limits=", lendingLimit: 1"))
    assert run_cycles(cfg, [wl("a", "team-a-cq", 10)]).names() == ["a"]
    assert run_cycles(cfg, [wl("a", "team-a-cq", 11)]).names() == []


def test_no_lending_limit_lends_everything():
    # Same page: "If lendingLimit is not specified ... team-b-cq can use up to 9+12 CPUs":
    # with team-a-cq lending everything, team-b-cq admits 21.
    cfg = config(cq("team-a-cq", 9), cq("team-b-cq", 12, limits=", lendingLimit: 1"))
    assert run_cycles(cfg, [wl("b", "team-b-cq", 21)]).names() == ["b"]


def test_no_cohort_no_borrowing():
    # cluster_queue.md, "Cohort": "If the spec.cohort field is empty, the ClusterQueue ...
    # cannot borrow quota from any other ClusterQueue."
    cfg = config(cq("team-a-cq", 9, cohort=""), cq("team-b-cq", 12, cohort=""))
    assert run_cycles(cfg, [wl("a", "team-a-cq", 10)]).names() == []


TWO_FLAVORS = """kind: ResourceFlavor
metadata: {name: spot}
---
kind: ClusterQueue
metadata: {name: team-a-cq}
spec:
  namespaceSelector: {}
  cohortName: team-ab
%s  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 4}]
    - name: spot
      resources: [{name: cpu, nominalQuota: 6}]
---
kind: ClusterQueue
metadata: {name: team-b-cq}
spec:
  namespaceSelector: {}
  cohortName: team-ab
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 4}]
    - name: spot
      resources: [{name: cpu, nominalQuota: 0}]
"""


def test_flavors_tried_in_listed_order():
    # cluster_queue.md, "Flavors and borrowing semantics": "If the Workload doesn't fit,
    # Kueue evaluates the next flavor in the list." 3 CPUs fit default-flavor (4); then
    # 3 more: default-flavor would need borrowing from team-b (MayStopSearch takes it).
    cfg = config(TWO_FLAVORS % "")
    out = run_cycles(cfg, [wl("x", "team-a-cq", 3)])
    assert out.flavor_of("x", "cpu") == "default-flavor"
    out = run_cycles(cfg, [wl("y", "team-a-cq", 5)])
    # 5 > 4 nominal in default-flavor but <= 8 with team-b's lendable 4: fits by borrowing,
    # and whenCanBorrow defaults to MayStopSearch, so the search stops at default-flavor.
    assert out.flavor_of("y", "cpu") == "default-flavor"


def test_when_can_borrow_try_next_flavor():
    # cluster_queue.md, "FlavorFungibility": with whenCanBorrow: TryNextFlavor Kueue goes on,
    # and spot (6) fits 5 without borrowing, which is selected at once.
    cfg = config(TWO_FLAVORS % "  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n")
    out = run_cycles(cfg, [wl("y", "team-a-cq", 5)])
    assert out.flavor_of("y", "cpu") == "spot"


def _preempt_setup(fungibility: str):
    # default-flavor: team-a holds 4 (its nominal) with a low-priority workload, team-b holds
    # 4: a 2-CPU high-priority workload can only get default-flavor by preempting; spot fits.
    cfg = config(TWO_FLAVORS % ("  preemption: {withinClusterQueue: LowerPriority}\n" + fungibility))
    tree = QuotaTree(cfg)
    held = [running(wl("low", "team-a-cq", 4)), running(wl("b", "team-b-cq", 4))]
    usage = usage_of(tree, ((a.workload.cluster_queue, a.charges()) for a in held))
    return cfg, tree, usage, held


def test_when_can_preempt_defaults_to_next_flavor():
    # cluster_queue.md, "FlavorFungibility": whenCanPreempt defaults to TryNextFlavor, and a
    # flavor that fits without preemption or borrowing is selected: spot, nobody preempted.
    cfg, tree, usage, held = _preempt_setup("")
    a = assign_flavors(tree, usage, wl("high", "team-a-cq", 2, priority=10))
    assert (a.flavors["cpu"], a.mode, a.borrows) == ("spot", FIT, False)
    out = run_cycles(cfg, [wl("high", "team-a-cq", 2, priority=10)], held)
    assert out.flavor_of("high", "cpu") == "spot" and out.preempted == []


def test_when_can_preempt_may_stop_search():
    # With whenCanPreempt: MayStopSearch the search stops at default-flavor, which needs
    # preemption: the low-priority workload of the same ClusterQueue is evicted, and the
    # preemptor is admitted on default-flavor in a later cycle.
    cfg, tree, usage, held = _preempt_setup("  flavorFungibility: {whenCanPreempt: MayStopSearch}\n")
    a = assign_flavors(tree, usage, wl("high", "team-a-cq", 2, priority=10))
    assert (a.flavors["cpu"], a.mode) == ("default-flavor", PREEMPT)
    out = run_cycles(cfg, [wl("high", "team-a-cq", 2, priority=10)], held)
    assert out.preempted == ["low"] and out.flavor_of("high", "cpu") == "default-flavor"


def test_preference_preemption_over_borrowing():
    # cluster_queue.md, "FlavorFungibility", preference: BorrowingOverPreemption (default)
    # ranks (Fit, Borrow) above (Preempt, NoBorrow); PreemptionOverBorrowing the reverse.
    # team-a: flavor f1 nominal 2 (free 2 in team-b to borrow), f2 nominal 4 held by a
    # low-priority workload of its own. A 3-CPU workload: f1 fits by borrowing, f2 by preempting.
    base = """kind: ResourceFlavor
metadata: {name: f1}
---
kind: ResourceFlavor
metadata: {name: f2}
---
kind: ClusterQueue
metadata: {name: team-a-cq}
spec:
  cohortName: team-ab
  preemption: {withinClusterQueue: LowerPriority}
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor%s}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: f1, resources: [{name: cpu, nominalQuota: 2}]}
    - {name: f2, resources: [{name: cpu, nominalQuota: 4}]}
---
kind: ClusterQueue
metadata: {name: team-b-cq}
spec:
  cohortName: team-ab
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: f1, resources: [{name: cpu, nominalQuota: 2}]}
    - {name: f2, resources: [{name: cpu, nominalQuota: 0}]}
"""
    held = [running(wl("low", "team-a-cq", 4), flavor="f2")]
    for pref, flavor, mode in (("", "f1", FIT), (", preference: PreemptionOverBorrowing", "f2", PREEMPT)):
        cfg = config(base % pref)
        tree = QuotaTree(cfg)
        usage = usage_of(tree, ((a.workload.cluster_queue, a.charges()) for a in held))
        a = assign_flavors(tree, usage, wl("w", "team-a-cq", 3, priority=5))
        assert (a.flavors["cpu"], a.mode) == (flavor, mode), pref


def test_strict_fifo_head_blocks():
    # cluster_queue.md, "Queueing strategy": StrictFIFO "Older workloads that can't be
    # admitted will block newer workloads, even if the newer workloads fit".
    cfg = config(cq("team-a-cq", 9, cohort="", spec="  queueingStrategy: StrictFIFO\n"))
    out = run_cycles(cfg, [wl("big", "team-a-cq", 10, created=1), wl("small", "team-a-cq", 1, created=2)])
    assert out.names() == []


def test_best_effort_fifo_does_not_block():
    # Same page: BestEffortFIFO (the default) "older Workloads that can't be admitted will
    # not block newer Workloads that fit in the available quota".
    cfg = config(cq("team-a-cq", 9, cohort=""))
    out = run_cycles(cfg, [wl("big", "team-a-cq", 10, created=1), wl("small", "team-a-cq", 1, created=2)])
    assert out.names() == ["small"]


def test_priority_then_creation_order():
    # Same page: "Workloads are ordered first by priority and then by creation timestamp."
    # 9 CPUs, three 5-CPU workloads: the high-priority one is admitted although newest;
    # then 4 CPUs remain, not enough for either other.
    cfg = config(cq("team-a-cq", 9, cohort=""))
    out = run_cycles(
        cfg,
        [
            wl("old", "team-a-cq", 5, created=1),
            wl("mid", "team-a-cq", 5, created=2),
            wl("hi", "team-a-cq", 5, priority=1, created=3),
        ],
    )
    assert out.names() == ["hi"]


def test_within_cluster_queue_lower_priority():
    # cluster_queue.md, "Preemption": withinClusterQueue LowerPriority "only preempt
    # Workloads in the ClusterQueue that have lower priority"; Never (default) preempts none.
    for policy, expected in (("LowerPriority", ["low"]), ("Never", [])):
        cfg = config(cq("team-a-cq", 4, cohort="", spec=f"  preemption: {{withinClusterQueue: {policy}}}\n"))
        out = run_cycles(
            cfg, [wl("high", "team-a-cq", 4, priority=10)], [running(wl("low", "team-a-cq", 4, priority=1))]
        )
        assert out.preempted == expected, policy


def test_within_cluster_queue_newer_equal_priority():
    # Same page: LowerOrNewerEqualPriority also preempts equal-priority workloads that are
    # newer than the pending one, never older ones.
    cfg = config(cq("team-a-cq", 4, cohort="", spec="  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}\n"))
    newer = running(wl("newer", "team-a-cq", 4, created=5))
    assert run_cycles(cfg, [wl("p", "team-a-cq", 4, created=1)], [newer]).preempted == ["newer"]
    older = running(wl("older", "team-a-cq", 4, created=0))
    assert run_cycles(cfg, [wl("p", "team-a-cq", 4, created=1)], [older]).preempted == []


def test_reclaim_within_cohort():
    # cluster_queue.md, "Preemption": reclaimWithinCohort decides whether a pending workload
    # that fits within its nominal quota may preempt workloads of other ClusterQueues using
    # more than their nominal quota. team-b (12) borrowed team-a's 9 with a high-priority
    # workload of 21; team-a's 9-CPU workload (priority 0) reclaims under Any only.
    for policy, expected in (("Any", ["b"]), ("LowerPriority", []), ("Never", [])):
        cfg = config(cq("team-a-cq", 9, spec=f"  preemption: {{reclaimWithinCohort: {policy}}}\n"), cq("team-b-cq", 12))
        out = run_cycles(cfg, [wl("a", "team-a-cq", 9)], [running(wl("b", "team-b-cq", 21, priority=5))])
        assert out.preempted == expected, policy
        assert ("a" in out.names()) == bool(expected)


def test_borrow_within_cohort_threshold():
    # cluster_queue.md, "Preemption": borrowWithinCohort LowerPriority lets a workload that
    # needs borrowing preempt lower-priority borrowers, "only workloads up to the priority
    # indicated by maxPriorityThreshold". team-a (9) asks 12 at priority 200: above its
    # nominal, so it borrows; team-b (12) holds 15, borrowing 3; 21 - 15 = 6 free < 12.
    # team-b's workload is a candidate at priority 50 (< 200, <= 100), not at 150 (> 100).
    spec = (
        "  preemption:\n    reclaimWithinCohort: Any\n"
        "    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}\n"
    )
    for prio, expected in ((50, ["b"]), (150, [])):
        cfg = config(cq("team-a-cq", 9, spec=spec), cq("team-b-cq", 12))
        out = run_cycles(
            cfg, [wl("a", "team-a-cq", 12, priority=200)], [running(wl("b", "team-b-cq", 15, priority=prio))]
        )
        assert out.preempted == expected, prio


def test_classic_preemption_needs_nominal_or_borrow_within_cohort():
    # preemption.md, "Classic Preemption": a workload not fitting unused quota may preempt
    # only if its requests are below the flavor's nominal quota or borrowWithinCohort is on.
    # team-a (9) asks 12 > 9 with reclaimWithinCohort Any but no borrowWithinCohort: nothing.
    cfg = config(cq("team-a-cq", 9, spec="  preemption: {reclaimWithinCohort: Any}\n"), cq("team-b-cq", 12))
    out = run_cycles(cfg, [wl("a", "team-a-cq", 12, priority=9)], [running(wl("b", "team-b-cq", 15))])
    assert out.preempted == [] and out.names() == ["b"]


def test_candidates_most_recently_admitted_first_and_minimized():
    # preemption.md, "Candidates": among equal priority, "Workloads which got admitted the
    # most recently" go first; "Targets": the reverse pass drops targets not needed.
    # 6 CPUs held by x (2, admitted t=1), y (2, t=2), z (2, t=3), all priority 0; a
    # priority-5 workload of 2 needs one of them: z, the newest.
    cfg = config(cq("team-a-cq", 6, cohort="", spec="  preemption: {withinClusterQueue: LowerPriority}\n"))
    held = [running(wl(n, "team-a-cq", 2), at=t) for n, t in (("x", 1), ("y", 2), ("z", 3))]
    out = run_cycles(cfg, [wl("p", "team-a-cq", 2, priority=5)], held)
    assert out.preempted == ["z"] and out.names() == ["p", "x", "y"]


def test_dominant_resource_share_with_weights():
    # preemption.md, "ClusterQueue share value": the share summarizes borrowed resources,
    # weighted by fairSharing.weight. Cohort of a (9) and b (12): lendable 21. a uses 15,
    # borrowing 6: share 6 * 1000 / 21 = 285.7; with weight 2, 142.9.
    for weight, share in ((1, 6000 / 21), (2, 3000 / 21)):
        cfg = config(cq("a", 9, spec=f"  fairSharing: {{weight: {weight}}}\n"), cq("b", 12))
        tree = QuotaTree(cfg)
        usage = usage_of(tree, [("a", {("default-flavor", "cpu"): 15.0})])
        assert abs(dominant_share(tree, usage, ("cq", "a")) - share) < 1e-9
        assert dominant_share(tree, usage, ("cq", "b")) == 0.0


def test_fair_sharing_preempts_the_highest_share():
    # preemption.md, "Fair Sharing": a pending workload's ClusterQueue takes back from the
    # ClusterQueue with the highest share while LessThanOrEqualToFinalShare holds.
    # Cohort a (6), b (6), c (6); b holds 12 (two 6s, borrowing 6: share 6000/18), c holds 6;
    # a asks 6 (within nominal, share 0 after admission) and reclaims one of b's workloads.
    spec = "  preemption: {reclaimWithinCohort: Any}\n"
    cfg = config(cq("a", 6, spec=spec), cq("b", 6), cq("c", 6))
    held = [running(wl("b1", "b", 6), at=1), running(wl("b2", "b", 6), at=2), running(wl("c1", "c", 6), at=1)]
    out = run_cycles(cfg, [wl("a1", "a", 6)], held, options=Options(fair_sharing=True))
    assert out.preempted == ["b2"] and out.names() == ["a1", "b1", "c1"]


def test_fair_sharing_orders_a_head_that_fits_no_flavor():
    # preemption.md, "Fair Sharing": heads are ordered by their queue's share. A head that
    # no flavor can ever hold (22 CPUs > the cohort's 9 + 12 = 21, its potential available)
    # has no assignment to add to its share; it stays pending, and the other queue's head
    # (12 CPUs, team-b-cq's nominal quota) is admitted in the same cycle.
    out = run_cycles(
        config(*BORROW),
        [wl("a", "team-a-cq", 22, created=1), wl("b", "team-b-cq", 12, created=2)],
        options=Options(fair_sharing=True),
    )
    assert out.names() == ["b"] and [w.name for w in out.pending] == ["a"]
