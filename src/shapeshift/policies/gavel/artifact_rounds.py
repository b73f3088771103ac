"""The round mechanism of the Sia artifact's Gavel baseline (``priority=sia-artifact``).

The Sia artifact (siasosp23/artifacts, ``sia-simulator/gavel.py``, ``GavelPolicy``) runs
Gavel's policies with round bookkeeping of its own, not Gavel's scheduler
(:mod:`.rounds`):

* the allocation ``X`` is re-solved at every round (``update_priorities`` calls
  ``compute_allocations``), with no reset interval;
* time received per job and type starts at half a round when the job is first seen and
  grows by a whole round for every round it is granted a type; per type, the sum over
  jobs (``add_jobs``, ``optimize``), never reset;
* priority on a type: ``X / (time received / the type's time)``, 0 where ``X`` is 0;
  deficits stay 0 (their update is commented out);
* one order of every (job, type) pair, by (priority, X) descending, ties in type order
  then arrival order (Python's stable sort over entries listed type by type); a job is
  granted the first pair whose type still holds its GPUs, zero-priority pairs included
  (``schedule_jobs_on_workers_helper``);
* a granted job goes on the next free GPUs of its type in node order, over several nodes
  where they are partly used (:mod:`.artifact_workers`), not consolidated.

Rounds on a fixed grid are ``rounds=grid``, which the artifact's simulator loop is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView
    from shapeshift.policies.gavel.artifact_workers import Worker
    from shapeshift.policies.gavel.table import GavelJobs


class ArtifactLedger:
    """Time received per job and type, and per type, for one partition."""

    def __init__(self, types: int, round_seconds: float):
        self._round = round_seconds
        self.job_time: dict[str, np.ndarray] = {}
        self.type_time = np.zeros(types)
        #: the GPUs (node, slot) each job got in the last round (:mod:`.artifact_workers`)
        self.workers: dict[str, tuple[Worker, ...]] = {}

    def add(self, job_ids: Sequence[str]) -> None:
        """Jobs seen for the first time start with half a round on every type."""
        for job_id in job_ids:
            if job_id not in self.job_time:
                self.job_time[job_id] = np.full(self.type_time.size, self._round / 2.0)
                self.type_time += self._round / 2.0

    def rows(
        self, view: ClusterView, partition: str, table: GavelJobs, running: list[str], ranks: Iterator[int]
    ) -> np.ndarray:
        """The partition's active rows in submission order (the artifact's job order),
        jobs first seen now added to the ledger."""
        table.gone.clear()
        table.sight(view, ranks, everyone=True)
        ids = [*running, *view.pending(partition)]
        rows = table.existing_rows(ids, len(ids))
        submit = np.array([view.job(table.ids[r]).spec.submit_time for r in rows.tolist()])  # type: ignore[arg-type]
        rows = rows[np.lexsort((table.rank[rows], submit))]
        self.add([table.ids[r] for r in rows.tolist()])  # type: ignore[misc]
        return rows

    def grant_rows(
        self, table: GavelJobs, rows: np.ndarray, x: np.ndarray, capacity: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`grants` on table rows: each row's granted type (-1: none) over the whole
        table, and the granted rows in grant order."""
        jobs: list[str] = [table.ids[r] for r in rows.tolist()]  # type: ignore[misc]
        got, order = self.grants(jobs, x, table.gpus[rows], capacity, table.speed[rows])
        granted = np.full(table.size, -1, dtype=np.int64)
        granted[rows] = got
        return granted, rows[order]

    def grants(
        self, job_ids: Sequence[str], x: np.ndarray, gpus: np.ndarray, capacity: np.ndarray, speed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The type each job (``job_ids`` in arrival order; ``x``, ``gpus`` and ``speed``
        their rows) is granted this round, -1 for none, in the artifact's one order of all
        pairs, and the granted jobs' indexes in grant order; the granted jobs are credited
        a round on their type. A type where a job has no speed is never granted to it."""
        types = self.type_time.size
        received = np.array([self.job_time[j] for j in job_ids]).reshape(len(job_ids), types)
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(self.type_time > 0, received / np.where(self.type_time > 0, self.type_time, 1.0), 0.0)
            priority = np.where(x > 0, np.where(fraction > 0, x / np.where(fraction > 0, fraction, 1.0), x * 1e9), 0.0)
        # Entries type by type, jobs in arrival order; a stable sort on (priority, X) descending.
        pk = priority.T.ravel()
        xk = x.T.ravel()
        order = np.lexsort((np.arange(pk.size), -xk, -pk))
        left = capacity.astype(np.int64).copy()
        granted = np.full(len(job_ids), -1, dtype=np.int64)
        sequence = []
        for entry in order.tolist():
            k, j = divmod(entry, len(job_ids))
            if granted[j] >= 0 or left[k] == 0 or gpus[j] > left[k] or speed[j, k] <= 0:
                continue
            granted[j] = k
            sequence.append(j)
            left[k] -= gpus[j]
        for j in np.flatnonzero(granted >= 0).tolist():
            k = int(granted[j])
            self.job_time[job_ids[j]][k] += self._round
            self.type_time[k] += self._round
        return granted, np.array(sequence, dtype=np.int64)
