"""Preemption by QOS (``PreemptType=preempt/qos``) with ``PreemptMode`` REQUEUE, CANCEL or SUSPEND.

Follows Slurm master after 25.05 (commit 284c3b95; the same rules in tag
``slurm-22-05-8-1`` except where noted), https://slurm.schedmd.com/preempt.html and
slurm.conf(5) ``PreemptMode``:

* who may preempt whom (``src/plugins/preempt/qos/preempt_qos.c``,
  ``preempt_p_preemptable``): the preemptor's QOS lists the preemptee's in ``Preempt``;
  within one QOS only with the ``WITHIN`` flag, and then, as with ``PRIORITY``, only a
  job of higher priority;
* the candidates (``src/interfaces/preempt.c``, ``slurm_find_preemptable_jobs``):
  running jobs on the preemptor's partition's nodes that are not exempt: a job is
  exempt while it has run less than its QOS's ``PreemptExemptTime``, else the
  slurm.conf one (``acct_policy.c``, ``acct_policy_get_preemptable_time``); sorted by
  ``QOS priority << 16 + nodes`` ascending (``preempt_p_get_prio``; ties keep
  submission order, where Slurm's ``qsort`` leaves them unspecified), or youngest first
  with ``PreemptParameters=youngest_first``;
* which are preempted (``src/plugins/select/cons_tres/job_test.c``, ``_run_now``):
  candidates are taken off one by one in that order until the job fits; with more
  candidates than passes, the list is reordered (the last one taken first, then the
  others by how many of the chosen nodes they hold) and tried again, three passes in
  all with the default ``reorder_count=1``; the preempted jobs are those of the last
  pass that hold one of the chosen nodes;
* what happens to them (``slurm_job_preempt``, ``job_mgr.c``): CANCEL ends the job;
  REQUEUE puts it back in the queue from the start of its work, with a new submit time
  (its age and its place among equals start again) and a begin time ``cred_expire + 1``
  seconds later (``AuthInfo=cred_expire``, default 120; ``batch_requeue_fini``; master
  also reads ``SchedulerParameters=requeue_delay``, not read here);
* a QOS ``GraceTime`` (``preempt_qos.c``, ``_get_grace_time``: the preemptee's QOS's):
  the job is sent SIGTERM and runs on until ``GraceTime`` seconds after (its end time
  becomes the earlier of its own and that, ``_job_check_grace_internal``); then
  ``job_time_limit`` (``job_mgr.c``) preempts it as above. Its resources stay held
  until then, so the preemptor waits. While a preemption it began is younger than
  ``KillWait + MessageTimeout`` (slurm.conf; defaults 30 + 10 s), the preemptor
  preempts no more jobs (``select_nodes``, ``kill_pending``, ``node_scheduler.c``);
* the mode of a job is its QOS's ``PreemptMode``, else the cluster's (``preempt_p_get_mode``).

In the main scheduler a preemptor sorts before any job it may preempt
(``sort_job_queue2``); backfill preempts too (``backfill_preempt.py``). Slurm starts the
preemptor at its next pass, once the preempted jobs' nodes are released; the replay has
no completing state and starts it at once (after a grace time: when it ends).

SUSPEND (slurm.conf ``PreemptMode=SUSPEND,GANG``, or a QOS's ``PreemptMode=suspend``):
a suspended job gives up its CPU cores only and keeps its memory and GRES
(``cons_common/job_test.c`` ``_build_cr_job_list`` removes a SUSPEND-mode preemptee with
``JOB_RES_ACTION_RESUME``: cores only, ``job_resources.c``; slurm.conf(5)
``PreemptMode``: "Suspended jobs will not release GRES. Higher priority jobs will not
be able to preempt to gain access to GRES"). In 22.05's ``_run_now``:

* when the first candidate's mode is SUSPEND, the job is tried once more on the
  partition's extra row of cores (``qos_preemptor``), and no REQUEUE or CANCEL
  candidate is tried at all. The extra row is used only where the job may share cores
  (``_get_job_node_req``: a partition with ``OverSubscribe=FORCE``, or ``YES`` and a
  job asking to share); with the default ``OverSubscribe=NO`` that test is the plain
  one again, so the job waits and nothing is suspended;
* otherwise SUSPEND-mode candidates are skipped ("can't remove job"): only the REQUEUE
  and CANCEL ones are taken off and preempted.

So a GPU job whose GPUs a SUSPEND-mode job holds waits for that job's end, and so does
one whose cores it holds, as the real 22.05 did (docs/slurm.md). The replay does not
read ``OverSubscribe`` (cores are never shared); in a partition that shares them, Slurm
would start such a preemptor on shared cores (its GPUs and memory free) and the gang
scheduler would time-slice it with the jobs there (``gang.c``, ``SchedulerTimeSlice``),
which the engine, without a suspended state or time slices, cannot replay.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from shapeshift.engine.contract import PreemptKind
from shapeshift.policies.slurm.plan import Free, Need, fit
from shapeshift.slurm.conf import SlurmConf
from shapeshift.slurm.qos import Qos

#: ``PreemptParameters=reorder_count`` default (``preempt_reorder_cnt``).
REORDER_COUNT = 1
#: ``AuthInfo=cred_expire`` default (``DEFAULT_EXPIRATION_WINDOW``).
CRED_EXPIRE = 120


@dataclass(frozen=True, slots=True)
class Running:
    """A running job as preemption sees it."""

    job_id: str
    qos: str
    priority: int
    start: float
    order: int  # submission order, for ties
    placement: tuple[tuple[int, Need], ...]


class QosPreemption:
    """``preempt/qos`` for one configuration and QOS table."""

    def __init__(self, conf: SlurmConf, qos: Mapping[str, Qos], youngest_first: bool = False):
        self.qos = qos
        self.cluster_mode = conf.preempt_mode
        self.cluster_flags = conf.preempt_flags
        self.exempt = conf.preempt_exempt_time
        self.requeue_delay = conf.cred_expire + 1
        self.youngest_first = youngest_first
        #: How long a preemptor's preemption counts as in progress (``kill_pending``).
        self.in_progress = conf.kill_wait + conf.msg_timeout

    def grace(self, qos: str) -> int:
        """The preemptee's grace time in seconds (``_get_grace_time``: its QOS's ``GraceTime``)."""
        q = self.qos.get(qos)
        return q.grace_time if q is not None else 0

    def may_preempt_any(self, qos: str) -> bool:
        """Whether a job of ``qos`` may preempt any job at all (a quick test before a search)."""
        q = self.qos.get(qos)
        return q is not None and (bool(q.preempt) or self._flag(q, "within"))

    def mode(self, qos: str) -> str:
        """The job's preemption mode (``preempt_p_get_mode``): its QOS's, else the cluster's."""
        q = self.qos.get(qos)
        own = q.preempt_mode if q is not None else "cluster"
        return self.cluster_mode if own in ("cluster", "off") else own

    def suspends(self, job: Running) -> bool:
        """Whether ``job``'s preemption mode is SUSPEND (it keeps its GPUs and memory)."""
        return self.mode(job.qos) == "suspend"

    def kind(self, qos: str) -> PreemptKind:
        return PreemptKind.CANCEL if self.mode(qos) == "cancel" else PreemptKind.REQUEUE

    def _flag(self, q: Qos, flag: str) -> bool:
        return flag in q.preempt_flags or flag in self.cluster_flags

    def may_preempt(self, qos_or: str, prio_or: int, qos_ee: str, prio_ee: int) -> bool:
        """``preempt_p_preemptable``."""
        q_or, q_ee = self.qos.get(qos_or), self.qos.get(qos_ee)
        if q_or is None or q_ee is None:
            return False
        if q_or.name == q_ee.name:
            return self._flag(q_or, "within") and prio_or > prio_ee
        if q_ee.name not in q_or.preempt:
            return False
        if self._flag(q_or, "priority"):
            return prio_or > prio_ee
        return True

    def exempt_until(self, job: Running) -> float:
        """``acct_policy_get_preemptable_time``: the QOS's exempt time, else the cluster's."""
        q = self.qos.get(job.qos)
        if q is not None and q.preempt_exempt_time is not None:
            return job.start + q.preempt_exempt_time
        return job.start + (self.exempt or 0)

    def candidates(self, now: float, qos: str, priority: int, nodes: set[int], running: list[Running]) -> list[Running]:
        """``slurm_find_preemptable_jobs``: the jobs ``qos``/``priority`` may preempt on
        ``nodes``, in the order they are tried."""
        found = [
            r
            for r in running
            if self.may_preempt(qos, priority, r.qos, r.priority)
            and now >= self.exempt_until(r)
            and any(n in nodes for n, _ in r.placement)
        ]
        if self.youngest_first:
            return sorted(found, key=lambda r: (-r.start, r.order))
        return sorted(found, key=lambda r: (self._prio(r), r.order))

    def exempt_end(self, now: float, qos: str, priority: int, nodes: set[int], running: list[Running]) -> float:
        """When the first job ``candidates`` leaves out only for its exempt time stops
        being exempt (``inf``: none), so the replay looks again then."""
        return min(
            (
                self.exempt_until(r)
                for r in running
                if now < self.exempt_until(r)
                and self.may_preempt(qos, priority, r.qos, r.priority)
                and any(n in nodes for n, _ in r.placement)
            ),
            default=float("inf"),
        )

    def _prio(self, job: Running) -> int:
        q = self.qos.get(job.qos)
        qp = min(q.priority, 0xFFFF) if q is not None else 0
        return (qp << 16) + min(len(job.placement), 0xFFFF)

    def queue_cmp(self, first: tuple[str, int], second: tuple[str, int]) -> int:
        """``sort_job_queue2``'s first test: -1 when ``first`` may preempt ``second``, 1
        the other way round, 0 when neither (then the usual order decides)."""
        if self.may_preempt(first[0], first[1], second[0], second[1]):
            return -1
        if self.may_preempt(second[0], second[1], first[0], first[1]):
            return 1
        return 0


def choose(
    need: Need,
    groups: list[list[int]],
    largest: int,
    free: Free,
    candidates: list[Running],
    excluded: set[int] | None = None,
    suspends: Callable[[Running], bool] | None = None,
) -> tuple[list[tuple[int, Need]], list[Running]] | None:
    """Nodes for ``need`` outside ``excluded`` and the jobs to preempt for them
    (``_run_now``), or ``None`` when even all candidates gone leave no room. ``free`` is
    not changed. A candidate ``suspends`` says is SUSPEND-mode keeps its resources: with
    one first in the order nothing is tried (the extra-row test, which the replay's held
    cores fail as the plain fit did); elsewhere it is skipped."""
    order = list(candidates)
    keeps = suspends or (lambda _: False)
    if order and keeps(order[0]):
        return None
    passes = 0
    while True:
        future = free.copy()
        for i, cand in enumerate(order):
            if keeps(cand):
                continue  # "can't remove job"
            future.give(list(cand.placement))
            placement = fit(need, groups, future, largest, excluded)
            if placement is None:
                continue
            chosen = {n for n, _ in placement}
            tried = order[: i + 1]
            done = passes > REORDER_COUNT or len(order) <= passes + 1
            passes += 1
            if done:
                return placement, [c for c in tried if not keeps(c) and any(n in chosen for n, _ in c.placement)]
            held = {c.job_id: sum(1 for n, _ in c.placement if n in chosen) for c in tried[:-1]}
            last = tried[-1]
            order = [last, *sorted((c for c in order if c is not last), key=lambda c: -held.get(c.job_id, 0))]
            break
        else:
            return None


def sort_queue(
    ids: list[str], usual: Callable[[str], tuple], facts: Callable[[str], tuple[str, int]], rule: QosPreemption
) -> list[str]:
    """The main scheduler's queue order: a preemptor before what it may preempt, then ``usual``."""

    def cmp(a: str, b: str) -> int:
        first = rule.queue_cmp(facts(a), facts(b))
        if first:
            return first
        ka, kb = usual(a), usual(b)
        return -1 if ka < kb else (1 if ka > kb else 0)

    return sorted(ids, key=functools.cmp_to_key(cmp))
