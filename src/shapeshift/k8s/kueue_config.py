"""Kueue's own objects, read from the YAML a cluster administrator applies.

Field names, enums and defaults follow Kueue's API types at kubernetes-sigs/kueue
v0.20.0-devel (commit ff69552, Aug 2026), ``apis/kueue/v1beta2``:
``clusterqueue_types.go`` (``resourceGroups[].coveredResources``, ``flavors[].resources[]``
with ``nominalQuota``/``borrowingLimit``/``lendingLimit``; ``cohortName``;
``queueingStrategy`` default ``BestEffortFIFO``; ``preemption`` with
``withinClusterQueue``/``reclaimWithinCohort`` default ``Never`` and
``borrowWithinCohort.policy`` default ``Never``; ``flavorFungibility`` with
``whenCanBorrow`` default ``MayStopSearch`` and ``whenCanPreempt`` default
``TryNextFlavor``; ``namespaceSelector``), ``cohort_types.go`` (``parentName``,
``resourceGroups``, ``fairSharing``), ``fairsharing_types.go`` (``weight`` default 1),
``localqueue_types.go`` (``clusterQueue``), ``resourceflavor_types.go`` (``nodeLabels``)
and ``workloadpriorityclass_types.go`` (``value``). The v1beta1 spellings ``cohort``
(ClusterQueue) and ``parent`` (Cohort, v1alpha1) are read too, since both versions are
served. The deprecated fungibility names ``Borrow`` and ``Preempt`` read as
``MayStopSearch`` (site/content/en/docs/concepts/cluster_queue.md, FlavorFungibility).

The checks mirror what Kueue's webhooks and cache refuse: a quota over a flavor no
ResourceFlavor defines, a flavor's resources differing from its group's
``coveredResources``, ``lendingLimit`` above ``nominalQuota``, ``borrowingLimit``
without a cohort, ``borrowWithinCohort`` without ``reclaimWithinCohort``, a cycle of
cohorts (pkg/cache/scheduler/resource_node.go, ``ErrCohortHasCycle``), and a LocalQueue
naming no ClusterQueue (which Kueue accepts but never admits from, so in a replay it can
only be a typo).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shapeshift.k8s.documents import Doc, mapping, quantity, read_documents, sequence, text

KINDS = ("ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass", "Configuration")
#: apis/config/v1beta2/configuration_types.go, FairSharing: the only accepted lists.
STRATEGIES = (
    ("LessThanOrEqualToFinalShare",),
    ("LessThanInitialShare",),
    ("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
)
QUEUEING = ("BestEffortFIFO", "StrictFIFO")
WITHIN_CQ = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM = ("Never", "LowerPriority", "Any")
BORROW_WITHIN = ("Never", "LowerPriority")
FUNGIBILITY = ("MayStopSearch", "TryNextFlavor", "Borrow", "Preempt")
PREFERENCE = ("BorrowingOverPreemption", "PreemptionOverBorrowing")


@dataclass(frozen=True)
class ResourceQuota:
    """One resource's quota in one flavor; ``None`` limits mean unlimited."""

    name: str
    nominal: float
    borrowing_limit: float | None = None
    lending_limit: float | None = None


@dataclass(frozen=True)
class FlavorQuotas:
    name: str
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True)
class Preemption:
    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class FlavorFungibility:
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str = "BorrowingOverPreemption"


@dataclass(frozen=True)
class LabelSelector:
    """``matchLabels`` and ``matchExpressions`` (key, operator, values); empty matches all."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        for key, op, values in self.match_expressions:
            present = key in labels
            ok = {
                "In": present and labels[key] in values,
                "NotIn": not present or labels[key] not in values,
                "Exists": present,
                "DoesNotExist": not present,
            }[op]
            if not ok:
                return False
        return True


@dataclass(frozen=True)
class ResourceFlavor:
    name: str
    node_labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...]
    cohort: str | None = None
    queueing_strategy: str = "BestEffortFIFO"
    preemption: Preemption = field(default_factory=Preemption)
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    fair_weight: float = 1.0
    namespace_selector: LabelSelector | None = None  # None: no namespace may submit


@dataclass(frozen=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: float = 1.0


@dataclass(frozen=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str


@dataclass(frozen=True)
class WorkloadPriorityClass:
    name: str
    value: int


@dataclass(frozen=True)
class KueueConfig:
    flavors: Mapping[str, ResourceFlavor]
    cluster_queues: Mapping[str, ClusterQueue]
    cohorts: Mapping[str, Cohort]  # declared Cohort objects and cohorts only named by queues
    local_queues: Mapping[tuple[str, str], LocalQueue]  # (namespace, name)
    priority_classes: Mapping[str, WorkloadPriorityClass]
    #: Kueue's own Configuration (config.kueue.x-k8s.io): ``fairSharing`` present enables it.
    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = STRATEGIES[2]


def read_kueue(path: str | Path) -> KueueConfig:
    """The Kueue objects of a multi-document YAML file, checked (see the module docstring)."""
    return kueue_from_documents(read_documents(path))


def kueue_from_documents(docs: Iterable[Doc]) -> KueueConfig:
    docs = list(docs)
    flavors: dict[str, ResourceFlavor] = {}
    cqs: dict[str, ClusterQueue] = {}
    cohorts: dict[str, Cohort] = {}
    lqs: dict[tuple[str, str], LocalQueue] = {}
    wpcs: dict[str, WorkloadPriorityClass] = {}
    origin: dict[tuple[str, str], Doc] = {}
    fair_sharing, strategies = False, STRATEGIES[2]
    for doc in docs:
        if doc.kind not in KINDS:
            raise doc.error("kind", f"unknown kind {doc.kind!r}; Kueue configuration holds {', '.join(KINDS)}")
        key = (doc.kind, _namespace(doc) + "/" + doc.name if doc.kind == "LocalQueue" else doc.name)
        if key in origin:
            raise doc.error("metadata.name", f"{doc.kind} {doc.name!r} is defined twice (also {origin[key].where()})")
        origin[key] = doc
        if doc.kind == "Configuration":
            fair_sharing, strategies = _configuration(doc)
        elif doc.kind == "ResourceFlavor":
            labels = mapping(doc.spec().get("nodeLabels"), doc, "spec.nodeLabels")
            flavors[doc.name] = ResourceFlavor(doc.name, tuple(sorted((str(k), str(v)) for k, v in labels.items())))
        elif doc.kind == "WorkloadPriorityClass":
            value = doc.body.get("value")
            if isinstance(value, bool) or not isinstance(value, int):
                raise doc.error("value", f"{value!r} must be an integer")
            wpcs[doc.name] = WorkloadPriorityClass(doc.name, value)
        elif doc.kind == "LocalQueue":
            cq = text(doc.spec().get("clusterQueue"), doc, "spec.clusterQueue")
            if not cq:
                raise doc.error("spec.clusterQueue", "a LocalQueue must name its ClusterQueue")
            lqs[(_namespace(doc), doc.name)] = LocalQueue(_namespace(doc), doc.name, cq)
    for doc in docs:
        if doc.kind == "ClusterQueue":
            cqs[doc.name] = _cluster_queue(doc, flavors)
        elif doc.kind == "Cohort":
            spec = doc.spec()
            parent = text(spec.get("parentName", spec.get("parent")), doc, "spec.parentName") or None
            groups = _groups(doc, flavors)
            cohorts[doc.name] = Cohort(doc.name, parent, groups, _weight(doc))
    for cq in cqs.values():
        if cq.cohort and cq.cohort not in cohorts:
            cohorts[cq.cohort] = Cohort(cq.cohort)
    for c in list(cohorts.values()):
        if c.parent and c.parent not in cohorts:
            cohorts[c.parent] = Cohort(c.parent)
    _check_cycles(cohorts, origin)
    for (namespace, name), lq in lqs.items():
        if lq.cluster_queue not in cqs:
            doc = origin[("LocalQueue", f"{namespace}/{name}")]
            known = ", ".join(sorted(cqs)) or "none defined"
            raise doc.error(
                "spec.clusterQueue",
                f"names ClusterQueue {lq.cluster_queue!r}, which is not defined (ClusterQueues: {known})",
            )
    return KueueConfig(flavors, cqs, cohorts, lqs, wpcs, fair_sharing, strategies)


def _configuration(doc: Doc) -> tuple[bool, tuple[str, ...]]:
    """``fairSharing`` of Kueue's Configuration (top level, not under spec); v1beta1's
    ``enable: false`` turns it off."""
    raw = doc.body.get("fairSharing")
    if raw is None:
        return False, STRATEGIES[2]
    fair = mapping(raw, doc, "fairSharing")
    enabled = fair.get("enable", True)
    if not isinstance(enabled, bool):
        raise doc.error("fairSharing.enable", f"{enabled!r} must be true or false")
    listed = fair.get("preemptionStrategies")
    strategies = (
        STRATEGIES[2]
        if listed is None
        else tuple(str(x) for x in sequence(listed, doc, "fairSharing.preemptionStrategies"))
    )
    if strategies not in STRATEGIES:
        accepted = "; ".join(str(list(s)) for s in STRATEGIES)
        raise doc.error("fairSharing.preemptionStrategies", f"{list(strategies)} is not one of {accepted}")
    return enabled, strategies


def _namespace(doc: Doc) -> str:
    meta = doc.body.get("metadata") or {}
    return str(meta.get("namespace") or "default")


def _weight(doc: Doc) -> float:
    fair = mapping(doc.spec().get("fairSharing"), doc, "spec.fairSharing")
    if fair.get("weight") is None:
        return 1.0
    return quantity(fair["weight"], doc, "spec.fairSharing.weight")


def _cluster_queue(doc: Doc, flavors: Mapping[str, ResourceFlavor]) -> ClusterQueue:
    spec = doc.spec()
    cohort = text(spec.get("cohortName", spec.get("cohort")), doc, "spec.cohortName") or None
    groups = _groups(doc, flavors)
    if cohort is None:
        for g, group in enumerate(groups):
            for f, flavor in enumerate(group.flavors):
                for r, res in enumerate(flavor.resources):
                    if res.borrowing_limit is not None:
                        where = f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}].borrowingLimit"
                        raise doc.error(where, "a borrowingLimit needs a cohortName to borrow from")
    strategy = text(
        spec.get("queueingStrategy"), doc, "spec.queueingStrategy", choices=QUEUEING, default="BestEffortFIFO"
    )
    pre = mapping(spec.get("preemption"), doc, "spec.preemption")
    bwc = mapping(pre.get("borrowWithinCohort"), doc, "spec.preemption.borrowWithinCohort")
    threshold = bwc.get("maxPriorityThreshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int)):
        raise doc.error("spec.preemption.borrowWithinCohort.maxPriorityThreshold", f"{threshold!r} must be an integer")
    preemption = Preemption(
        text(
            pre.get("withinClusterQueue"), doc, "spec.preemption.withinClusterQueue", choices=WITHIN_CQ, default="Never"
        ),
        text(
            pre.get("reclaimWithinCohort"), doc, "spec.preemption.reclaimWithinCohort", choices=RECLAIM, default="Never"
        ),
        text(
            bwc.get("policy"), doc, "spec.preemption.borrowWithinCohort.policy", choices=BORROW_WITHIN, default="Never"
        ),
        threshold,
    )
    if preemption.borrow_within_cohort != "Never" and preemption.reclaim_within_cohort == "Never":
        raise doc.error("spec.preemption.borrowWithinCohort.policy", "needs reclaimWithinCohort other than Never")
    fung = mapping(spec.get("flavorFungibility"), doc, "spec.flavorFungibility")
    borrow = text(
        fung.get("whenCanBorrow"),
        doc,
        "spec.flavorFungibility.whenCanBorrow",
        choices=FUNGIBILITY,
        default="MayStopSearch",
    )
    preempt = text(
        fung.get("whenCanPreempt"),
        doc,
        "spec.flavorFungibility.whenCanPreempt",
        choices=FUNGIBILITY,
        default="TryNextFlavor",
    )
    fungibility = FlavorFungibility(
        "MayStopSearch" if borrow == "Borrow" else borrow,
        "MayStopSearch" if preempt == "Preempt" else preempt,
        text(
            fung.get("preference"),
            doc,
            "spec.flavorFungibility.preference",
            choices=PREFERENCE,
            default="BorrowingOverPreemption",
        ),
    )
    selector = None
    if "namespaceSelector" in spec and spec["namespaceSelector"] is not None:
        selector = _selector(mapping(spec["namespaceSelector"], doc, "spec.namespaceSelector"), doc)
    return ClusterQueue(doc.name, groups, cohort, strategy, preemption, fungibility, _weight(doc), selector)


def _selector(sel: Mapping[str, Any], doc: Doc) -> LabelSelector:
    labels = mapping(sel.get("matchLabels"), doc, "spec.namespaceSelector.matchLabels")
    exprs = []
    for i, e in enumerate(sequence(sel.get("matchExpressions"), doc, "spec.namespaceSelector.matchExpressions")):
        where = f"spec.namespaceSelector.matchExpressions[{i}]"
        e = mapping(e, doc, where)
        op = text(e.get("operator"), doc, where + ".operator", choices=("In", "NotIn", "Exists", "DoesNotExist"))
        if not op:
            raise doc.error(where + ".operator", "is required")
        values = tuple(str(v) for v in sequence(e.get("values"), doc, where + ".values"))
        exprs.append((text(e.get("key"), doc, where + ".key"), op, values))
    return LabelSelector(tuple(sorted((str(k), str(v)) for k, v in labels.items())), tuple(exprs))


def _groups(doc: Doc, flavors: Mapping[str, ResourceFlavor]) -> tuple[ResourceGroup, ...]:
    groups = []
    seen_flavors: set[str] = set()
    seen_resources: set[str] = set()
    for g, raw in enumerate(sequence(doc.spec().get("resourceGroups"), doc, "spec.resourceGroups")):
        where = f"spec.resourceGroups[{g}]"
        raw = mapping(raw, doc, where)
        covered = tuple(str(r) for r in sequence(raw.get("coveredResources"), doc, where + ".coveredResources"))
        for r in covered:
            if r in seen_resources:
                raise doc.error(where + ".coveredResources", f"resource {r!r} is covered by two resource groups")
            seen_resources.add(r)
        group_flavors = []
        for f, fl in enumerate(sequence(raw.get("flavors"), doc, where + ".flavors")):
            fwhere = f"{where}.flavors[{f}]"
            fl = mapping(fl, doc, fwhere)
            name = text(fl.get("name"), doc, fwhere + ".name")
            if name not in flavors:
                known = ", ".join(sorted(flavors)) or "none defined"
                raise doc.error(
                    fwhere + ".name", f"quota over flavor {name!r}, which no ResourceFlavor defines (flavors: {known})"
                )
            if name in seen_flavors:
                raise doc.error(fwhere + ".name", f"flavor {name!r} appears twice")
            seen_flavors.add(name)
            quotas = []
            for r, res in enumerate(sequence(fl.get("resources"), doc, fwhere + ".resources")):
                rwhere = f"{fwhere}.resources[{r}]"
                res = mapping(res, doc, rwhere)
                rname = text(res.get("name"), doc, rwhere + ".name")
                nominal = quantity(res.get("nominalQuota", 0), doc, rwhere + ".nominalQuota")
                borrowing = res.get("borrowingLimit")
                lending = res.get("lendingLimit")
                quota = ResourceQuota(
                    rname,
                    nominal,
                    None if borrowing is None else quantity(borrowing, doc, rwhere + ".borrowingLimit"),
                    None if lending is None else quantity(lending, doc, rwhere + ".lendingLimit"),
                )
                if quota.lending_limit is not None and quota.lending_limit > nominal:
                    raise doc.error(
                        rwhere + ".lendingLimit", f"{lending!r} exceeds nominalQuota {res.get('nominalQuota', 0)!r}"
                    )
                quotas.append(quota)
            names = [q.name for q in quotas]
            if names != list(covered):
                raise doc.error(
                    fwhere + ".resources",
                    f"lists {names}, but the group covers {list(covered)} (same resources, same order)",
                )
            group_flavors.append(FlavorQuotas(name, tuple(quotas)))
        groups.append(ResourceGroup(covered, tuple(group_flavors)))
    return tuple(groups)


def _check_cycles(cohorts: Mapping[str, Cohort], origin: Mapping[tuple[str, str], Doc]) -> None:
    for start in sorted(cohorts):
        path = [start]
        node = cohorts[start].parent
        while node is not None:
            if node in path:
                cycle = [*path[path.index(node) :], node]
                doc = origin.get(("Cohort", start))
                message = f"cohorts form a cycle: {' -> '.join(cycle)}"
                if doc is None:  # pragma: no cover - a cycle always passes through declared cohorts
                    raise ValueError(message)
                raise doc.error("spec.parentName", message)
            path.append(node)
            node = cohorts[node].parent


def cohort_members(config: KueueConfig, cohort: str) -> tuple[str, ...]:
    """The ClusterQueues directly in ``cohort``."""
    return tuple(name for name, cq in config.cluster_queues.items() if cq.cohort == cohort)


def child_cohorts(config: KueueConfig, cohort: str) -> tuple[str, ...]:
    return tuple(name for name, c in config.cohorts.items() if c.parent == cohort)
