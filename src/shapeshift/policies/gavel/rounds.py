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

from shapeshift.policies.gavel.lp import type_speed
from shapeshift.policies.gavel.table import GavelJobs, add_in_order

#: Gavel visits GPU types in this fixed order (``_schedule_jobs_on_workers``).
_GAVEL_TYPE_ORDER = ("V100", "P100", "K80")


def fastest_first(names: Sequence[str]) -> list[int]:
    """Type indexes in Gavel's order: V100, P100, K80, then other types by the catalog's
    mean speed, fastest first (our extension: Gavel knows only these three)."""

    def key(k: int) -> tuple[int, float, str]:
        name = names[k]
        if name.upper() in _GAVEL_TYPE_ORDER:
            return (_GAVEL_TYPE_ORDER.index(name.upper()), 0.0, name)
        return (len(_GAVEL_TYPE_ORDER), -type_speed("", name), name)

    return sorted(range(len(names)), key=key)


#: Gavel's ``minimum_time_between_allocation_resets`` default (``scheduler.py``).
GAVEL_RESET_INTERVAL = 1920.0


class GavelLedger:
    """Time received, deficits and the last allocation of one partition's jobs; the
    per-job figures are columns of the partition's ``GavelJobs``."""

    def __init__(self, jobs: GavelJobs, types: int, round_seconds: float, reset_interval: float):
        self._jobs = jobs
        self._half = round_seconds / 2.0
        self._interval = reset_interval
        self.type_time = np.zeros(types)
        self.last_reset = 0.0
        self._changed = False
        #: jobs in the ledger
        self.count = 0

    def sync(self, fresh: Sequence[str]) -> None:
        """Drop the jobs gone since the last sync and add ``fresh`` (seen for the first
        time, in arrival order): Gavel's ``_remove_job`` and ``add_job``; either marks the
        allocation for recomputation."""
        jobs = self._jobs
        for job_id in jobs.gone:
            self._drop(job_id)
        jobs.gone.clear()
        for job_id in fresh:
            row = jobs.row[job_id]
            if not jobs.in_ledger[row]:
                jobs.in_ledger[row] = True
                jobs.job_time[row] = self._half
                jobs.deficit[row] = 0.0
                self.count += 1
                self._changed = True

    def keep_only(self, active: set[str]) -> None:
        """Drop every job not in ``active`` (a full pass, for when a job left unseen)."""
        for row in self.rows().tolist():
            job_id = self._jobs.ids[row]
            if job_id not in active:
                self._drop(job_id)  # type: ignore[arg-type]

    def _drop(self, job_id: str) -> None:
        jobs = self._jobs
        row = jobs.row.get(job_id)
        if row is not None and jobs.in_ledger[row]:
            jobs.in_ledger[row] = False
            self.count -= 1
            self._changed = True

    def rows(self) -> np.ndarray:
        """The ledger's rows in arrival order."""
        jobs = self._jobs
        rows = np.flatnonzero(jobs.in_ledger[: jobs.size])
        return rows[np.argsort(jobs.rank[rows], kind="stable")]

    def maybe_reset(self, now: float, rows: np.ndarray, solve: Callable[[np.ndarray], np.ndarray]) -> bool:
        """Reset the time received and recompute ``X`` if due; True when it did.
        ``rows``: the ledger's rows in arrival order, which ``solve`` takes."""
        due = now - self.last_reset >= self._interval or self.last_reset == 0.0
        if not (self._changed and due):
            return False
        jobs = self._jobs
        elapsed = now - self.last_reset
        should = jobs.alloc[rows] * elapsed  # 0 for jobs without a share, as Gavel's
        jobs.deficit[rows] += should - (jobs.job_time[rows] - self._half)
        jobs.job_time[rows] = self._half
        self.type_time[:] = add_in_order(0.0, np.full(rows.size, self._half))
        self.last_reset = now
        x = solve(rows)
        jobs.alloc[: jobs.size] = 0.0
        jobs.alloc[rows] = x
        self._changed = False
        return True

    def grant_order(self, rows: np.ndarray, type_order: Sequence[int]) -> list[tuple[int, np.ndarray]]:
        """Per GPU type, fastest first, the rows of the jobs that can run on it in Gavel's
        grant order; ``rows`` in arrival order. The priorities of all jobs on a type are
        one array expression (the same operations as job by job), and the sort is a stable
        lexsort: (priority, deficit, X) descending, ties in arrival order."""
        jobs = self._jobs
        if rows.size == 0:
            return []
        x = jobs.alloc[rows]
        received = jobs.job_time[rows]
        deficit = jobs.deficit[rows]
        speed = jobs.speed[rows]
        arrival = np.arange(rows.size)
        orders: list[tuple[int, np.ndarray]] = []
        for k in type_order:
            share = x[:, k]
            used = self.type_time[k]
            priority = share / (received[:, k] / used) if used > 0 else share * 1e9
            priority = np.where((share == 0.0) | (speed[:, k] <= 0), 0.0, priority)
            order = np.lexsort((arrival, -share, -deficit[:, k], -priority))
            orders.append((k, rows[order[speed[order, k] > 0]]))
        return orders


def grant_greedily(
    orders: list[tuple[int, np.ndarray]], gpus: np.ndarray, left: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Gavel's grant walk: type by type, each job in order is granted the type if its GPUs
    still fit there and it was granted no type before. Returns each row's granted type
    (-1: none) and the granted rows in grant order.

    Equivalent to the job-by-job walk, in array steps: of the jobs that still fit, the
    longest prefix whose GPUs add up within what is left is granted at once; the job after
    it does not fit and is skipped, and so is every later job wider than what is then
    left (what is left never grows)."""
    granted = np.full(size, -1, dtype=np.int64)
    sequence: list[np.ndarray] = []
    for k, order in orders:
        room = int(left[k])
        if order.size <= 32:  # a short walk job by job costs less than the array steps
            taken = []
            for row in order.tolist():
                if granted[row] < 0 and gpus[row] <= room:
                    granted[row] = k
                    taken.append(row)
                    room -= int(gpus[row])
            sequence.append(np.array(taken, dtype=np.int64))
            left[k] = room
            continue
        candidates = order[granted[order] < 0]
        widths = gpus[candidates]
        while candidates.size:
            fits = widths <= room
            candidates, widths = candidates[fits], widths[fits]
            if candidates.size == 0:
                break
            total = np.cumsum(widths)
            n = int(np.searchsorted(total, room, side="right"))
            if n:
                granted[candidates[:n]] = k
                sequence.append(candidates[:n])
                room -= int(total[n - 1])
            candidates, widths = candidates[n + 1 :], widths[n + 1 :]
        left[k] = room
    order = np.concatenate(sequence) if sequence else np.zeros(0, dtype=np.int64)
    return granted, order
