"""KAI-Scheduler's queues and fairness settings, read from the YAML an administrator applies.

Field names follow KAI-Scheduler v0.17.0-9 (commit d5bc503, Aug 2026):
``pkg/apis/scheduling/v2/queue_types.go`` (``spec.parentQueue``, ``spec.priority``
default 100, ``spec.resources``) and ``pkg/apis/scheduling/v2/resources.go``
(``cpu``/``gpu``/``memory`` each with ``quota``, ``overQuotaWeight``, ``limit``);
``pkg/apis/kai/v1/schedulingshard_types.go`` (``spec.kValue``, ``spec.usageDBConfig``
``.usageParams.halfLifePeriod``/``windowSize``) for time-based fair share, described in
docs/time-based-fairshare/README.md (window one week by default, no decay unless a
half-life is set) and pkg/scheduler/plugins/proportion/proportion.go (``kValue``
default 1.0); ``reclaimerUtilizationMultiplier`` (docs/fairness/README.md, default 1.0,
below 1 refused) is read from ``spec.args`` or ``spec.pluginArguments.proportion``.

Units are KAI's: GPUs in devices, CPU in millicores, memory in megabytes
(docs/queues/README.md). ``-1`` means unlimited for ``quota`` and ``limit``. Unset
values: docs/queues/README.md's table gives 0 for both ``quota`` and ``limit``, while the
same page's "Unlimited Queue" example and docs/quickstart/default-queues.yaml use
``limit: -1`` and ``overQuotaWeight: 1``; we read an unset ``quota`` as 0, an unset
``limit`` as -1 (no limit) and an unset ``overQuotaWeight`` as 1, so that a queue written
with only a quota behaves as the quick-start queues do (fidelity table, docs/kueue-kai.md).

Checks: unknown kinds, a ``parentQueue`` that no Queue defines, a cycle of parents, a
limit below the quota, and jobs may only be submitted to leaf queues (checked where the
jobs are read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from shapeshift.k8s.documents import Doc, duration_s, mapping, quantity, read_documents, text

KINDS = ("Queue", "SchedulingShard", "PriorityClass")
#: The priority classes a KAI-Scheduler deployment comes with (docs/priority/README.md,
#: "Priority Classes"); a ``PriorityClass`` document (scheduling.k8s.io/v1, ``value``)
#: adds or overrides one. ``train`` is the default for a job naming none.
PREDEFINED_CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
RESOURCES = ("gpu", "cpu", "memory")
UNLIMITED = -1.0
DEFAULT_PRIORITY = 100
DEFAULT_WINDOW_S = 7 * 86400.0


@dataclass(frozen=True)
class QueueResource:
    quota: float = 0.0  # deserved; -1 unlimited
    over_quota_weight: float = 1.0
    limit: float = UNLIMITED  # -1 unlimited


_UNSET = QueueResource()


@dataclass(frozen=True)
class Queue:
    name: str
    parent: str | None = None
    priority: int = DEFAULT_PRIORITY
    resources: Mapping[str, QueueResource] = field(default_factory=dict)

    def resource(self, name: str) -> QueueResource:
        return self.resources.get(name, _UNSET)


@dataclass(frozen=True)
class Fairness:
    """The scheduler's fair-share settings (SchedulingShard)."""

    k_value: float = 1.0
    half_life_s: float | None = None  # None: no time decay (the default)
    window_s: float = DEFAULT_WINDOW_S
    reclaimer_utilization_multiplier: float = 1.0
    time_based: bool = False  # usageDBConfig present: historical usage counts


@dataclass(frozen=True)
class KaiConfig:
    queues: Mapping[str, Queue]
    fairness: Fairness = field(default_factory=Fairness)
    priority_classes: Mapping[str, int] = field(default_factory=lambda: dict(PREDEFINED_CLASSES))

    def children(self, name: str | None) -> tuple[str, ...]:
        return self._children.get(name, ())

    @cached_property
    def _children(self) -> dict[str | None, tuple[str, ...]]:
        out: dict[str | None, list[str]] = {}
        for q in self.queues.values():
            out.setdefault(q.parent, []).append(q.name)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def chains(self) -> dict[str, tuple[str, ...]]:
        """Each queue and its ancestors, nearest first."""
        out = {}
        for name in self.queues:
            chain: list[str] = []
            node: str | None = name
            while node is not None:
                chain.append(node)
                node = self.queues[node].parent
            out[name] = tuple(chain)
        return out

    @cached_property
    def leaves(self) -> frozenset[str]:
        parents = {q.parent for q in self.queues.values()}
        return frozenset(q for q in self.queues if q not in parents)

    def is_leaf(self, name: str) -> bool:
        return name in self.leaves


def read_kai(path: str | Path) -> KaiConfig:
    return kai_from_documents(read_documents(path))


def kai_from_documents(docs: Iterable[Doc]) -> KaiConfig:
    queues: dict[str, Queue] = {}
    origin: dict[str, Doc] = {}
    fairness = Fairness()
    shard: Doc | None = None
    classes = dict(PREDEFINED_CLASSES)
    for doc in docs:
        if doc.kind not in KINDS:
            raise doc.error("kind", f"unknown kind {doc.kind!r}; KAI-Scheduler configuration holds {', '.join(KINDS)}")
        if doc.kind == "SchedulingShard":
            if shard is not None:
                raise doc.error("kind", f"a second SchedulingShard (the first is {shard.where()})")
            shard = doc
            fairness = _fairness(doc)
            continue
        if doc.kind == "PriorityClass":
            value = doc.body.get("value")
            if isinstance(value, bool) or not isinstance(value, int):
                raise doc.error("value", f"{value!r} must be an integer")
            classes[doc.name] = value
            continue
        if doc.name in origin:
            raise doc.error("metadata.name", f"Queue {doc.name!r} is defined twice (also {origin[doc.name].where()})")
        origin[doc.name] = doc
        queues[doc.name] = _queue(doc)
    for name, q in queues.items():
        if q.parent is not None and q.parent not in queues:
            raise origin[name].error("spec.parentQueue", f"names queue {q.parent!r}, which is not defined")
    for name in sorted(queues):
        path = [name]
        node = queues[name].parent
        while node is not None:
            if node in path:
                cycle = [*path[path.index(node) :], node]
                raise origin[name].error("spec.parentQueue", f"queues form a cycle: {' -> '.join(cycle)}")
            path.append(node)
            node = queues[node].parent
    return KaiConfig(queues, fairness, classes)


def _queue(doc: Doc) -> Queue:
    spec = doc.spec()
    parent = text(spec.get("parentQueue"), doc, "spec.parentQueue") or None
    priority = spec.get("priority", DEFAULT_PRIORITY)
    if priority is None:
        priority = DEFAULT_PRIORITY
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise doc.error("spec.priority", f"{priority!r} must be an integer")
    resources = {}
    raw = mapping(spec.get("resources"), doc, "spec.resources")
    for name, value in raw.items():
        where = f"spec.resources.{name}"
        if name not in RESOURCES:
            raise doc.error(where, f"unknown resource {name!r}; queues take {', '.join(RESOURCES)}")
        value = mapping(value, doc, where)
        quota = _amount(value.get("quota"), 0.0, doc, where + ".quota")
        limit = _amount(value.get("limit"), UNLIMITED, doc, where + ".limit")
        weight = (
            1.0
            if value.get("overQuotaWeight") is None
            else quantity(value["overQuotaWeight"], doc, where + ".overQuotaWeight")
        )
        if limit != UNLIMITED and quota != UNLIMITED and limit < quota:
            raise doc.error(where + ".limit", f"limit {limit:g} is below quota {quota:g}")
        resources[str(name)] = QueueResource(quota, weight, limit)
    return Queue(doc.name, parent, priority, resources)


def _amount(value: object, default: float, doc: Doc, field: str) -> float:
    if value is None:
        return default
    number = quantity(value, doc, field, allow_negative=True)
    if number < 0 and number != UNLIMITED:
        raise doc.error(field, f"{value!r} must be -1 (unlimited) or not negative")
    return number


def _fairness(doc: Doc) -> Fairness:
    spec = doc.spec()
    k_value = 1.0 if spec.get("kValue") is None else quantity(spec["kValue"], doc, "spec.kValue")
    usage_db = mapping(spec.get("usageDBConfig"), doc, "spec.usageDBConfig")
    params = mapping(usage_db.get("usageParams"), doc, "spec.usageDBConfig.usageParams")
    half = params.get("halfLifePeriod")
    half_life = None if half in (None, "") else duration_s(half, doc, "spec.usageDBConfig.usageParams.halfLifePeriod")
    if half_life == 0:
        half_life = None
    window = params.get("windowSize")
    window_s = (
        DEFAULT_WINDOW_S
        if window in (None, "")
        else duration_s(window, doc, "spec.usageDBConfig.usageParams.windowSize")
    )
    args = mapping(spec.get("args"), doc, "spec.args")
    plugin = mapping(
        mapping(spec.get("pluginArguments"), doc, "spec.pluginArguments").get("proportion"),
        doc,
        "spec.pluginArguments.proportion",
    )
    raw = plugin.get("reclaimerUtilizationMultiplier", args.get("reclaimerUtilizationMultiplier"))
    multiplier = 1.0 if raw is None else quantity(raw, doc, "reclaimerUtilizationMultiplier")
    if multiplier < 1.0:
        raise doc.error("reclaimerUtilizationMultiplier", f"{raw!r} must be at least 1 (docs/fairness/README.md)")
    return Fairness(k_value, half_life, window_s, multiplier, bool(usage_db))
