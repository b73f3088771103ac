"""``kueue`` and ``kai``: Shapeshift policies that replay a site's own Kueue or KAI-Scheduler
configuration (``--policy kueue --policy-arg config=FILE``).

Each decision brings the scheduler's view up to the engine's (admitted = running jobs,
pending = waiting jobs), asks the rules (``kueue_cycle.run_cycles``,
``kai_rules.run_cycle``) who is admitted and who is evicted, and places the admitted
jobs on nodes. A job's queue is read from one of its fields (``queue_from``): ``auto``
(the default) takes the workload's ``queue`` column (with its ``namespace``) where a job
gives one and its ``vc`` otherwise, so a Philly-style trace maps its virtual clusters to
queues; for Kueue the name is a LocalQueue (``namespace/name`` or a name unique across
namespaces) or else a ClusterQueue. A job's ``priority_class`` names a
WorkloadPriorityClass (Kueue) or a PriorityClass (KAI, whose predefined classes are
known); without one the ``priority`` parameter applies. A job of ``pods`` pods is one
gang: Kueue admits the whole workload or none of it, KAI starts all pods of the
PodGroup or none. Without ``config`` every job goes to one queue owning the whole cluster
(Kueue: a ClusterQueue whose quota is the cluster's GPUs; KAI: a queue with unlimited
quota), which makes the policy a plain priority-then-FIFO scheduler. GPUs are requested
as ``gpu_resource`` (Kueue) or ``gpu`` (KAI); CPUs and memory (Kueue) only where the
ClusterQueue has quota for them.

Differences from the real systems, all listed in docs/kueue-kai.md: placement is one of
Shapeshift's placements (``scattered`` by default for Kueue, the nearest to
kube-scheduler's default least-allocated scoring; ``consolidated`` for KAI, its
bin-packing default); a ResourceFlavor's ``nodeLabels`` restrict a job admitted on it to
the nodes carrying those labels (cluster YAML ``labels``) only when some node of the
cluster carries labels at all, so that a configuration replays on an unlabelled
cluster; a Kueue preemptor is admitted in the same decision
that evicts its targets rather than a cycle later.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numpy as np

from shapeshift.engine.contract import ARRIVAL, COMPLETION, PolicyTraits
from shapeshift.engine.fractions import whole_gpu_spec
from shapeshift.engine.view import ClusterView
from shapeshift.errors import InputError
from shapeshift.k8s import kai_rules, kueue_cycle, kueue_rules
from shapeshift.k8s.documents import parse_documents
from shapeshift.k8s.kai_config import UNLIMITED, KaiConfig, kai_from_documents, read_kai
from shapeshift.k8s.kueue_config import KueueConfig, kueue_from_documents, read_kueue
from shapeshift.k8s.kueue_quota import QuotaTree, Usage, charge, empty_usage
from shapeshift.k8s.queue_metrics import QueueLedger
from shapeshift.model import Allocation, JobSpec, Schedule
from shapeshift.policies.framework.placement import PLACEMENTS, PlacementName
from shapeshift.policies.framework.registry import PolicyParams, register
from shapeshift.policies.k8s.kai_tracker import KaiTracker

QueueField = Literal["auto", "queue", "vc", "tenant", "user"]


#: Without ``config``: one ClusterQueue owning every GPU of the cluster, taking every job.
DEFAULT_KUEUE = """kind: ResourceFlavor
metadata: {name: default-flavor}
---
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [%s]
    flavors:
    - name: default-flavor
      resources: [{name: %s, nominalQuota: %d}]
"""
#: Without ``config``: one queue deserving the whole cluster, taking every job.
DEFAULT_KAI = "kind: Queue\nmetadata: {name: default}\nspec: {resources: {gpu: {quota: -1, limit: -1}}}\n"


class KueueParams(PolicyParams):
    config: str = ""
    queue_from: QueueField = "auto"
    gpu_resource: str = "nvidia.com/gpu"
    priority: int = 0
    priority_class: str = ""
    fair_sharing: bool | None = None
    placement: PlacementName = "scattered"


class KaiParams(PolicyParams):
    config: str = ""
    queue_from: QueueField = "auto"
    priority: int = 50
    placement: PlacementName = "consolidated"


def queue_of(spec: JobSpec, queue_from: str, namespaced: bool) -> str:
    """The queue a job is submitted to, read from ``queue_from`` (``auto``: its queue
    column where given, else its ``vc``); ``namespaced`` prefixes the namespace."""
    if queue_from in ("auto", "queue") and (spec.queue_name or queue_from == "queue"):
        if namespaced and spec.namespace:
            return f"{spec.namespace}/{spec.queue_name}"
        return spec.queue_name
    return str(getattr(spec, "vc" if queue_from == "auto" else queue_from))


def queue_field(spec: JobSpec, queue_from: str) -> str:
    """The workload column a job's queue came from (for error messages)."""
    if queue_from in ("auto", "queue") and (spec.queue_name or queue_from == "queue"):
        return "queue"
    return "vc" if queue_from == "auto" else queue_from


#: Seconds between KAI scheduling cycles (``defaultSchedulerPeriod``).
KAI_SCHEDULE_PERIOD = 1.0


def _place(
    view: ClusterView, placement, started: list[str], evicted: list[str], nodes_of=None, whole: bool = False
) -> Schedule:
    free = view.scratch()
    changes: dict[str, Allocation | None] = {}
    for job_id in evicted:
        alloc = view.allocations.get(job_id)
        if alloc is not None:
            free.give(alloc)
            changes[job_id] = None
    reasons: dict[str, str] = {}
    for job_id in started:
        status = view.job(job_id)
        nodes = view.partitions[status.partition]
        if nodes_of is not None:
            nodes = nodes_of(job_id, status.partition, nodes)
        spec = whole_gpu_spec(status.spec) if whole else status.spec  # Kueue: whole GPUs only
        alloc = placement.find(spec, nodes, free) if len(nodes) else None
        if alloc is None:
            reasons[job_id] = "admitted, but no set of nodes has the GPUs free"
            continue
        free.take(alloc)
        changes[job_id] = alloc
    return Schedule(base=view.allocations, changes=changes, reasons=reasons, default_reason="waiting in its queue")


class KueuePolicy:
    name = "kueue"
    triggers = frozenset({ARRIVAL, COMPLETION})
    default_round = None
    #: ``nvidia.com/gpu`` is a whole-number resource: a fraction of a GPU gets one (ours).
    traits = PolicyTraits(whole_gpus=True)

    def __init__(self, config: KueueConfig | None, params: KueueParams):
        self.config = config  # type: ignore[assignment]  # None until the first decision sizes the default
        self.params = params
        self.placement = PLACEMENTS[params.placement]()
        fair = params.fair_sharing if params.fair_sharing is not None else bool(config and config.fair_sharing)
        strategies = config.preemption_strategies if config else kueue_rules.Options().preemption_strategies
        self.options = kueue_rules.Options(fair_sharing=fair, preemption_strategies=strategies)
        self.priority = params.priority
        if params.priority_class:
            classes = config.priority_classes if config else {}
            if params.priority_class not in classes:
                known = ", ".join(sorted(classes)) or "none defined"
                raise InputError(
                    f"policy kueue: priority_class {params.priority_class!r} is no WorkloadPriorityClass of "
                    f"{params.config or 'the default configuration'} ({known})",
                    field="priority_class",
                )
            self.priority = classes[params.priority_class].value
        self.admitted: dict[str, kueue_rules.Admitted] = {}
        self.queued = kueue_cycle.PendingQueues()  # the engine's waiting jobs, as Kueue orders them
        self.tree: QuotaTree | None = None
        self.memo: kueue_cycle.FlavorMemo | None = None
        self.usage: Usage = empty_usage()
        self._seq: dict[str, int] = {}  # admission order, in which releases are applied
        self._admissions = 0
        self._queue_of: dict[str, str] = {}
        self._workloads: dict[str, kueue_rules.Workload] = {}
        self._flavor_masks: dict[tuple[str, str], np.ndarray] = {}
        self.ledger: QueueLedger | None = None

    def summary_fields(self) -> dict:
        """Per-ClusterQueue figures (``queue_metrics``) for ``summary.json``."""
        return self.ledger.summary() if self.ledger is not None else {}

    def cluster_queue(self, job_id: str, name: str, field: str = "queue") -> str:
        if not self.params.config:
            return "cluster-queue"
        found = self._queue_of.get(name)
        if found is not None:
            return found
        lqs = self.config.local_queues
        ns, sep, lq = name.partition("/")
        if sep and (ns, lq) in lqs:
            found = lqs[(ns, lq)].cluster_queue
        else:
            matches = [q.cluster_queue for (_, n), q in lqs.items() if n == name]
            if len(matches) == 1:
                found = matches[0]
            elif not matches and name in self.config.cluster_queues:
                found = name
        if found is None:
            known = sorted({f"{n}/{q}" for n, q in lqs} | set(self.config.cluster_queues))
            raise InputError(
                f"job {job_id}: queue {name!r} ({field}) names no single LocalQueue or "
                f"ClusterQueue of {self.params.config}; known: {', '.join(known) or 'none'}",
                field=field,
            )
        self._queue_of[name] = found
        return found

    def _priority(self, job_id: str, spec: JobSpec) -> int:
        if not spec.priority_class:
            return self.priority
        found = self.config.priority_classes.get(spec.priority_class)
        if found is None:
            known = ", ".join(sorted(self.config.priority_classes)) or "none defined"
            raise InputError(
                f"job {job_id}: priority_class {spec.priority_class!r} is no WorkloadPriorityClass of "
                f"{self.params.config or 'the default configuration'} ({known})",
                field="priority_class",
            )
        return found.value

    def _workload(self, view: ClusterView, job_id: str) -> kueue_rules.Workload:
        found = self._workloads.get(job_id)
        if found is not None:
            return found
        spec = view.job(job_id).spec
        source = self.params.queue_from
        cq = self.cluster_queue(job_id, queue_of(spec, source, namespaced=True), queue_field(spec, source))
        covered = {r for g in self.config.cluster_queues[cq].resource_groups for r in g.covered_resources}
        requests = {self.params.gpu_resource: float(spec.num_gpus)}
        if "cpu" in covered and spec.num_cpus > 0:
            requests["cpu"] = float(spec.num_cpus)
        if "memory" in covered and spec.mem_gb > 0:
            requests["memory"] = float(spec.mem_gb) * 2**30
        workload = kueue_rules.Workload(job_id, cq, requests, self._priority(job_id, spec), spec.submit_time)
        self._workloads[job_id] = workload
        return workload

    def _flavor_nodes(self, view: ClusterView, flavor: str | None, partition: str, nodes: np.ndarray) -> np.ndarray:
        """The nodes a job admitted on ``flavor`` may use: those carrying its ``nodeLabels``
        (all of them when no node of the cluster carries labels)."""
        if flavor is None or flavor not in self.config.flavors:
            return nodes
        wanted = self.config.flavors[flavor].node_labels
        specs = view.cluster.nodes
        if not wanted or not any(n.labels for n in specs):
            return nodes
        key = (flavor, partition)
        found = self._flavor_masks.get(key)
        if found is None:
            found = np.array([i for i in nodes.tolist() if set(wanted) <= set(specs[i].labels)], dtype=nodes.dtype)
            self._flavor_masks[key] = found
        return found

    def _charge(self, admitted: kueue_rules.Admitted) -> None:
        self.admitted[admitted.workload.name] = admitted
        self._seq[admitted.workload.name] = self._admissions
        self._admissions += 1
        charge(self.tree, self.usage, admitted.workload.cluster_queue, admitted.charges())

    def _release(self, job_id: str) -> None:
        a = self.admitted.pop(job_id)
        del self._seq[job_id]
        charge(self.tree, self.usage, a.workload.cluster_queue, a.charges(), -1.0)

    def _sync(self, view: ClusterView) -> None:
        """Bring the admitted set (and its quota usage) up to the engine's running jobs:
        finished ones leave; ones started outside this policy are charged to their queue's
        first flavors."""
        if self.tree is None:
            self.tree = QuotaTree(self.config)
            self.memo = kueue_cycle.FlavorMemo(self.tree, self.options.fair_sharing)
        held = view.allocations
        # a job that stopped running is among the touched ones; released in admission order
        gone = sorted((j for j in view.touched if j in self.admitted and j not in held), key=self._seq.__getitem__)
        for job_id in gone:
            self._release(job_id)
        if len(self.admitted) == len(held):
            return
        for job_id in [j for j in self.admitted if j not in held]:
            self._release(job_id)
        if len(self.admitted) == len(held):
            return
        for job_id in held:
            if job_id not in self.admitted:
                w = self._workload(view, job_id)
                cq = self.config.cluster_queues[w.cluster_queue]
                flavors = {r: g.flavors[0].name for g in cq.resource_groups if g.flavors for r in g.covered_resources}
                self._charge(kueue_rules.Admitted(w, flavors, view.now))

    def _unchanged(self, view: ClusterView) -> Schedule:
        """The schedule of a decision that starts and evicts nothing."""
        schedule = Schedule(base=view.allocations, changes={}, reasons={}, default_reason="waiting in its queue")
        self.ledger.record(view, schedule, lambda j: self._workloads[j].cluster_queue)
        return schedule

    def decide(self, view: ClusterView) -> Schedule:
        if self.config is None:
            gpus = sum(view.capacity_gpus(p) for p in view.partitions)
            text = DEFAULT_KUEUE % (self.params.gpu_resource, self.params.gpu_resource, gpus)
            self.config = kueue_from_documents(parse_documents(text, "<default>"))
        if self.ledger is None:
            gpu = self.params.gpu_resource
            self.ledger = QueueLedger(
                {
                    name: sum(
                        q.nominal for g in cq.resource_groups for f in g.flavors for q in f.resources if q.name == gpu
                    )
                    for name, cq in self.config.cluster_queues.items()
                }
            )
        self._sync(view)
        queued = self.queued
        queued.sync(view, lambda j: self._workload(view, j))
        if not queued.names:  # no head in any queue: no cycle would run
            return self._unchanged(view)
        outcome = kueue_cycle.run_cycles(
            self.config,
            (),
            self.admitted.values(),
            now=view.now,
            options=self.options,
            tree=self.tree,
            usage=self.usage,
            queues=queued,
            memo=self.memo,
        )
        held = view.allocations
        evicted = [n for n in dict.fromkeys(outcome.preempted) if n in held]
        for n in outcome.preempted:  # admitted, then evicted within this decision: still waiting
            if n not in held and n not in queued.names:
                queued.add(self._workloads[n])
        fresh = [a for a in outcome.new if a.workload.name not in held]
        if not fresh and not evicted:
            return self._unchanged(view)
        flavor_of = {a.workload.name: a.flavors.get(self.params.gpu_resource) for a in fresh}

        def nodes_of(job_id: str, partition: str, nodes: np.ndarray) -> np.ndarray:
            return self._flavor_nodes(view, flavor_of.get(job_id), partition, nodes)

        schedule = _place(view, self.placement, [a.workload.name for a in fresh], evicted, nodes_of, whole=True)
        for job_id in evicted:
            self._release(job_id)
        for a in fresh:
            if schedule.allocation(a.workload.name) is not None:
                self._charge(kueue_rules.Admitted(a.workload, a.flavors, view.now))
            else:  # admitted but not placed: it waits on
                queued.add(a.workload)
        self.ledger.record(view, schedule, lambda j: self._workloads[j].cluster_queue)
        return schedule


class KaiPolicy:
    name = "kai"
    triggers = frozenset({ARRIVAL, COMPLETION})
    default_round = None

    def __init__(self, config: KaiConfig, params: KaiParams):
        self.config = config
        self.params = params
        self.placement = PLACEMENTS[params.placement]()
        self._jobs: dict[str, kai_rules.Job] = {}
        self.tracker = KaiTracker(config, self._job)
        quota = {q: config.queues[q].resource("gpu").quota for q in config.leaves}
        self.ledger = QueueLedger({q: math.inf if v == UNLIMITED else v for q, v in quota.items()})

    def summary_fields(self) -> dict:
        """Per-queue figures (``queue_metrics``) for ``summary.json``."""
        return self.ledger.summary()

    def _job(self, view: ClusterView, job_id: str) -> kai_rules.Job:
        found = self._jobs.get(job_id)
        if found is not None:
            return found
        spec = view.job(job_id).spec
        queue = queue_of(spec, self.params.queue_from, namespaced=False) if self.params.config else "default"
        if queue not in self.config.queues or not self.config.is_leaf(queue):
            leaves = sorted(q for q in self.config.queues if self.config.is_leaf(q))
            raise InputError(
                f"job {job_id}: queue {queue!r} ({queue_field(spec, self.params.queue_from)}) is not a leaf Queue of "
                f"{self.params.config}; leaf queues: {', '.join(leaves) or 'none'}",
                field=queue_field(spec, self.params.queue_from),
            )
        priority = self.params.priority
        if spec.priority_class:
            if spec.priority_class not in self.config.priority_classes:
                known = ", ".join(sorted(self.config.priority_classes))
                raise InputError(
                    f"job {job_id}: priority_class {spec.priority_class!r} is no PriorityClass of "
                    f"{self.params.config or 'the default configuration'} ({known})",
                    field="priority_class",
                )
            priority = self.config.priority_classes[spec.priority_class]
        # A fraction counts as its share (KAI's gpu-fraction, docs/gpu-sharing/README.md).
        per_pod = {"gpu": spec.gpu_fraction / spec.pods}
        job = kai_rules.Job(job_id, queue, per_pod, spec.pods, priority, spec.submit_time)
        self._jobs[job_id] = job
        return job

    def decide(self, view: ClusterView) -> Schedule:
        tracker = self.tracker
        state = tracker.sync(view)
        outcome = state.cycle(view.now, tracker.historical_usage(view.now))
        held = view.allocations
        evicted = [n for n in outcome.evicted if n in held]
        # A job the cycle started and then took back (Allocate, then Reclaim) does not start:
        # the session's statement undoes its allocation, and it waits for the next cycle,
        # one schedule period later (cmd/scheduler/app/options/options.go, 1 s).
        undone = {n for n in outcome.evicted if n not in held}
        started = [n for n in outcome.started if n not in held and n not in undone]
        schedule = _place(view, self.placement, started, evicted)
        if undone:
            schedule = dataclasses.replace(schedule, wake_at=view.now + KAI_SCHEDULE_PERIOD)
        tracker.settle(view, outcome, evicted, schedule)
        self.ledger.record(view, schedule, lambda j: self._jobs[j].queue)
        return schedule


@register(
    "kueue", "Kueue's admission (quota, cohorts, borrowing, preemption, fair sharing) from its own YAML.", KueueParams
)
def make_kueue(params: KueueParams) -> KueuePolicy:
    return KueuePolicy(read_kueue(params.config) if params.config else None, params)


@register("kai", "KAI-Scheduler's hierarchical fair-share queues, reclaim and preemption from its own YAML.", KaiParams)
def make_kai(params: KaiParams) -> KaiPolicy:
    config = read_kai(params.config) if params.config else kai_from_documents(parse_documents(DEFAULT_KAI, "<default>"))
    return KaiPolicy(config, params)
