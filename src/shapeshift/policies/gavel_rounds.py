"""Gavel's round mechanism: which jobs run on which GPU type in the next round.

Gavel's simulator (stanford-futuredata/gavel ``scheduler/scheduler.py``) turns the
policy's time fractions ``X[j, k]`` into placements round by round with bookkeeping this
module reproduces, per partition:

* **Allocation resets** (``_update_priorities``, ``_reset_time_run_so_far``): ``X`` is
  recomputed only when the set of active jobs changed since the last computation *and*
  ``reset_interval`` seconds (its ``minimum_time_between_allocation_resets``, 1,920 s)
  have passed since the last reset, or no reset has happened yet (Gavel tests
  ``last_reset_time == 0``, so a reset at time 0 counts as none). Between resets a new
  job has no allocation: priority 0 everywhere, so it only gets GPUs nobody with a share
  takes.
* **Time received** (``_job_time_so_far``, ``_worker_time_so_far``): per job and type, the
  seconds it ran on that type since the last reset, starting at half a round (Gavel's
  ``time_per_iteration / 2``); per type, the sum over jobs (each job counted once, not
  per GPU), starting at half a round per job active at the reset.
* **Priorities**: ``X[j, k] / (time_j,k / time_k)``; ``X * 1e9`` while the type has no
  time yet; 0 where ``X`` is 0, the job cannot run on the type, or it has no allocation.
* **Deficits**: at every reset each job's deficit on a type grows by
  ``X[j, k] * (time since the last reset) - (time received - half a round)``; they only
  break ties.
* **Grant order** (``_schedule_jobs_on_workers_helper``): types one after another, fastest
  first (Gavel's fixed V100, P100, K80; other types after them, by the catalog's mean
  speed), each type's jobs by (priority, deficit, X) descending, ties in arrival order; a
  job is granted the first type where its GPUs still fit, at most one type per round.
  Jobs with priority 0 are still granted GPUs left over on a type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

#: Gavel's ``minimum_time_between_allocation_resets`` default (``scheduler.py``).
GAVEL_RESET_INTERVAL = 1920.0


class GavelLedger:
    """Time received, deficits and the last allocation of one partition's jobs."""

    def __init__(self, types: int, round_seconds: float, reset_interval: float):
        self._half = round_seconds / 2.0
        self._interval = reset_interval
        self.job_time: dict[str, np.ndarray] = {}
        self.type_time = np.zeros(types)
        self.deficit: dict[str, np.ndarray] = {}
        self.allocation: dict[str, np.ndarray] = {}
        self.last_reset = 0.0
        self._changed = False

    def sync(self, active: Sequence[str]) -> None:
        """Add jobs seen for the first time and drop finished ones (Gavel's ``add_job`` and
        ``_remove_job``: either marks the allocation for recomputation)."""
        alive = set(active)
        for job_id in [j for j in self.job_time if j not in alive]:
            del self.job_time[job_id], self.deficit[job_id]
            self._changed = True
        for job_id in active:
            if job_id not in self.job_time:
                self.job_time[job_id] = np.full(self.type_time.size, self._half)
                self.deficit[job_id] = np.zeros(self.type_time.size)
                self._changed = True

    def credit(self, job_id: str, k: int, seconds: float) -> None:
        """``job_id`` ran ``seconds`` on type ``k`` (Gavel's micro-task completion)."""
        if job_id in self.job_time:
            self.job_time[job_id][k] += seconds
        self.type_time[k] += seconds

    def maybe_reset(self, now: float, solve: Callable[[list[str]], np.ndarray]) -> bool:
        """Reset the time received and recompute ``X`` if due; True when it did."""
        due = now - self.last_reset >= self._interval or self.last_reset == 0.0
        if not (self._changed and due):
            return False
        elapsed = now - self.last_reset
        self.type_time[:] = 0.0
        for job_id, got in self.job_time.items():
            should = self.allocation[job_id] * elapsed if job_id in self.allocation else 0.0
            self.deficit[job_id] += should - (got - self._half)
            got[:] = self._half
            self.type_time += self._half
        self.last_reset = now
        jobs = list(self.job_time)
        x = solve(jobs)
        self.allocation = {job_id: x[i] for i, job_id in enumerate(jobs)}
        self._changed = False
        return True

    def grant_order(self, jobs: Sequence[str], speed: np.ndarray, type_order: Sequence[int]) -> list[tuple[str, int]]:
        """(job, type) pairs in Gavel's grant order; ``jobs`` in arrival order, ``speed``
        (jobs x types) 0 where a job cannot run. The priorities of all jobs on a type are
        one array expression (the same operations as job by job), and the sort is a stable
        lexsort: (priority, deficit, X) descending, ties in arrival order."""
        n, types = len(jobs), self.type_time.size
        if n == 0:
            return []
        none = np.zeros(types)
        x = np.array([self.allocation.get(j, none) for j in jobs], dtype=float).reshape(n, types)
        received = np.array([self.job_time[j] for j in jobs], dtype=float).reshape(n, types)
        deficit = np.array([self.deficit[j] for j in jobs], dtype=float).reshape(n, types)
        arrival = np.arange(n)
        pairs: list[tuple[str, int]] = []
        for k in type_order:
            share = x[:, k]
            used = self.type_time[k]
            priority = share / (received[:, k] / used) if used > 0 else share * 1e9
            priority = np.where((share == 0.0) | (speed[:, k] <= 0), 0.0, priority)
            order = np.lexsort((arrival, -share, -deficit[:, k], -priority))
            pairs.extend((jobs[i], k) for i in order[speed[order, k] > 0].tolist())
        return pairs
