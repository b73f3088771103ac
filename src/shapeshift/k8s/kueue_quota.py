"""Kueue's quota tree: what a ClusterQueue may still use, per flavor and resource.

ClusterQueues and Cohorts form a tree (a ClusterQueue's parent is its cohort, a Cohort's
its ``parentName``). The arithmetic is Kueue's, pkg/cache/scheduler/resource_node.go
(v0.20.0-devel, commit ff69552):

* a node's *subtree quota* is its own ``nominalQuota`` plus, for each child, the part of
  the child's subtree quota it lends (``subtree - localQuota``);
* *local quota* is what a node keeps to itself: ``max(0, subtree - lendingLimit)`` when a
  ``lendingLimit`` is set, else 0 (everything is lendable);
* usage climbs the tree: usage beyond a node's local quota also counts in its parent;
* ``available`` is the local quota left plus what the parent has available, capped by the
  ``borrowingLimit`` (``subtree - local - usedInParent + borrowingLimit``); a root cohort
  has its subtree quota less its usage;
* ``potential_available`` is the same with nothing in use: the most a workload could get
  after preempting everything.

The dominant resource share used by fair sharing is pkg/cache/scheduler/fair_sharing.go:
per resource, the amount above the node's subtree quota summed over flavors, divided by
what its parent could lend (``potential_available`` of the parent, summed over flavors),
times 1000, the largest over resources, divided by ``fairSharing.weight``; a zero weight
that borrows ranks above every finite share.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shapeshift.k8s.kueue_config import KueueConfig, ResourceGroup

#: A tree node: ("cq", name) or ("cohort", name).
Node = tuple[str, str]
#: (flavor, resource).
FlavorResource = tuple[str, str]


@dataclass(frozen=True)
class Limits:
    nominal: float = 0.0
    borrowing_limit: float | None = None
    lending_limit: float | None = None


class QuotaTree:
    """The static part of the tree: quotas and subtree quotas (usage is passed in)."""

    def __init__(self, config: KueueConfig):
        self.config = config
        self.limits: dict[Node, dict[FlavorResource, Limits]] = {}
        self.parent: dict[Node, Node | None] = {}
        self.weight: dict[Node, float] = {}
        for name, cq in config.cluster_queues.items():
            node = ("cq", name)
            self.parent[node] = ("cohort", cq.cohort) if cq.cohort else None
            self.limits[node] = _limits(cq.resource_groups)
            self.weight[node] = cq.fair_weight
        for name, cohort in config.cohorts.items():
            node = ("cohort", name)
            self.parent[node] = ("cohort", cohort.parent) if cohort.parent else None
            self.limits[node] = _limits(cohort.resource_groups)
            self.weight[node] = cohort.fair_weight
        self.children: dict[Node, list[Node]] = defaultdict(list)
        for node, parent in self.parent.items():
            if parent is not None:
                self.children[parent].append(node)
        self.subtree: dict[Node, dict[FlavorResource, float]] = {}
        for node in self.parent:
            self._subtree(node)
        #: Local quota per node and flavor-resource, computed once (the tree is static).
        self.local: dict[Node, dict[FlavorResource, float]] = {
            node: {fr: self.local_quota(node, fr) for fr in self.flavor_resources()} for node in self.parent
        }
        self._roots: dict[Node, Node] = {}
        self._members: dict[Node, tuple[str, ...]] = {}

    def _subtree(self, node: Node) -> dict[FlavorResource, float]:
        if node in self.subtree:
            return self.subtree[node]
        quota = {fr: lim.nominal for fr, lim in self.limits[node].items()}
        for child in self.children.get(node, ()):
            for fr, q in self._subtree(child).items():
                quota[fr] = quota.get(fr, 0.0) + q - self.local_quota(child, fr)
        self.subtree[node] = quota
        return quota

    def local_quota(self, node: Node, fr: FlavorResource) -> float:
        lending = self.limits[node].get(fr, Limits()).lending_limit
        if lending is None:
            return 0.0
        return max(0.0, self._subtree(node).get(fr, 0.0) - lending)

    def flavor_resources(self) -> set[FlavorResource]:
        return {fr for quotas in self.subtree.values() for fr in quotas}

    def members(self, root: Node) -> tuple[str, ...]:
        """The ClusterQueues under ``root`` (computed once per root)."""
        found = self._members.get(root)
        if found is None:
            found = tuple(name for (kind, name) in self.parent if kind == "cq" and self.root(("cq", name)) == root)
            self._members[root] = found
        return found

    def root(self, node: Node) -> Node:
        found = self._roots.get(node)
        if found is None:
            found = node
            while self.parent[found] is not None:
                found = self.parent[found]  # type: ignore[assignment]
            self._roots[node] = found
        return found


Usage = dict[Node, dict[FlavorResource, float]]
_NO_LIMITS = Limits()


def _node_usage() -> defaultdict[FlavorResource, float]:
    return defaultdict(float)


def empty_usage() -> Usage:
    return defaultdict(_node_usage)


def add_usage(tree: QuotaTree, usage: Usage, node: Node, fr: FlavorResource, amount: float) -> None:
    """Charge ``amount`` to ``node`` (negative: release it); what exceeds its local quota
    climbs to the parent. A node's usage in its parent is ``max(0, usage - local)``, a
    function of its total alone, so charges and releases may come in any order."""
    while True:
        local = tree.local[node].get(fr, 0.0)
        before = usage[node][fr]
        usage[node][fr] = before + amount
        parent = tree.parent[node]
        if parent is None:
            return
        after = before + amount
        if not (before >= local and after >= local):  # else all of it climbs, unchanged
            amount = max(0.0, after - local) - max(0.0, before - local)
        if amount == 0:
            return
        node = parent


def usage_of(tree: QuotaTree, charges: Iterable[tuple[str, Mapping[FlavorResource, float]]]) -> Usage:
    """Usage of the whole tree from (ClusterQueue, {(flavor, resource): amount}) charges."""
    usage = empty_usage()
    for cq, amounts in charges:
        for fr, amount in amounts.items():
            add_usage(tree, usage, ("cq", cq), fr, amount)
    return usage


def copy_usage(usage: Usage) -> Usage:
    out = empty_usage()
    for node, amounts in usage.items():
        out[node] = defaultdict(float, amounts)
    return out


def charge(tree: QuotaTree, usage: Usage, cq: str, charges: Mapping[FlavorResource, float], sign: float = 1.0) -> None:
    """Add (``sign`` 1) or release (-1) one workload's charges to its ClusterQueue."""
    node = ("cq", cq)
    for fr, amount in charges.items():
        add_usage(tree, usage, node, fr, sign * amount)


def available(tree: QuotaTree, usage: Usage, node: Node, fr: FlavorResource) -> float:
    subtree = tree.subtree[node].get(fr, 0.0)
    parent = tree.parent[node]
    if parent is None:
        return subtree - usage[node][fr]
    from_parent = available(tree, usage, parent, fr)
    limit = tree.limits[node].get(fr, _NO_LIMITS).borrowing_limit
    local = tree.local[node].get(fr, 0.0)
    if limit is not None:
        used_in_parent = max(0.0, usage[node][fr] - local)
        from_parent = min(subtree - local - used_in_parent + limit, from_parent)
    return max(0.0, local - usage[node][fr]) + from_parent


def potential_available(tree: QuotaTree, node: Node, fr: FlavorResource) -> float:
    parent = tree.parent[node]
    if parent is None:
        return tree.subtree[node].get(fr, 0.0)
    total = tree.local[node].get(fr, 0.0) + potential_available(tree, parent, fr)
    limit = tree.limits[node].get(fr, _NO_LIMITS).borrowing_limit
    if limit is not None:
        total = min(tree.subtree[node].get(fr, 0.0) + limit, total)
    return total


def dominant_share(tree: QuotaTree, usage: Usage, node: Node, extra: Mapping[FlavorResource, float] = {}) -> float:
    """Weighted dominant resource share of ``node`` with ``extra`` requested (0 when not borrowing)."""
    parent = tree.parent[node]
    if parent is None:
        return 0.0
    borrowed: dict[str, float] = defaultdict(float)
    for fr, quota in tree.subtree[node].items():
        above = usage[node][fr] + extra.get(fr, 0.0) - quota
        if above > 0:
            borrowed[fr[1]] += above
    if not borrowed:
        return 0.0
    lendable: dict[str, float] = defaultdict(float)
    for fr in tree.subtree[tree.root(node)]:
        lendable[fr[1]] += potential_available(tree, parent, fr)
    ratio = max((b * 1000.0 / lendable[r] for r, b in borrowed.items() if lendable[r] > 0), default=0.0)
    weight = tree.weight[node]
    if ratio == 0:
        return 0.0
    return math.inf if weight == 0 else ratio / weight


def _limits(groups: tuple[ResourceGroup, ...]) -> dict[FlavorResource, Limits]:
    return {
        (flavor.name, q.name): Limits(q.nominal, q.borrowing_limit, q.lending_limit)
        for group in groups
        for flavor in group.flavors
        for q in flavor.resources
    }
