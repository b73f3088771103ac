"""The running jobs of one partition as numpy columns, kept up to date by what changed.

SRTF ranks every running job at every decision that has a waiting job to place. Reading
each running job's progress fields off its status object costs O(running jobs) Python
steps per decision; on a 1,200-GPU cluster under a long queue that was most of the
simulation. A running job's progress follows a closed form between changes (done, rate,
pause, last update), and the engine lists every job whose progress state changed since
the previous decision (``ClusterView.touched``). So the table keeps one entry per running
job and rewrites only the touched ones; a decision then ranks the columns in a few array
operations.

Entries hold the values as they are on the status objects, never derived ones, so the keys
computed from them are bit for bit those the per-job path computes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from shapeshift.engine.state import JobState, JobStatus

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

#: Column order of a row.
ESTIMATE, SUBMIT, GPUS, DONE, LAST, STALL, RATE, TOTAL, STARTED = range(9)
WIDTH = 9

#: (status, estimate, submit time, GPUs) of a job, as ``ShortestRemainingFirst`` caches it.
Facts = tuple[JobStatus, float, float, int]


def progress_row(facts: Facts) -> tuple[float, ...]:
    """A row's ``WIDTH`` values: the facts and the status's progress fields."""
    status, estimate, submit, gpus = facts
    return (
        estimate,
        submit,
        gpus,
        status.work_done,
        status.last_update,
        status.stall_until,
        status.rate,
        status.work_total,
        status.started_at,
    )


class RunningTable:
    """One partition's running jobs: ``ids[i]`` is the job of row ``i`` of ``columns``."""

    __slots__ = ("_data", "_row", "_row_of", "hint", "ids")

    def __init__(self, row: Callable[[Facts], tuple[float, ...]] = progress_row, width: int = WIDTH) -> None:
        self.ids: list[str] = []
        self._row_of: dict[str, int] = {}
        #: ``width`` values per job, the first ``WIDTH`` as ``progress_row`` gives them
        #: (a policy may add its own after them).
        self._row = row
        #: One column per fact (``width`` rows of the array), one job per column index:
        #: each fact is contiguous for the ranking's array operations.
        self._data = np.empty((width, 16))
        #: Rows in the order the last ranking put them, kept through drops; rows added
        #: since are not in it. Running jobs mostly keep their order from one decision to
        #: the next, so sorting from this order is nearly a pass (``RunningRanking.of``).
        self.hint: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._row_of

    @property
    def columns(self) -> np.ndarray:
        """The facts of the running jobs: ``columns[ESTIMATE][i]`` is job ``ids[i]``'s (read-only)."""
        return self._data[:, : len(self.ids)]

    def put(self, job_id: str, facts: Facts) -> None:
        """Add the running job, or rewrite its row from its status."""
        row = self._row_of.get(job_id)
        if row is None:
            row = len(self.ids)
            if row == self._data.shape[1]:
                self._data = np.concatenate([self._data, np.empty_like(self._data)], axis=1)
            self._row_of[job_id] = row
            self.ids.append(job_id)
        self._data[:, row] = self._row(facts)

    def write(self, job_id: str, column: int, value: float) -> None:
        """Set one value of the job's row (a column a policy added after ``WIDTH``)."""
        self._data[column, self._row_of[job_id]] = value

    def drop(self, job_id: str) -> None:
        """Remove the job if it is in the table; the last row moves into its place."""
        row = self._row_of.pop(job_id, None)
        if row is None:
            return
        last = len(self.ids) - 1
        if self.hint is not None:
            hint = self.hint[self.hint != row]
            hint[hint == last] = row
            self.hint = hint
        moved = self.ids.pop()
        if row != last:
            self._data[:, row] = self._data[:, last]
            self.ids[row] = moved
            self._row_of[moved] = row


class RunningTables:
    """A ``RunningTable`` per partition, built on first use and then kept by ``touched``."""

    __slots__ = ("_facts", "_row", "_tables", "_width")

    def __init__(
        self,
        facts: Callable[[ClusterView, str], Facts],
        row: Callable[[Facts], tuple[float, ...]] = progress_row,
        width: int = WIDTH,
    ):
        self._facts = facts
        self._row, self._width = row, width
        self._tables: dict[str, RunningTable] = {}

    def sync(self, view: ClusterView) -> None:
        """Apply what changed since the previous decision (call once per decision)."""
        tables = self._tables
        if not tables:
            return
        for job_id in view.touched:
            status = view.job(job_id)
            table = tables.get(status.partition)
            if table is None:
                continue
            if status.state is JobState.RUNNING:
                table.put(job_id, self._facts(view, job_id))
            else:
                table.drop(job_id)

    def of(self, view: ClusterView, partition: str) -> RunningTable:
        table = self._tables.get(partition)
        if table is None:
            table = RunningTable(self._row, self._width)
            for job_id in view.running(partition):
                table.put(job_id, self._facts(view, job_id))
            self._tables[partition] = table  # kept once whole: a row that failed leaves nothing half-built
        return table
