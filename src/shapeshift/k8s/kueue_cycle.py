"""Kueue's scheduling cycles: heads of the ClusterQueues, admitted in order or preempting.

The ordering and queueing rules are cited in ``kueue_rules`` (kubernetes-sigs/kueue
v0.20.0-devel, site/content/en/docs/concepts/cluster_queue.md, "Queueing strategy" and
"Cohort"); this module runs them cycle after cycle until nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from shapeshift.k8s.kueue_config import KueueConfig
from shapeshift.k8s.kueue_pending import PendingQueues
from shapeshift.k8s.kueue_pending import queue_order as _queue_order
from shapeshift.k8s.kueue_quota import FlavorResource, Node, QuotaTree, Usage, charge, copy_usage, dominant_share
from shapeshift.k8s.kueue_rules import (
    FIT,
    NO_FIT,
    PREEMPT,
    Admitted,
    Assignment,
    CycleResult,
    Options,
    Workload,
    _fits,
    _usage,
    assign_flavors,
    preemption_targets,
)

DEFAULT_OPTIONS = Options()
_ORDER = attrgetter("order")

__all__ = ["FlavorMemo", "Outcome", "PendingQueues", "run_cycles"]


class FlavorMemo:
    """``assign_flavors``'s answers, keyed by everything they read: the workload's queue
    and requests and the usage of that queue and its ancestors for the flavors and
    resources the queue lists (the tree's quotas are fixed). A cohort whose usage did not
    change since a head was last tried gets the same answer without the search; most
    heads of a busy cluster are tried again and again with nothing changed."""

    #: Answers kept before the memo starts afresh (usage values are unbounded over a replay).
    LIMIT = 100_000

    def __init__(self, tree: QuotaTree, fair_sharing: bool):
        self.tree = tree
        self.fair_sharing = fair_sharing
        self._reads: dict[str, tuple[tuple[Node, FlavorResource], ...]] = {}
        self._answers: dict[tuple, Assignment] = {}

    def _reads_of(self, cq: str) -> tuple[tuple[Node, FlavorResource], ...]:
        tree = self.tree
        frs = [
            (f.name, r)
            for g in tree.config.cluster_queues[cq].resource_groups
            for f in g.flavors
            for r in g.covered_resources
        ]
        path: list[Node] = []
        node: Node | None = ("cq", cq)
        while node is not None:
            path.append(node)
            node = tree.parent[node]
        found = tuple((n, fr) for n in path for fr in frs)
        self._reads[cq] = found
        return found

    def assign(self, usage: Usage, w: Workload) -> Assignment:
        cq = w.cluster_queue
        reads = self._reads.get(cq) or self._reads_of(cq)
        key = (cq, w.key[1], *[usage[n][fr] for n, fr in reads])
        found = self._answers.get(key)
        if found is None:
            if len(self._answers) >= self.LIMIT:
                self._answers.clear()
            found = self._answers[key] = assign_flavors(self.tree, usage, w, self.fair_sharing)
        return found


def _cycle(
    tree: QuotaTree,
    heads: Sequence[Workload],
    admitted: list[Admitted],
    usage: Usage,
    now: float,
    options: Options,
    memo: FlavorMemo,
) -> CycleResult:
    """One scheduling cycle over the ClusterQueues' heads: ordered (within nominal quota
    first, then lowest share under fair sharing, then priority, then age), each admitted
    while it fits or issuing preemptions. ``admitted`` and ``usage`` are updated in place
    for admissions; preemptions are returned for the caller to apply."""
    entries = [(w, memo.assign(usage, w)) for w in heads]

    def order(entry):
        w, a = entry
        if options.fair_sharing:  # a head that fits no flavor: its queue's share as it is
            extra = a.charges(w) if a.mode != NO_FIT else {}
            share = dominant_share(tree, usage, ("cq", w.cluster_queue), extra)
        else:
            share = 0.0
        prio = -w.priority if options.priority_sorting_within_cohort else 0
        return (a.borrows, share, prio, w.created, w.name)

    entries.sort(key=order)
    new: list[Admitted] = []
    preempted: list[str] = []
    chosen: set[str] = set()
    reserved: list[tuple[str, dict]] = []
    blocked: list[str] = []
    for w, _ in entries:
        a = memo.assign(usage, w)
        if a.mode == FIT and _fits(tree, usage, w.cluster_queue, a.charges(w), True):
            adm = Admitted(w, a.flavors, now)
            admitted.append(adm)
            new.append(adm)
            charge(tree, usage, w.cluster_queue, adm.charges())
            continue
        if a.mode == PREEMPT:
            targets = preemption_targets(tree, admitted, w, a, options, usage)
            names = [t.workload.name for t in targets]
            # scheduler.go: preemptions of several heads in one cycle, unless their targets
            # overlap; a preemptor's usage counts for the rest of the cycle.
            if targets and chosen.isdisjoint(names):
                preempted.extend(names)
                chosen.update(names)
                reserved.append((w.cluster_queue, a.charges(w)))
                charge(tree, usage, w.cluster_queue, reserved[-1][1])
                continue
        blocked.append(w.name)
    for cq, amounts in reserved:
        charge(tree, usage, cq, amounts, -1.0)
    return CycleResult(tuple(new), tuple(preempted), tuple(blocked))


@dataclass
class Outcome:
    admitted: list[Admitted] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    pending: list[Workload] = field(default_factory=list)
    #: The workloads this call admitted and did not evict again, in admission order.
    new: list[Admitted] = field(default_factory=list)

    def names(self) -> list[str]:
        return sorted(a.workload.name for a in self.admitted)

    def flavor_of(self, name: str, resource: str) -> str:
        return next(a.flavors[resource] for a in self.admitted if a.workload.name == name)


def run_cycles(
    config: KueueConfig,
    pending: Sequence[Workload],
    admitted: Iterable[Admitted] = (),
    *,
    now: float = 0.0,
    options: Options = DEFAULT_OPTIONS,
    max_cycles: int | None = None,
    tree: QuotaTree | None = None,
    usage: Usage | None = None,
    queues: PendingQueues | None = None,
    memo: FlavorMemo | None = None,
) -> Outcome:
    """Cycles until nothing changes; evicted workloads return to the pending list but are
    not tried again in this call (Kueue requeues a preempted workload with a backoff), which
    also rules out two workloads evicting each other back and forth at one instant.

    Each ClusterQueue offers its head per cycle. Under BestEffortFIFO a head that can be
    neither admitted nor make room is set aside (Kueue's inadmissible list) until quota is
    released by an eviction, so the next one heads the queue; under StrictFIFO it stays
    and blocks. A workload equal to one set aside (same ClusterQueue, requests and
    priority) is set aside without being tried again: with no quota released, its outcome
    is the same.

    ``tree`` and ``usage`` (the usage of ``admitted``, left unchanged) spare a caller that
    keeps them between calls from rebuilding them: a decision then costs what its queue
    heads and their preemption searches cost, not a recount of every admitted workload.
    ``queues`` likewise: the caller's ``PendingQueues`` used instead of ``pending`` (and
    changed in place: admitted workloads leave it); ``Outcome.pending`` is then left empty.
    ``memo`` (made for ``tree`` and ``options.fair_sharing``) keeps flavor assignments
    between calls."""
    tree = tree or QuotaTree(config)
    if memo is None:
        memo = FlavorMemo(tree, options.fair_sharing)
    elif memo.tree is not tree or memo.fair_sharing != options.fair_sharing:
        raise ValueError("run_cycles: the memo was made for another tree or fair-sharing setting")
    out = Outcome(list(admitted), [], [])
    # Each ClusterQueue's workloads grouped by group_key, each group in queue order: a head is
    # the first of the groups not set aside, found without scanning the whole queue.
    if queues is None:
        built = PendingQueues()
        for w in sorted(pending, key=_queue_order):
            built.add(w)
    groups = (queues or built).groups
    strict = {name: config.cluster_queues[name].queueing_strategy == "StrictFIFO" for name in groups}
    usage = copy_usage(usage) if usage is not None else _usage(tree, out.admitted)
    blocked_keys: set[tuple] = set()
    requeued: list[Workload] = []
    cycles = 0
    while max_cycles is None or cycles < max_cycles:
        cycles += 1
        heads = []
        for name, by_key in groups.items():
            if not by_key:
                continue
            if strict[name]:
                fronts = [g[0] for g in by_key.values()]
            else:
                fronts = [g[0] for k, g in by_key.items() if k not in blocked_keys]
            if fronts:
                heads.append(min(fronts, key=_ORDER))
        if not heads:
            break
        result = _cycle(tree, heads, out.admitted, usage, now, options, memo)
        for adm in result.admitted:
            (queues or built).pop_head(adm.workload)
        out.new.extend(result.admitted)
        if result.preempted:
            gone = set(result.preempted)
            evicted = [a for a in out.admitted if a.workload.name in gone]
            out.admitted = [a for a in out.admitted if a.workload.name not in gone]
            out.new = [a for a in out.new if a.workload.name not in gone]
            out.preempted.extend(result.preempted)
            requeued.extend(a.workload for a in evicted)
            for a in evicted:
                charge(tree, usage, a.workload.cluster_queue, a.charges(), -1.0)
            blocked_keys.clear()
            continue
        by_name = {h.name: h for h in heads}
        new_blocked = {by_name[n].key for n in result.blocked if not strict[by_name[n].cluster_queue]}
        if not result.admitted and not new_blocked:
            break
        blocked_keys |= new_blocked
    if queues is None:
        left = sorted((w for by_key in groups.values() for g in by_key.values() for w in g), key=_queue_order)
        out.pending = [*left, *requeued]
    return out
