"""Preemption by the backfill scheduler (``preempt/qos``).

Slurm's backfill preempts as its main scheduler does (Slurm 22.05, tag
``slurm-22-05-8-1``; the same steps in master after 25.05, commit 284c3b95):

* ``_try_sched`` (``src/plugins/sched/backfill/backfill.c``) hands the will-run test
  the job's preemptable jobs (``slurm_find_preemptable_jobs``);
* the will-run test (``_will_run_test``, ``src/plugins/select/cons_common/job_test.c``)
  first tries the free resources, then the resources with every candidate gone (a
  SUSPEND-mode one gives up its cores only, ``_build_cr_job_list``; the replay's
  held cores keep it whole): if the job fits so, its start is *now*, "for backfill
  scheduler to initiate preemption";
* a job that may start now is started with ``_start_job``: ``select_nodes`` on the
  nodes no higher job has reserved over the job's time limit (``exc_node_bitmap``), so
  ``_run_now`` chooses the jobs to preempt among them as in the main scheduler
  (``preempt.choose``) and ``_preempt_jobs`` preempts them (``node_scheduler.c``);
* Slurm's preemptor does not start in that cycle (``ESLURM_NODES_BUSY``): backfill
  reserves its nodes from now for its time limit, and the next pass starts it. The
  replay starts it at once when nothing is left to wait for, as its main scheduler does,
  and reserves its nodes from now while a preempted job runs out its grace time.

What the replay does not do: a job that fits neither now nor with every candidate gone
is planned from the running jobs' ends with the candidates still holding their
resources (Slurm's will-run test plans it with them gone), so its reservation may come
later than Slurm's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation
from shapeshift.policies.slurm.plan import Candidate, Endings, Free, Need, PreemptHook

if TYPE_CHECKING:
    from shapeshift.policies.slurm.hooks import LimitsAndPreemption


def preempt_hook(
    policy: LimitsAndPreemption,
    view: ClusterView,
    free: Free,
    changes: dict[str, Allocation | None],
    reasons: dict[str, str],
) -> PreemptHook | None:
    """The backfill cycle's preemption step for ``policy`` (``None`` without
    ``preempt/qos``): given a job that cannot start now, the nodes reserved for higher
    jobs over its time limit and the plan's ends, the nodes it starts on now (``True``)
    or waits for from now (``False``), or ``None``. Preempted jobs are preempted here:
    their resources go back to ``free`` and their ends leave (or move in) the plan."""
    rule = policy.preemption
    if rule is None:
        return None

    def hook(cand: Candidate, excluded: set[int], endings: Endings) -> tuple[list[tuple[int, Need]], bool] | None:
        if not rule.may_preempt_any(view.job(cand.job_id).spec.qos):
            return None
        if policy._over_limit(view, cand.job_id, reasons):
            return None
        placement = policy._preempt_for(view, cand.job_id, free, changes, excluded)
        for old, new in policy.victims:
            if old is not None:
                endings.remove(old)
            if new is not None:
                endings.insert(new)
        if placement is not None:
            return placement, True
        if policy.waiting_on is not None:
            return policy.waiting_on, False
        return None

    return hook
