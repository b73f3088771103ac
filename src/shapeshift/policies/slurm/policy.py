"""``slurm``: Slurm's own scheduling (multifactor priority, main scheduler, backfill).

Follows Slurm (``master`` after 25.05, commit 284c3b95 of SchedMD/slurm, checked
against tag ``slurm-22-05-8-1``; docs/slurm.md lists where the two differ) and reads
its parameters from the ``slurm.conf`` that ``--cluster`` named (or ``conf=FILE``;
Slurm's defaults without either):

* priority: ``priority.py`` (multifactor; ``priority/basic`` = submission order),
  recomputed every ``PriorityCalcPeriod`` (``_decay_thread``; ``clock.py``), when usage
  is decayed and charged (``fairshare.py``); a job gets its first priority when it is
  submitted;
* main scheduler (``src/slurmctld/job_scheduler.c``, ``_schedule`` and
  ``sort_job_queue2``; https://slurm.schedmd.com/sched_config.html): on every
  submission and completion and after every priority recalculation (a periodic pass
  with nothing changed starts nothing, so ``sched_interval`` needs no pass of its own),
  pending jobs in order of partition ``PriorityTier``, then priority, then submission;
  a job that cannot start stops its partition for the rest of the pass; at most
  ``default_queue_depth`` jobs;
* backfill (``plan.py``) every ``bf_interval`` seconds when ``SchedulerType`` is
  ``sched/backfill``.

Jobs run for their recorded time; plans use the time limit (whole minutes; the job's,
else the partition's ``DefaultTime``, else its ``MaxTime``). ``preempt/partition_prio``
preempts only on nodes that partitions share (the replay's share none); ``preempt/qos``
is ``preempt.py``. QOS/association limits hold jobs back (``qos_limits.py``), submit
limits refuse them (``submit_limits.py``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from pydantic import Field

from shapeshift.engine.contract import ARRIVAL, COMPLETION, PolicyTraits, PreemptKind
from shapeshift.engine.fractions import TypedGroups
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, ClusterSpec, JobSpec, Schedule
from shapeshift.policies.framework.registry import PolicyParams, register
from shapeshift.policies.slurm.candidate_rows import CandidateRows
from shapeshift.policies.slurm.clock import PriorityClock, StaticRows
from shapeshift.policies.slurm.cycle import BackfillCycle
from shapeshift.policies.slurm.ends import EndsByJob
from shapeshift.policies.slurm.fairshare import FairShare, Running
from shapeshift.policies.slurm.hooks import LimitsAndPreemption
from shapeshift.policies.slurm.plan import BackfillResult, Candidate, Ending, Free, Need, fit, never_placeable
from shapeshift.policies.slurm.preempt import QosPreemption, sort_queue
from shapeshift.policies.slurm.priority import JobFacts, Multifactor, qos_table
from shapeshift.policies.slurm.qos_limits import Limits
from shapeshift.policies.slurm.queue_order import PriorityOrder, TailReasons, bulk_keys, fresh_jobs
from shapeshift.policies.slurm.shapes import Shapes, free_borrowed
from shapeshift.slurm.assoc import complete_tree, read_assoc
from shapeshift.slurm.cluster import SlurmCluster
from shapeshift.slurm.conf import SlurmConf, SlurmPartition, read_slurm_conf
from shapeshift.slurm.qos import read_qos


class SlurmParams(PolicyParams):
    #: A slurm.conf to read; "" = the one --cluster named (else Slurm's defaults).
    conf: str = ""
    #: An ``sacctmgr show assoc -P`` dump (shares per account and user); "" = share 1 each.
    assoc: str = ""
    #: QOS priorities as ``name=priority,...`` (``sacctmgr show qos``); "" = all 0.
    qos_priority: str = ""
    #: An ``sacctmgr show qos -P`` dump (its priorities; ``qos_priority`` items override).
    qos: str = ""
    #: Seconds after the first submission at which a priority calculation falls
    #: (taken modulo ``PriorityCalcPeriod``). slurmctld's decay thread calculates at its
    #: own start and every period after (``_decay_thread``), an instant sacct does not
    #: record; its last one is in ``StateSaveLocation/priority_last_decay_ran``. 0 = at
    #: the first submission.
    calc_phase: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    #: The wall-clock time (Unix seconds) of time 0, the first submission: the will-run
    #: test groups running jobs' ends in windows aligned on the wall clock
    #: (``plan.will_run``). ``whatif`` passes the history's; 0 = aligned on time 0.
    clock_origin: float = Field(default=0.0, allow_inf_nan=False)


class SlurmPolicy(BackfillCycle, LimitsAndPreemption, PriorityClock):
    name = "slurm"
    triggers = frozenset({ARRIVAL, COMPLETION})
    default_round = None

    def __init__(self, params: SlurmParams):
        self.params = params
        # gres/gpu counts whole GPUs: a fraction of one gets a whole GPU (ours).
        self.traits = PolicyTraits(refuses=self.never_placeable, whole_gpus=True, preempts_as=self.preempts_as)
        #: GPUs per node of each node list ``never_placeable`` was handed, by its identity.
        self._node_gpus: dict[int, tuple[Sequence[int], list[int]]] = {}
        self.conf: SlurmConf | None = read_slurm_conf(params.conf) if params.conf else None
        self.qos_dump = {q.name: q for q in (read_qos(params.qos) if params.qos else ())}
        self.qos = qos_table(params.qos_priority, tuple(self.qos_dump.values()))
        self._init_hooks(self.qos_dump, params.assoc)
        #: ``preempt/qos`` (``None`` without it) and the limits (set up with the tree).
        self.preemption: QosPreemption | None = None
        self.limits: Limits | None = None
        #: What each preempted job's preemption does (job -> kind).
        self.preempted: dict[str, PreemptKind] = {}
        self.preempt_log: list[PreemptKind] = []
        #: A requeued job's begin time: not eligible before it (``job_mgr.c``).
        self.begin: dict[str, float] = {}
        self.exempt_wake = math.inf
        self._ready = False
        self.prio: dict[str, int] = {}
        self.order: dict[str, int] = {}
        #: Pending jobs in priority order between recalculations (without preemption).
        self.queue_order = PriorityOrder()
        self.next_order = 0
        #: The started jobs each calculation charges.
        self.running = Running()
        #: Each running job's planned end and nodes, for the backfill plan (kept from its
        #: start to its end rather than rebuilt every cycle).
        self.endings = EndsByJob()
        #: What each pending job's priority depends on besides time and usage.
        self.facts: dict[str, JobFacts] = {}
        #: The part of each pending job's priority that does not change while it waits.
        self.static_rows = StaticRows()
        #: Each pending job's partition ``PriorityTier`` (the queue's first key).
        self.tiers: dict[str, int] = {}
        #: ``never_placeable``'s answers per node list and GPU count.
        self._refusals: dict[tuple[int, int], str] = {}
        self.last_tick = 0.0
        self.next_bf = 0.0
        #: The job the main scheduler tested first and could not place, with the engine's
        #: ``FreeResources.released`` count then.
        self.head_miss: tuple[str, int] | None = None
        #: Whether anything a backfill cycle depends on changed since the last one (a
        #: submission, a completion, a start, a priority recalculation, a job past its
        #: limit). Without a change a cycle starts nothing new: jobs it could start were
        #: started by the previous one, and time passing only adds reservations. So the
        #: replay skips those cycles; the decisions are the same.
        self.dirty = True
        #: Each started job's priority when it started (what sacct's Priority records),
        #: kept where preemption reads it.
        self.start_priority: dict[str, int] = {}
        self.last_plan: BackfillResult | None = None
        self.candidates: dict[str, Candidate] = {}
        self.candidate_rows = CandidateRows()
        #: The decision's reasons when the main scheduler stopped before the queue's end.
        self.tail: TailReasons | None = None
        #: The main scheduler's fit: ``fit``, or its compiled twin once a backfill cycle
        #: has run compiled (so a replay that never needs numba never imports it).
        self.fit_head = fit
        self.shapes = Shapes()
        self._assoc_keys: dict[tuple[str, str], str] = {}

    # -- set-up on the first decision: the cluster is known only then -----------------
    def _setup(self, view: ClusterView) -> None:
        conf = self.conf or (view.cluster.slurm if isinstance(view.cluster, SlurmCluster) else None)
        if conf is None:
            from shapeshift.slurm.conf import SlurmConf as Conf

            conf = Conf(path="<defaults>", nodes=(), partitions=())
        # preempt/partition_prio lets a job preempt jobs of lower-PriorityTier partitions
        # on the nodes they share (https://slurm.schedmd.com/preempt.html); the replay's
        # partitions share no node, so no job can preempt and the replay is Slurm's.
        if conf.preempt_type == "qos" and conf.preempt_mode != "off":
            self.preemption = QosPreemption(conf, self.qos_dump, conf.preempt_youngest_first)
        self.conf = conf
        nodes = view.cluster.nodes
        factors = [p.priority_job_factor for p in conf.partitions]
        top = max(factors, default=0)
        self.part_norm = {p.name: (p.priority_job_factor / top if top else 0.0) for p in conf.partitions}
        self.multifactor = Multifactor(conf.priority, sum(n.cpus for n in nodes), len(nodes))
        weights = {n.name: 1 for n in nodes} | {n.name: n.weight for n in conf.nodes}
        self.groups: dict[str, list[list[int]]] = {}
        for part, idx in view.partitions.items():
            by_weight: dict[int, list[int]] = {}
            for i in sorted(idx.tolist()):
                by_weight.setdefault(weights.get(nodes[i].name, 1), []).append(i)
            self.groups[part] = [by_weight[w] for w in sorted(by_weight)]
        self.largest = {
            part: max((nodes[i].gpus for g in groups for i in g), default=0) for part, groups in self.groups.items()
        }
        self.typed = TypedGroups(view.cluster)  # a gres type constraint (``--gres=gpu:TYPE:N``)
        self.shapes.reuse = view.sharing is None  # allocations told apart by identity only there
        self.fairshare: FairShare | None = None
        self._parts: dict[str, SlurmPartition | None] = {}
        period = max(conf.priority.calc_period, 60)
        # The calculation before the first submission, so the next one falls at the phase.
        self.last_tick = view.now + self.params.calc_phase % period - period
        self._ready = True

    def _tree(self, view: ClusterView, jobs: list[JobSpec]) -> None:
        assert self.conf is not None
        assocs = read_assoc(self.params.assoc) if self.params.assoc else ()
        pairs = {(j.tenant or "root", j.user or "nobody") for j in jobs}
        tree = complete_tree(assocs, pairs)
        self.fairshare = FairShare(tree, self.conf.priority.decay_half_life, self.conf.priority.fair_tree)
        self._assoc_keys = {}
        limits = Limits(self.qos_dump, tree)
        self.limits = limits if limits.active else None

    def never_placeable(self, spec: JobSpec, cluster: ClusterSpec, nodes: Sequence[int]) -> str:
        """``PolicyTraits.refuses``: a job whose GPUs cannot be split equally over the
        partition's nodes is refused at arrival, as slurmctld refuses it at submission."""
        hit = self._node_gpus.get(id(nodes))
        if hit is None or hit[0] is not nodes:  # the engine hands the same tuple each time
            hit = self._node_gpus[id(nodes)] = (nodes, [cluster.nodes[i].gpus for i in nodes])
            self._refusals = {k: v for k, v in self._refusals.items() if k[0] != id(nodes)}
        answer = self._refusals.get((id(nodes), spec.num_gpus))
        if answer is None:
            answer = self._refusals[(id(nodes), spec.num_gpus)] = never_placeable(spec.num_gpus, hit[1])
        return answer or self._submit_refusal(spec)  # a submit limit refuses it too

    # -- facts about jobs -------------------------------------------------------------
    def partition_of(self, spec: JobSpec) -> SlurmPartition | None:
        """The job's partition (the default one for a job that names none)."""
        assert self.conf is not None
        if spec.vc in self._parts:
            return self._parts[spec.vc]
        part = self.conf.partition(spec.vc)
        if part is None and not spec.vc:
            part = next((p for p in self.conf.partitions if p.default), None)
        self._parts[spec.vc] = part
        return part

    def limit(self, spec: JobSpec) -> float:
        """The time limit the planner uses, in whole minutes (seconds; inf = none)."""
        part = self.partition_of(spec)
        limit = spec.time_limit
        if limit is None and part is not None:
            limit = part.default_time if part.default_time is not None else part.max_time
        return math.inf if limit is None else math.ceil(limit / 60) * 60

    def billable(self, spec: JobSpec) -> float:
        """Billable TRES (``TRESBillingWeights`` summed; CPUs when the partition has none)."""
        part = self.partition_of(spec)
        weights = dict(part.billing) if part is not None else {}
        if not weights:
            return max(spec.num_cpus, 1.0)
        return (
            weights.get("cpu", 0.0) * spec.num_cpus
            + weights.get("gres/gpu", 0.0) * spec.num_gpus
            + weights.get("mem", 0.0) * spec.mem_gb
        )

    # -- one decision -----------------------------------------------------------------
    def decide(self, view: ClusterView) -> Schedule:
        if not self._ready:
            self._setup(view)
        now, self.last_view = view.now, view
        for job_id in view.finished:
            end = view.job(job_id).end_time
            self.running.finish(job_id, now if end is None else end)
            self.endings.pop(job_id, None)
        # The whole queue is listed only where something reads all of it (a priority
        # calculation, preemption, a requeued job's begin time); otherwise a decision
        # reads the jobs that arrived since the last one (``fresh_jobs``) and the kept order.
        listed: list[str] | None = None

        def everyone() -> list[str]:
            nonlocal listed
            if listed is None:
                listed = []
                for part in view.partitions:
                    listed.extend(view.pending(part))
            return listed

        total = sum(view.pending_count(part) for part in view.partitions)
        if self.fairshare is None:
            self._tree(view, [view.job(j).spec for j in everyone()])
        # The jobs queued since the last decision (a calculation leaves them out).
        if self.preemption is None and not self.begin:
            fresh = fresh_jobs(view, self.prio)
        else:
            fresh = [j for j in everyone() if j not in self.prio]
        # Every calculation due runs, whatever else happened at this instant.
        ticked = self._tick_due(view.now) and self._ticks(view, lambda: self._priced(everyone, total - len(fresh)))
        if ticked or view.finished:
            self.dirty = True
        # A lone pending job's priority orders nothing (without preemption, the only other
        # reader): it is computed, for this instant and this usage, only if it stays pending.
        lone = self.preemption is None and total == 1
        for job_id in fresh:
            self.dirty = True
            self.order[job_id] = self.next_order  # a requeued job's anew: a new submit time
            self.next_order += 1
            if lone:
                self._assoc(view.job(job_id).spec)  # the tree grows in the same order
            else:
                self.prio[job_id] = self._priority(view, job_id, now)
        if not total and not self.graced:
            return self._idle(view)
        free = self._free(view)
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        waiting = [j for j in everyone() if self.begin.get(j, now) > now] if self.begin else []
        count = total - len(waiting)
        if waiting:  # requeued jobs before their begin time
            reasons.update(dict.fromkeys(waiting, "BeginTime"))
            listed = [j for j in everyone() if j not in reasons]
        if self.preemption is not None:
            queue = sort_queue(everyone(), self._sort_key(view), self._qos_prio(view), self.preemption)
        elif count > 1:
            key, kept = self._sort_key(view), self.queue_order
            if not kept.valid:
                queue = kept.rebuild_columns(everyone(), *bulk_keys(everyone(), self.tiers, self.prio, self.order, key))
            elif not self.begin:  # no requeued job waits: the kept order holds the others
                queue = kept.extend(fresh, count, key, everyone)
            else:
                queue = kept.update(listed, key)
        else:
            # A queue of one is not kept: the next longer one is sorted anew.
            self.queue_order.valid = False
            queue = everyone()
        if self.limits is not None:
            self.limits.reset([self._usage(view, j) for j in view.allocations])
        self.exempt_wake = math.inf
        self._grace_ends(view, free, changes)  # preempted jobs whose grace time is over
        self.tail = None
        self._main(view, queue, free, changes, reasons)
        assert self.conf is not None
        sched = self.conf.scheduler
        if changes:
            self.dirty = True
        if sched.backfill and now >= self.next_bf and self.dirty:
            most = max(sched.params["bf_max_job_test"], 0)
            if self.limits is None and most:  # the cycle tests no more than these
                rest = list(itertools.islice((j for j in queue if j not in changes), most))
            else:
                rest = [j for j in queue if j not in changes and not self._over_limit(view, j, reasons)]
            self.dirty = self._backfill(view, rest, free, changes, reasons)
            self.next_bf = now + sched.params["bf_interval"]
        for job_id, alloc in changes.items():
            if alloc is None:  # preempted: charged and dropped by the preemption step
                continue
            spec = view.job(job_id).spec
            assert self.fairshare is not None
            self.running.add(job_id, now, self.fairshare.index[self._assoc(spec)], self.billable(spec))
            self.endings[job_id] = Ending(now + self.limit(spec), self._placement(alloc))
            priority = self.prio.pop(job_id, 0)
            self.queue_order.discard(job_id)
            self.candidates.pop(job_id, None)
            self.candidate_rows.drop(job_id)
            if self.preemption is not None:
                self.start_priority[job_id] = priority
            self.begin.pop(job_id, None)
            self.facts.pop(job_id, None)
            self.static_rows.drop(job_id)
            self.tiers.pop(job_id, None)
        if lone and fresh and fresh[0] not in changes:
            self.prio[fresh[0]] = self._priority(view, fresh[0], now)
        wake = None
        if waiting:
            self.dirty = True
            wake = min(self.begin[j] for j in waiting)
        if self.exempt_wake < math.inf:  # a preemptor waits for a job's exempt time to end
            wake = self.exempt_wake if wake is None else min(wake, self.exempt_wake)
        if count > len(changes):
            # The next priority recalculation may reorder the queue; a pending change
            # waits for the next backfill cycle.
            tick = self.last_tick + max(self.conf.priority.calc_period, 60)
            wake = tick if wake is None else min(wake, tick)
            if sched.backfill and self.dirty:
                wake = min(wake, self.next_bf)
            wake = max(wake, now + 1)
        # The jobs the main scheduler did not reach wait on "Priority" (``TailReasons``).
        told = reasons if self.tail is None else self.tail
        return Schedule(base=view.allocations, changes=changes, reasons=told, default_reason="Priority", wake_at=wake)

    def _sort_key(self, view: ClusterView):
        tiers, prio, order = self.tiers, self.prio, self.order

        def key(job_id: str) -> tuple[int, int, int]:
            tier = tiers.get(job_id)
            return (-(tier if tier is not None else self._tier(view, job_id)), -prio[job_id], order[job_id])

        return key

    def _tier(self, view: ClusterView, job_id: str) -> int:
        """The job's partition's priority tier (kept while it waits)."""
        tier = self.tiers.get(job_id)
        if tier is None:
            part = self.partition_of(view.job(job_id).spec)
            tier = self.tiers[job_id] = part.priority_tier if part is not None else 1
        return tier

    @staticmethod
    def _free(view: ClusterView) -> Free:
        f = view.free()
        return free_borrowed(f.gpus, f.cpus, f.mem)

    def _need(self, spec: JobSpec) -> Need:
        return self.shapes.of(spec)

    def _placement(self, alloc: Allocation) -> tuple[tuple[int, Need], ...]:
        return self.shapes.placement(alloc)

    def _alloc(self, placement: list[tuple[int, Need]]) -> Allocation:
        return self.shapes.alloc(placement)

    def _main(
        self, view: ClusterView, queue: list[str], free: Free, changes: dict[str, Allocation | None], reasons: dict
    ) -> None:
        assert self.conf is not None
        depth = self.conf.scheduler.params["default_queue_depth"] or len(queue)
        blocked: set[str] = set()
        every = len(self.groups)  # partitions
        released = view.free().released  # the engine's: no decision changes it
        for at, job_id in enumerate(queue[:depth]):
            if len(blocked) == every:  # every partition stopped: the rest wait on priority
                self.tail = TailReasons(reasons, queue[at:depth], "Priority", changes)
                break
            status = view.job(job_id)
            part = status.partition
            if part in blocked:
                reasons[job_id] = "Priority"
                continue
            spec = status.spec
            limit_part = self.partition_of(spec)
            if limit_part is not None and limit_part.max_time is not None and self.limit(spec) > limit_part.max_time:
                reasons[job_id] = "PartitionTimeLimit"
                continue
            if self._over_limit(view, job_id, reasons):
                continue
            groups, largest = self.typed.of(spec, self.groups[part], self.largest[part])
            # A job that was the first tested and did not fit, with nothing given back
            # since (free resources only shrank), does not fit now: the test is skipped.
            first = free.borrowed  # nothing taken or given in this decision yet
            if first and self.head_miss == (job_id, released):
                placement = None
            else:
                placement = self.fit_head(self._need(spec), groups, free, largest)
                if placement is None and first:
                    self.head_miss = (job_id, released)
            if placement is None and self.preemption is not None:
                placement = self._preempt_for(view, job_id, free, changes)
            if placement is None:
                blocked.add(part)
                reasons[job_id] = "Resources"
                continue
            free.take(placement)
            changes[job_id] = self._alloc(placement)
            if self.limits is not None:
                self.limits.add(self._usage(view, job_id), +1)


@register(
    "slurm",
    "Slurm's multifactor priority, main scheduler and backfill, from the cluster's slurm.conf (or conf=FILE).",
    SlurmParams,
)
def make_slurm(params: SlurmParams) -> SlurmPolicy:
    return SlurmPolicy(params)
