"""Submit limits: a job over one is refused at submission, never queued.

slurmctld checks them when a job is submitted (``src/slurmctld/job_mgr.c``,
``_job_create``: with ``AccountingStorageEnforce=limits``, ``acct_policy_validate``
failing is ``ESLURM_ACCOUNTING_POLICY``, "Job violates accounting/QOS policy (job submit
limit, ...)", and no job is created). A job counts from its submission until it ends,
completed or cancelled (``acct_policy_add_job_submit`` at submission,
``acct_policy_remove_job_submit`` in ``job_completion_logger``); a requeued job is
removed and added again, so it goes on counting. The checks of
``src/slurmctld/acct_policy.c`` (``_acct_policy_validate``, tag ``slurm-22-05-8-1``;
the same in master after 25.05, commit 284c3b95), in its order, with the reason each
gives (``src/common/slurm_protocol_defs.c``, ``job_reason_string``):

* QOS ``GrpSubmit`` (``QOSGrpSubmitJobsLimit``), ``MaxSubmitPA`` per account
  (``MaxSubmitJobsPerAccount``), ``MaxSubmitPU`` per user (``QOSMaxSubmitJobPerUserLimit``),
  counted over the QOS (``_qos_policy_validate``);
* association ``GrpSubmit`` from the job's own association up to ``root``
  (``AssocGrpSubmitJobsLimit``), each counting the jobs of everything under it, unless
  the QOS sets ``GrpSubmit`` (the QOS limit then stands for it);
* ``MaxSubmit`` of the job's own association only (``AssocMaxSubmitJobLimit``; parents'
  limits are pre-propagated to it), unless the QOS sets ``MaxSubmitPU`` or
  ``MaxSubmitPA``.

The replay refuses such a job at its arrival through ``PolicyTraits.refuses``: it ends
``rejected`` with the reason, counted in the summary's ``jobs_rejected`` and listed in
``rejected.csv``, as ``sbatch`` would have printed the error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from shapeshift.slurm.assoc import Assoc, assoc_key, complete_tree
from shapeshift.slurm.qos import Qos

#: Says whether a job counted so far has ended (completed, cancelled, ...).
Ended = Callable[[str], bool]


class SubmitLimits:
    """The submit limits of a QOS table and an association dump, and the jobs they count."""

    def __init__(self, qos: Mapping[str, Qos], assocs: Iterable[Assoc]):
        self.qos = qos
        self.tree = complete_tree(assocs, ())
        self.active = any(
            v is not None for q in qos.values() for v in (q.grp_submit, q.max_submit_per_account, q.max_submit_per_user)
        ) or any(a.grp_submit is not None or a.max_submit is not None for a in self.tree.values())
        #: The jobs each limit counts, by the limit's key (ordered sets).
        self._held: dict[tuple[str, ...], dict[str, None]] = {}

    def chain(self, account: str, user: str) -> tuple[str, ...]:
        """The job's association and its ancestors up to root, those the dump has (one it
        lacks has no limit; its account's association, else root, is the next)."""
        key = assoc_key(account, user) if user else account
        if key not in self.tree:
            key = account if account in self.tree else "root"
        out: list[str] = []
        while key and key in self.tree and key not in out:
            out.append(key)
            key = self.tree[key].parent
        return tuple(out)

    def submit(self, job_id: str, qos: str, account: str, user: str, ended: Ended) -> str:
        """Why the job is refused ('' if it is not; then it is counted from now on)."""
        chain = self.chain(account, user)
        checks: list[tuple[tuple[str, ...], int | None, str]] = []
        q = self.qos.get(qos)
        if q is not None:
            checks += [
                (("q", qos), q.grp_submit, "QOSGrpSubmitJobsLimit"),
                (("qa", qos, account), q.max_submit_per_account, "MaxSubmitJobsPerAccount"),
                (("qu", qos, user), q.max_submit_per_user, "QOSMaxSubmitJobPerUserLimit"),
            ]
        qos_grp = q is not None and q.grp_submit is not None
        qos_max = q is not None and (q.max_submit_per_user is not None or q.max_submit_per_account is not None)
        for level, key in enumerate(chain):
            a = self.tree[key]
            checks.append((("a", key), None if qos_grp else a.grp_submit, "AssocGrpSubmitJobsLimit"))
            if level == 0:
                checks.append((("a", key), None if qos_max else a.max_submit, "AssocMaxSubmitJobLimit"))
        limited = [(key, limit, reason) for key, limit, reason in checks if limit is not None]
        for key, limit, reason in limited:
            if self._count(key, limit, ended) + 1 > limit:
                return reason
        for key, _, _ in limited:
            self._held.setdefault(key, {})[job_id] = None
        return ""

    def _count(self, key: tuple[str, ...], limit: int, ended: Ended) -> int:
        """The jobs ``key`` counts; those that ended are dropped only when the count
        reaches ``limit`` (the answer is the same, and most submissions skip the scan)."""
        held = self._held.get(key)
        if not held or len(held) < limit:
            return len(held) if held else 0
        for j in [j for j in held if ended(j)]:
            del held[j]
        return len(held)
