"""The slurm policy's QOS/association limits, submit limits and ``preempt/qos`` steps, as
a mixin of ``SlurmPolicy`` (``policy.py``), which owns the state they read: the rules
themselves are ``qos_limits.py``, ``submit_limits.py`` and ``preempt.py``; this is where
the replay's bookkeeping meets them (usage counts, grace times, the requeued job's begin
time and new place, its usage charged)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapeshift.engine.contract import PreemptKind
from shapeshift.engine.state import JobState
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, JobSpec
from shapeshift.policies.slurm.plan import Ending, Free, Need
from shapeshift.policies.slurm.preempt import QosPreemption, Running, choose
from shapeshift.policies.slurm.qos_limits import Limits, Usage
from shapeshift.policies.slurm.submit_limits import SubmitLimits
from shapeshift.slurm.assoc import read_assoc

if TYPE_CHECKING:
    from shapeshift.engine.fractions import TypedGroups
    from shapeshift.policies.slurm.fairshare import FairShare
    from shapeshift.policies.slurm.fairshare import Running as Charged
    from shapeshift.slurm.conf import SlurmConf


class LimitsAndPreemption:
    conf: SlurmConf | None
    fairshare: FairShare | None
    limits: Limits | None
    preemption: QosPreemption | None
    preempted: dict[str, PreemptKind]
    preempt_log: list[PreemptKind]
    begin: dict[str, float]
    prio: dict[str, int]
    order: dict[str, int]
    #: The started jobs each calculation charges, and their planned ends (policy.py).
    running: Charged
    endings: dict[str, Ending]
    typed: TypedGroups
    start_priority: dict[str, int]
    groups: dict[str, list[list[int]]]
    largest: dict[str, int]
    last_tick: float
    #: The earliest end of an exempt time that kept a preemptor waiting (``inf``: none).
    exempt_wake: float
    #: The submit limits (``None``: none set) and the view of the last decision, whose
    #: jobs' states say which counted jobs have ended.
    submits: SubmitLimits | None = None
    last_view: ClusterView | None = None

    if TYPE_CHECKING:  # SlurmPolicy's

        def _assoc(self, spec: JobSpec) -> str: ...
        def _need(self, spec: JobSpec) -> Need: ...
        def billable(self, spec: JobSpec) -> float: ...

    def _init_hooks(self, qos: dict, assoc: str) -> None:
        limits = SubmitLimits(qos, read_assoc(assoc) if assoc else ())
        self.submits = limits if limits.active else None
        #: Preempted jobs in their grace time, with its end; preemptors that wait for
        #: them, with when their preemption began; the planned ends the last
        #: preemption step changed (old, new or ``None``: gone), for backfill's plan.
        self.graced: dict[str, float] = {}
        self.preempting: dict[str, float] = {}
        self.victims: list[tuple[Ending | None, Ending | None]] = []
        self.waiting_on: list[tuple[int, Need]] | None = None

    def _submit_refusal(self, spec: JobSpec) -> str:
        """Why a submit limit refuses ``spec`` at its arrival ('' if none does)."""
        if self.submits is None:
            return ""
        view = self.last_view

        def ended(job_id: str) -> bool:
            if view is None:  # before the first decision no job has ended
                return False
            try:
                return view.job(job_id).state not in (JobState.PENDING, JobState.RUNNING)
            except KeyError:  # asked about but never submitted (an admission check)
                return True

        return self.submits.submit(spec.job_id, spec.qos, spec.tenant or "root", spec.user or "nobody", ended)

    def _usage(self, view: ClusterView, job_id: str) -> Usage:
        assert self.limits is not None
        spec = view.job(job_id).spec
        return Usage(spec.qos, spec.user or "nobody", self.limits.chain(self._assoc(spec)), spec.num_gpus)

    def _over_limit(self, view: ClusterView, job_id: str, reasons: dict) -> bool:
        """Whether a QOS or association limit holds the job back (its reason recorded)."""
        if self.limits is None:
            return False
        why = self.limits.reason(self._usage(view, job_id))
        if why:
            reasons[job_id] = why
        return bool(why)

    def _qos_prio(self, view: ClusterView):
        def facts(job_id: str) -> tuple[str, int]:
            return view.job(job_id).spec.qos, self.prio.get(job_id, 0)

        return facts

    def preempts_as(self, job_id: str) -> PreemptKind:
        """``PolicyTraits.preempts_as``: what the replay's preemption of ``job_id`` does."""
        return self.preempted.get(job_id, PreemptKind.KEEP)

    def summary_fields(self) -> dict[str, int]:
        """``ReportsSummary``: with ``preempt/qos``, how many preemptions requeued a job and
        how many cancelled one (a cancelled job is in neither the completed nor the
        unfinished count)."""
        if self.preemption is None:
            return {}
        kinds = list(self.preempt_log)
        return {
            "slurm_preempt_requeued": kinds.count(PreemptKind.REQUEUE),
            "slurm_preempt_cancelled": kinds.count(PreemptKind.CANCEL),
        }

    def _preempt_for(
        self,
        view: ClusterView,
        job_id: str,
        free: Free,
        changes: dict[str, Allocation | None],
        excluded: set[int] | None = None,
    ) -> list[tuple[int, Need]] | None:
        """Nodes for ``job_id`` (outside ``excluded``) once the jobs ``preempt/qos``
        chooses are gone, or ``None``. Chosen jobs without a grace time are preempted now
        (their resources go back to ``free``); one with a grace time runs on until it ends
        (``_grace_ends``), and meanwhile the answer is ``None``: the job waits for it.
        ``victims`` records what each preemption did to the chosen jobs' planned ends,
        ``waiting_on`` the nodes the job waits for while its preemption completes."""
        assert self.preemption is not None and self.conf is not None
        self.victims, self.waiting_on = [], None
        status = view.job(job_id)
        part = status.partition
        running = []
        for other, alloc in view.allocations.items():
            if other in changes:
                continue
            o = view.job(other)
            running.append(
                Running(
                    other,
                    o.spec.qos,
                    self.start_priority.get(other, 0),
                    o.started_at,
                    self.order.get(other, 0),
                    tuple((n, Need(r.gpus, r.cpus, r.mem_gb)) for n, r in alloc.placement),
                )
            )
        nodes = {n for g in self.groups[part] for n in g}
        qos, prio = status.spec.qos, self.prio[job_id]
        cands = self.preemption.candidates(view.now, qos, prio, nodes, running)
        groups, largest = self.typed.of(status.spec, self.groups[part], self.largest[part])  # --gres=gpu:TYPE:N
        rule = self.preemption
        need = self._need(status.spec)
        found = choose(need, groups, largest, free, cands, excluded, rule.suspends) if cands else None
        # A job left out only for its exempt time may change the choice when it ends,
        # whether or not the job waits on a preemption meanwhile: look again then.
        self.exempt_wake = min(self.exempt_wake, rule.exempt_end(view.now, qos, prio, nodes, running))
        if found is None:
            return None
        placement, victims = found
        self.waiting_on = placement
        began = self.preempting.get(job_id)
        if began is not None and view.now < began + rule.in_progress:
            # Its preemption is still in progress: no more jobs yet (kill_pending); the
            # replay looks again when that window ends (Slurm: at its next pass).
            self.exempt_wake = min(self.exempt_wake, began + rule.in_progress)
            return None
        waiting = False
        for victim in victims:
            grace = self.preemption.grace(victim.qos)
            if grace <= 0:
                self._preempt_now(view, victim.job_id, list(victim.placement), free, changes)
                continue
            waiting = True
            if victim.job_id in self.graced:  # already signalled: it runs out its grace
                continue
            end = view.now + grace
            self.graced[victim.job_id] = end
            old = self.endings.get(victim.job_id)
            if old is not None and old.end > end:
                self.endings[victim.job_id] = moved = Ending(end, old.placement)
                self.victims.append((old, moved))
        if not waiting:
            self.preempting.pop(job_id, None)
            self.waiting_on = None
        else:
            self.preempting[job_id] = view.now
            self.exempt_wake = min(self.exempt_wake, min(self.graced.values()))
            return None
        return placement

    def _preempt_now(
        self, view: ClusterView, job_id: str, placement: list[tuple[int, Need]], free: Free, changes: dict
    ) -> None:
        """Preempt ``job_id`` now: stopped, its resources back in ``free``, its run charged."""
        assert self.preemption is not None
        kind = self.preemption.kind(view.job(job_id).spec.qos)
        self.preempted[job_id] = kind
        self.preempt_log.append(kind)
        changes[job_id] = None
        free.give(placement)
        self.victims.append((self.endings.get(job_id), None))
        self._charge_run(view, job_id)
        if self.limits is not None:
            self.limits.add(self._usage(view, job_id), -1)
        if kind is PreemptKind.REQUEUE:
            self.begin[job_id] = view.now + self.preemption.requeue_delay
            self.prio.pop(job_id, None)
            # decide() gives it a new place among equals (a new submit time), as a new job.

    def _grace_ends(self, view: ClusterView, free: Free, changes: dict[str, Allocation | None]) -> None:
        """Preempt the jobs whose grace time is over (``job_time_limit``); forget those
        that ended on their own; wake the replay at the next grace end."""
        if not self.graced:
            return
        self.victims = []
        for job_id, end in list(self.graced.items()):
            alloc = view.allocations.get(job_id)
            if alloc is None or end <= view.now:
                del self.graced[job_id]
                if alloc is not None:
                    placement = [(n, Need(r.gpus, r.cpus, r.mem_gb)) for n, r in alloc.placement]
                    self._preempt_now(view, job_id, placement, free, changes)
            else:
                self.exempt_wake = min(self.exempt_wake, end)
        if not self.graced:
            self.preempting.clear()

    def _charge_run(self, view: ClusterView, job_id: str) -> None:
        """Charge a preempted run's usage as a completed one's is charged at the next
        calculation (``_ticks``), now, so that the job's next run starts afresh."""
        assert self.fairshare is not None and self.conf is not None
        self.endings.pop(job_id, None)
        start = self.running.drop(job_id)
        if start is None:
            return
        begin = max(start, self.last_tick)
        delta = view.now - begin
        if delta <= 0:
            return
        spec = view.job(job_id).spec
        period = max(self.conf.priority.calc_period, 60)
        d = self.fairshare.decay
        # The next calculation decays all usage by d**period before charging ended runs.
        amount = delta * d**delta * self.billable(spec) / d**period
        self.fairshare.add_usage(self._assoc(spec), amount)
