"""QOS and association limits: which pending jobs may not start yet, and why.

Slurm enforces them (with ``AccountingStorageEnforce=limits``) when it is about to start
a job (``src/slurmctld/acct_policy.c``, master after 25.05, commit 284c3b95; the same
checks in tag ``slurm-22-05-8-1``): ``acct_policy_job_runnable_pre_select`` before it
chooses nodes (job counts), ``acct_policy_job_runnable_post_select`` after (TRES). A job
over a limit stays pending with the limit's reason (``src/common/job_state_reason.c``)
and does not stop its partition: the main scheduler and backfill go on to the next job.
Running jobs count from their start to their end, so the count grows as a pass starts
jobs. The checks, in Slurm's order:

* QOS ``GrpJobs`` (``QOSGrpJobsLimit``), ``MaxJobsPU`` (``QOSMaxJobsPerUserLimit``);
* association ``GrpJobs`` from the job's own association up to ``root``
  (``AssocGrpJobsLimit``), and ``MaxJobs`` of its own association only
  (``AssocMaxJobsLimit``; ``_acct_policy_job_runnable_pre_select``, ``parent`` false);
* QOS ``GrpTRES`` gres/gpu (``QOSGrpGRES``), ``MaxTRESPU`` gres/gpu (``QOSMaxGRESPerUser``);
* association ``GrpTRES`` gres/gpu up the tree (``AssocGrpGRES``).

Counted per QOS and user, per QOS, and per association. The submit limits
(``MaxSubmitPU``, ``GrpSubmit``, ...) refuse a submission rather than hold a job:
``submit_limits.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shapeshift.slurm.assoc import Assoc
from shapeshift.slurm.qos import Qos


@dataclass(frozen=True, slots=True)
class Usage:
    """What one job holds, for the limits: its QOS, user, association chain, GPUs."""

    qos: str
    user: str
    chain: tuple[str, ...]  # its association, then each parent up to root
    gpus: int


class Limits:
    """The limits of a QOS table and an association tree, and the running jobs' usage."""

    def __init__(self, qos: Mapping[str, Qos], tree: Mapping[str, Assoc]):
        self.qos = {k: q for k, q in qos.items() if _has_limit(q)}
        self.tree = tree
        self.assoc_limited = any(
            a.grp_gpus is not None or a.grp_jobs is not None or a.max_jobs is not None for a in tree.values()
        )
        self._jobs: dict[tuple[str, ...], int] = {}
        self._gpus: dict[tuple[str, ...], int] = {}

    @property
    def active(self) -> bool:
        return bool(self.qos) or self.assoc_limited

    def chain(self, key: str) -> tuple[str, ...]:
        """``key`` and its ancestors up to root."""
        out = []
        while key and key in self.tree and key not in out:
            out.append(key)
            key = self.tree[key].parent
        return tuple(out)

    def reset(self, running: list[Usage]) -> None:
        self._jobs.clear()
        self._gpus.clear()
        for use in running:
            self.add(use, +1)

    def _keys(self, use: Usage) -> list[tuple[str, ...]]:
        return [("q", use.qos), ("qu", use.qos, use.user), *(("a", k) for k in use.chain)]

    def add(self, use: Usage, sign: int) -> None:
        """Count a job that starts (``sign`` +1) or stops (-1)."""
        for key in self._keys(use):
            self._jobs[key] = self._jobs.get(key, 0) + sign
            self._gpus[key] = self._gpus.get(key, 0) + sign * use.gpus

    def reason(self, use: Usage) -> str:
        """Why the job may not start now ('' if it may), as ``acct_policy.c`` names it."""
        q = self.qos.get(use.qos)
        jobs, gpus = self._jobs.get, self._gpus.get
        if q is not None:
            if q.grp_jobs is not None and jobs(("q", use.qos), 0) + 1 > q.grp_jobs:
                return "QOSGrpJobsLimit"
            if q.max_jobs_per_user is not None and jobs(("qu", use.qos, use.user), 0) + 1 > q.max_jobs_per_user:
                return "QOSMaxJobsPerUserLimit"
        if self.assoc_limited:
            for level, key in enumerate(use.chain):
                a = self.tree[key]
                if a.grp_jobs is not None and jobs(("a", key), 0) + 1 > a.grp_jobs:
                    return "AssocGrpJobsLimit"
                if level == 0 and a.max_jobs is not None and jobs(("a", key), 0) + 1 > a.max_jobs:
                    return "AssocMaxJobsLimit"
        if q is not None:
            if q.grp_gpus is not None and gpus(("q", use.qos), 0) + use.gpus > q.grp_gpus:
                return "QOSGrpGRES"
            if q.max_gpus_per_user is not None and gpus(("qu", use.qos, use.user), 0) + use.gpus > q.max_gpus_per_user:
                return "QOSMaxGRESPerUser"
        if self.assoc_limited:
            for key in use.chain:
                a = self.tree[key]
                if a.grp_gpus is not None and gpus(("a", key), 0) + use.gpus > a.grp_gpus:
                    return "AssocGrpGRES"
        return ""


def _has_limit(q: Qos) -> bool:
    return any(v is not None for v in (q.grp_jobs, q.max_jobs_per_user, q.grp_gpus, q.max_gpus_per_user))
