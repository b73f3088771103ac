"""Kueue's admission rules as pure functions: who is admitted, on which flavor, who is preempted.

Sources, kubernetes-sigs/kueue v0.20.0-devel (commit ff69552), site/content/en/docs/concepts/:

* cluster_queue.md, "Flavors and borrowing semantics": flavors are tried in the order the
  ClusterQueue lists them; a pod set's resource fits a flavor when it fits the unused
  quota of the ClusterQueue, or the cohort's unused quota within ``borrowingLimit``
  (borrowing); one flavor per resource group. "FlavorFungibility": a flavor that fits
  without borrowing or preemption is taken at once; otherwise ``whenCanBorrow`` /
  ``whenCanPreempt`` say whether to stop or try the next flavor, and among the flavors
  considered the preference order is (Fit, NoBorrow), (Fit, Borrow), (Preempt, NoBorrow),
  (Preempt, Borrow) (``BorrowingOverPreemption``) or with the middle two swapped.
* cluster_queue.md, "Queueing strategy": workloads ordered by priority, then creation
  time; under ``StrictFIFO`` an inadmissible head blocks the queue, under
  ``BestEffortFIFO`` (the default) it does not. "Cohort" note: within a cohort, heads
  that fit under nominal quota go first, then higher priority, then older.
* preemption.md, "Classic Preemption": eligibility, candidates (same ClusterQueue per
  ``withinClusterQueue``; other ClusterQueues of the cohort that are borrowing, per
  ``reclaimWithinCohort`` and ``borrowWithinCohort``), candidate order (borrowing queues
  first, lowest priority, most recently admitted), the four target heuristics and the
  final reverse pass that drops targets not needed.
* preemption.md, "Fair Sharing": targets taken from the ClusterQueue with the highest
  share while the preemptor does not fit, under ``LessThanOrEqualToFinalShare`` then
  ``LessThanInitialShare``; admission prefers the ClusterQueue with the lowest share.

A preemptor is not admitted in the cycle that evicts its targets (Kueue waits for the
evictions to finish); ``kueue_cycle.run_cycles`` admits it in a later cycle, as Kueue does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shapeshift.k8s.kueue_config import ClusterQueue
from shapeshift.k8s.kueue_quota import (
    FlavorResource,
    QuotaTree,
    Usage,
    available,
    charge,
    copy_usage,
    dominant_share,
    potential_available,
    usage_of,
)

FIT, PREEMPT, NO_FIT = 0, 1, 2


@dataclass(frozen=True)
class Workload:
    """A workload's total requests (one pod set: pods x per-pod requests)."""

    name: str
    cluster_queue: str
    requests: Mapping[str, float]
    priority: int = 0
    created: float = 0.0
    #: Its place in its queue (higher priority, then older, then name) and the group of
    #: workloads that fare alike (queue, requests, priority): computed once, since every
    #: scheduling cycle asks.
    order: tuple = field(init=False, compare=False, repr=False)
    key: tuple = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "order", (-self.priority, self.created, self.name))
        object.__setattr__(self, "key", (self.cluster_queue, tuple(sorted(self.requests.items())), self.priority))


@dataclass(frozen=True)
class Admitted:
    workload: Workload
    flavors: Mapping[str, str]  # resource -> flavor
    admitted_at: float = 0.0
    #: What it holds per (flavor, resource), computed once: preemption searches ask often.
    held: Mapping[FlavorResource, float] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        held = {(self.flavors[r], r): v for r, v in self.workload.requests.items() if v > 0}
        object.__setattr__(self, "held", held)

    def charges(self) -> Mapping[FlavorResource, float]:
        return self.held


@dataclass(frozen=True)
class Assignment:
    flavors: Mapping[str, str]
    mode: int  # FIT, PREEMPT or NO_FIT
    borrows: bool

    def charges(self, workload: Workload) -> dict[FlavorResource, float]:
        return {(self.flavors[r], r): v for r, v in workload.requests.items() if v > 0}


@dataclass(frozen=True)
class Options:
    """Kueue-wide settings (the Kueue Configuration object, not the ClusterQueues)."""

    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    priority_sorting_within_cohort: bool = True


@dataclass(frozen=True)
class CycleResult:
    admitted: tuple[Admitted, ...] = ()
    preempted: tuple[str, ...] = ()  # names of evicted workloads
    blocked: tuple[str, ...] = ()  # heads that could not be admitted nor preempt


def _usage(tree: QuotaTree, admitted: Sequence[Admitted]) -> Usage:
    return usage_of(tree, ((a.workload.cluster_queue, a.charges()) for a in admitted))


def assign_flavors(tree: QuotaTree, usage: Usage, workload: Workload, fair_sharing: bool = False) -> Assignment:
    """The flavor of each requested resource, following the ClusterQueue's order and fungibility
    (``fair_sharing``: preemption while borrowing is allowed, preemption.md, Fair Sharing)."""
    cq = tree.config.cluster_queues[workload.cluster_queue]
    node = ("cq", cq.name)
    wanted = {r for r, v in workload.requests.items() if v > 0}
    flavors: dict[str, str] = {}
    mode, borrows = FIT, False
    for group in cq.resource_groups:
        needed = [r for r in group.covered_resources if r in wanted]
        if not needed:
            continue
        wanted -= set(needed)
        best: tuple[int, int, str] | None = None  # (rank, index, flavor)
        for index, flavor in enumerate(group.flavors):
            f_mode, f_borrow = FIT, False
            for r in needed:
                fr = (flavor.name, r)
                value = workload.requests[r]
                if value > potential_available(tree, node, fr):
                    f_mode = NO_FIT
                    break
                nominal = tree.subtree[node].get(fr, 0.0)
                if value <= available(tree, usage, node, fr):
                    f_borrow = f_borrow or usage[node][fr] + value > nominal
                elif value <= nominal or fair_sharing or cq.preemption.borrow_within_cohort != "Never":
                    # preemption.md, Classic: preempting is possible below the nominal quota or
                    # with borrowWithinCohort; after preempting it borrows if above nominal.
                    f_mode = PREEMPT
                    f_borrow = f_borrow or value > nominal
                else:
                    f_mode = NO_FIT
                    break
            if f_mode == NO_FIT:
                continue
            rank = _rank(f_mode, f_borrow, cq)
            if best is None or rank < best[0]:
                best = (rank, index, flavor.name)
            if f_mode == FIT and not f_borrow:
                break
            policy = cq.flavor_fungibility.when_can_borrow if f_mode == FIT else cq.flavor_fungibility.when_can_preempt
            if policy == "MayStopSearch":
                break
        if best is None:
            return Assignment({}, NO_FIT, False)
        for r in needed:
            flavors[r] = best[2]
        f_mode, f_borrow = _unrank(best[0], cq)
        mode, borrows = max(mode, f_mode), borrows or f_borrow
    if wanted:  # a resource no group of the ClusterQueue covers
        return Assignment({}, NO_FIT, False)
    return Assignment(flavors, mode, borrows)


def _order(cq: ClusterQueue) -> list[tuple[int, bool]]:
    if cq.flavor_fungibility.preference == "PreemptionOverBorrowing":
        return [(FIT, False), (PREEMPT, False), (FIT, True), (PREEMPT, True)]
    return [(FIT, False), (FIT, True), (PREEMPT, False), (PREEMPT, True)]


def _rank(mode: int, borrow: bool, cq: ClusterQueue) -> int:
    return _order(cq).index((mode, borrow))


def _unrank(rank: int, cq: ClusterQueue) -> tuple[int, bool]:
    return _order(cq)[rank]


def _fits(tree: QuotaTree, usage: Usage, cq: str, charges: Mapping[FlavorResource, float], allow_borrow: bool) -> bool:
    node = ("cq", cq)
    for fr, value in charges.items():
        if value > available(tree, usage, node, fr) + 1e-9:
            return False
        if not allow_borrow and usage[node][fr] + value > tree.subtree[node].get(fr, 0.0) + 1e-9:
            return False
    return True


def _cohort_root(tree: QuotaTree, cq: str) -> tuple[str, str] | None:
    parent = tree.parent[("cq", cq)]
    return None if parent is None else tree.root(parent)


def _is_borrowing(tree: QuotaTree, usage: Usage, cq: str, frs: set[FlavorResource]) -> bool:
    node = ("cq", cq)
    return any(usage[node][fr] > tree.subtree[node].get(fr, 0.0) + 1e-9 for fr in frs)


def preemption_targets(
    tree: QuotaTree,
    admitted: Sequence[Admitted],
    workload: Workload,
    assignment: Assignment,
    options: Options = Options(),
    usage: Usage | None = None,
) -> tuple[Admitted, ...]:
    """The admitted workloads to evict so that ``workload`` fits (empty: it cannot).
    ``usage``: the usage of ``admitted`` where the caller has it (left unchanged); each
    trial eviction is then a release from a copy, not a recount of every admitted workload."""
    cq = tree.config.cluster_queues[workload.cluster_queue]
    policy = cq.preemption
    in_cohort = policy.reclaim_within_cohort != "Never" and cq.cohort is not None
    if policy.within_cluster_queue == "Never" and not in_cohort:
        return ()  # no candidate can exist
    if usage is None:
        usage = _usage(tree, admitted)
    charges = assignment.charges(workload)
    frs = set(charges)
    node = ("cq", cq.name)
    within_nominal = all(v <= tree.subtree[node].get(fr, 0.0) for fr, v in charges.items())
    if not options.fair_sharing and not within_nominal and policy.borrow_within_cohort == "Never":
        # preemption.md, Classic: eligible only below nominal quota or with borrowWithinCohort
        cands = _candidates(tree, usage, admitted, workload, frs, assignment.borrows)
        same = [c for c in cands if c.workload.cluster_queue == cq.name]
        return _greedy(tree, usage, workload, charges, same, allow_borrow=True)
    candidates = _candidates(tree, usage, admitted, workload, frs, assignment.borrows and not options.fair_sharing)
    if not candidates:
        return ()
    if options.fair_sharing:
        return _fair_targets(tree, usage, workload, charges, candidates, options)
    same = [c for c in candidates if c.workload.cluster_queue == cq.name]
    if len(same) == len(candidates):
        found = _greedy(tree, usage, workload, charges, candidates, allow_borrow=True)
        if found:
            return found
    if policy.borrow_within_cohort != "Never":
        found = _greedy(tree, usage, workload, charges, candidates, allow_borrow=True)
        if found:
            return found
    if not _is_borrowing(tree, usage, cq.name, frs):
        found = _greedy(tree, usage, workload, charges, candidates, allow_borrow=False)
        if found:
            return found
    return _greedy(tree, usage, workload, charges, same, allow_borrow=True)


def _candidates(tree, usage, admitted, workload, frs, borrows: bool) -> list[Admitted]:
    cq = tree.config.cluster_queues[workload.cluster_queue]
    policy = cq.preemption
    root = _cohort_root(tree, cq.name)
    out = []
    # the ClusterQueues whose workloads may be candidates: this one and, in its cohort, those borrowing
    eligible = {cq.name}
    if root is not None:
        eligible.update(q for q in tree.members(root) if _is_borrowing(tree, usage, q, frs))
    for a in admitted:
        other = a.workload
        if other.cluster_queue not in eligible or frs.isdisjoint(a.held):
            continue
        if other.cluster_queue == cq.name:
            w = policy.within_cluster_queue
            lower = other.priority < workload.priority
            newer_equal = other.priority == workload.priority and other.created > workload.created
            if (w == "LowerPriority" and lower) or (w == "LowerOrNewerEqualPriority" and (lower or newer_equal)):
                out.append(a)
            continue
        r = policy.reclaim_within_cohort
        if not (r == "Any" or (r == "LowerPriority" and other.priority < workload.priority)):
            continue
        if borrows:  # cluster_queue.md, borrowWithinCohort: lower priority, up to maxPriorityThreshold
            limit = policy.max_priority_threshold
            if policy.borrow_within_cohort != "LowerPriority" or other.priority >= workload.priority:
                continue
            if limit is not None and other.priority > limit:
                continue
        out.append(a)
    # preemption.md, Candidates: borrowing queues of the cohort first, lowest priority, newest admitted
    out.sort(key=lambda a: (a.workload.cluster_queue == cq.name, a.workload.priority, -a.admitted_at))
    return out


def _release(tree: QuotaTree, usage: Usage, a: Admitted, sign: float = -1.0) -> None:
    charge(tree, usage, a.workload.cluster_queue, a.charges(), sign)


def _greedy(tree, usage, workload, charges, candidates, *, allow_borrow: bool) -> tuple[Admitted, ...]:
    cq = workload.cluster_queue
    targets: list[Admitted] = []
    remaining = copy_usage(usage)
    for c in candidates:
        targets.append(c)
        _release(tree, remaining, c)
        if _fits(tree, remaining, cq, charges, allow_borrow):
            return _minimize(tree, remaining, workload, charges, targets, allow_borrow)
    return ()


def _minimize(tree, remaining, workload, charges, targets, allow_borrow) -> tuple[Admitted, ...]:
    """preemption.md: traverse the targets in reverse, dropping those the preemptor does not
    need. ``remaining``: the usage with every target evicted (changed in place)."""
    kept = list(targets)
    for t in reversed(targets):
        _release(tree, remaining, t, 1.0)  # try keeping t
        if _fits(tree, remaining, workload.cluster_queue, charges, allow_borrow):
            kept = [k for k in kept if k is not t]
        else:
            _release(tree, remaining, t)
    return tuple(kept)


def _fair_targets(tree, usage, workload, charges, candidates, options) -> tuple[Admitted, ...]:
    cq = workload.cluster_queue
    targets: list[Admitted] = []
    remaining = copy_usage(usage)
    for strategy in options.preemption_strategies:
        pool = [c for c in candidates if all(c is not t for t in targets)]
        while pool and not _fits(tree, remaining, cq, charges, True):
            shares = {q: dominant_share(tree, remaining, ("cq", q)) for q in {c.workload.cluster_queue for c in pool}}
            target_cq = max(sorted(shares), key=lambda q: shares[q])
            victim = next(c for c in pool if c.workload.cluster_queue == target_cq)
            pool = [c for c in pool if c is not victim]
            if target_cq != cq:
                mine = dominant_share(tree, remaining, ("cq", cq), charges)
                _release(tree, remaining, victim)
                theirs_after = dominant_share(tree, remaining, ("cq", target_cq))
                _release(tree, remaining, victim, 1.0)
                ok = mine <= theirs_after if strategy == "LessThanOrEqualToFinalShare" else mine < shares[target_cq]
                if not ok:
                    pool = [c for c in pool if c.workload.cluster_queue != target_cq]
                    continue
            targets.append(victim)
            _release(tree, remaining, victim)
    if not _fits(tree, remaining, cq, charges, True):
        return ()
    return _minimize(tree, remaining, workload, charges, targets, True)
