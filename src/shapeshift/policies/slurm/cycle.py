"""The slurm policy's backfill cycle: what it hands ``plan.backfill`` and what it keeps.

``SlurmPolicy.decide`` runs a cycle every ``bf_interval`` seconds after something
changed (``policy.py``); this part gathers the running jobs' planned ends, the first
``bf_max_job_test`` pending jobs as candidates, runs the plan (``plan.py``, Slurm's
``_attempt_backfill``) and turns its starts into allocations, within the QOS limits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, JobSpec, Schedule
from shapeshift.policies.slurm import compiled as compiled_cycle
from shapeshift.policies.slurm.backfill_preempt import preempt_hook
from shapeshift.policies.slurm.candidate_rows import CandidateRows
from shapeshift.policies.slurm.ends import EndsByJob, EntryPool
from shapeshift.policies.slurm.plan import BackfillResult, Candidate, EndArrays, Ending, Free, Need, backfill

if TYPE_CHECKING:
    from shapeshift.engine.fractions import TypedGroups
    from shapeshift.policies.slurm.qos_limits import Limits
    from shapeshift.slurm.conf import SlurmConf


class _Candidates(Sequence[Candidate]):
    """The tested jobs as ``Candidate``s, each made when read (``plan_compiled.run`` reads
    only those it starts or reserves)."""

    def __init__(self, jobs: list[str], make: Callable[[str], Candidate]) -> None:
        self._jobs, self._make = jobs, make

    def __len__(self) -> int:
        return len(self._jobs)

    @overload
    def __getitem__(self, index: int) -> Candidate: ...
    @overload
    def __getitem__(self, index: slice) -> _Candidates: ...
    def __getitem__(self, index: int | slice) -> Candidate | _Candidates:
        if isinstance(index, slice):
            return _Candidates(self._jobs[index], self._make)
        return self._make(self._jobs[index])


class BackfillCycle:
    params: Any  # SlurmParams: its clock_origin
    conf: SlurmConf | None
    endings: EndsByJob
    typed: TypedGroups
    groups: dict[str, list[list[int]]]
    largest: dict[str, int]
    limits: Limits | None
    #: Planned starts of the last backfill cycle (job -> reserved start), for reports.
    planned: dict[str, float]
    fit_head: Any  # SlurmPolicy's: the main scheduler's fit
    #: Each pending job's ``Candidate`` (``_candidate``), dropped when it starts.
    candidates: dict[str, Candidate]
    #: Their rows for the compiled cycle.
    candidate_rows: CandidateRows
    #: The last cycle's plan (``None`` after an empty cycle).
    last_plan: BackfillResult | None
    next_bf: float  # when the next cycle is due
    dirty: bool  # whether anything a cycle depends on changed since the last
    exempt_wake: float  # SlurmPolicy's: the next grace time's end

    if TYPE_CHECKING:  # SlurmPolicy's and LimitsAndPreemption's

        def limit(self, spec: JobSpec) -> float: ...
        def _need(self, spec: JobSpec) -> Need: ...
        def _placement(self, alloc: Allocation) -> tuple[tuple[int, Need], ...]: ...
        def _alloc(self, placement: list[tuple[int, Need]]) -> Allocation: ...
        def _over_limit(self, view: ClusterView, job_id: str, reasons: dict) -> bool: ...
        def _usage(self, view: ClusterView, job_id: str): ...

    @property
    def planned(self) -> dict[str, float]:
        """Each job the last backfill cycle reserved, with its planned start (for
        reports; made when read)."""
        return self.last_plan.planned() if self.last_plan is not None else {}

    def _idle(self, view: ClusterView) -> Schedule:
        """A decision with no job to place and no grace time to end (about two in five
        at a 0.9 load: a job ends and none waits): what the full path would do with an
        empty queue, without walking it. Only the backfill cycle's timer and state move,
        as an empty cycle moves them (``_empty_cycle``)."""
        assert self.conf is not None
        self.exempt_wake = math.inf
        sched = self.conf.scheduler
        if sched.backfill and view.now >= self.next_bf and self.dirty:
            self.dirty = self._empty_cycle(view, {})
            self.next_bf = view.now + sched.params["bf_interval"]
        return Schedule(base=view.allocations, changes={}, reasons={}, default_reason="Priority", wake_at=None)

    def _empty_cycle(self, view: ClusterView, changes: dict[str, Allocation | None]) -> bool:
        """A cycle with nothing to test: no start and no reservation. The next cycle is
        due only while a running job (or one just started with a zero limit) is past its
        time limit."""
        self.last_plan = None
        ended = self.endings.any_by(view.now)
        return ended or any(a is not None and self.limit(view.job(j).spec) <= 0 for j, a in changes.items())

    def _candidate(self, view: ClusterView, job_id: str) -> Candidate:
        """``job_id``'s ``Candidate``, made when a cycle first reads it: what it asks for,
        its limit and its nodes do not change while it waits (dropped when it starts)."""
        cand = self.candidates.get(job_id)
        if cand is None:
            status = view.job(job_id)
            spec, part = status.spec, status.partition
            typed = self.typed.of(spec, self.groups[part], self.largest[part])
            cand = self.candidates[job_id] = Candidate(job_id, self._need(spec), self.limit(spec), *typed)
        return cand

    def _backfill(
        self, view: ClusterView, queue: list[str], free: Free, changes: dict[str, Allocation | None], reasons: dict
    ) -> bool:
        """One backfill cycle; returns whether a running job is past its limit (then the
        plan changes as time passes, and the next cycle must run)."""
        assert self.conf is not None
        params = self.conf.scheduler.params
        if not queue:
            return self._empty_cycle(view, changes)
        free.own()  # the cycle's starts are written into its arrays
        endings = self.endings
        pool = endings.pool
        # The running jobs' ends in the engine's order: the kept ones as they are where
        # they are the same jobs in the same order (the pool's rows), else job by job.
        kept_order = not endings.reordered and list(view.allocations) == list(endings)
        if kept_order:  # the list is made only where the plan reads it (not compiled)
            running: list[Ending] = []
            rows = pool.live_rows()
        else:
            running, slots = [], []
            for job_id, alloc in view.allocations.items():
                ending = endings.get(job_id)
                if ending is None:  # started before this policy saw it
                    status = view.job(job_id)
                    start = status.started_at if status.started_at is not None else view.now
                    ending = endings[job_id] = Ending(start + self.limit(status.spec), self._placement(alloc))
                running.append(ending)
                slots.append(pool.slot[job_id])
            where = np.array(slots, dtype=np.int64).reshape(-1, 2)
            ends = np.fromiter((e.end for e in running), dtype=np.float64, count=len(running))
            rows = (ends, where[:, 0], where[:, 1])
        started = [
            Ending(view.now + self.limit(view.job(job_id).spec), self._placement(alloc))
            for job_id, alloc in changes.items()
            if alloc is not None
        ]
        running += started
        tested = queue[: max(params["bf_max_job_test"], 0)]  # the cycle tests no more
        hook = preempt_hook(self, view, free, changes, reasons)
        arrays = table = None
        candidates: Sequence[Candidate]
        if hook is None and compiled_cycle.available():
            # The compiled cycle reads each job's row (made on first sight) and a job's
            # ``Candidate`` only where it starts or is reserved.
            arrays = _end_arrays(rows, started, pool)
            kept_rows = self.candidate_rows
            slots = list(map(kept_rows.slot.get, tested))
            if None in slots:
                for i in [i for i, slot in enumerate(slots) if slot is None]:
                    slots[i] = kept_rows.slot_of(self._candidate(view, tested[i]))
            at = np.array(slots, np.int64)
            table = (kept_rows.rows[at], kept_rows.part[at], kept_rows.groups)
            candidates = _Candidates(tested, lambda job_id: self._candidate(view, job_id))
            from shapeshift.policies.slurm.fit_compiled import fit_now  # numba: only once needed

            self.fit_head = fit_now
        else:
            candidates = [self._candidate(view, job_id) for job_id in tested]
        if arrays is None and kept_order:
            running = list(endings.values()) + started
        result = backfill(
            view.now,
            candidates,
            free,
            [e for e in running if math.isfinite(e.end)] if arrays is None else [],
            window=params["bf_window"],
            resolution=params["bf_resolution"],
            max_job_test=params["bf_max_job_test"],
            epoch=self.params.clock_origin,
            preempt=hook,
            arrays=arrays,
            table=table,
        )
        for job_id, placement in result.started:
            if self.limits is not None:
                # A job the cycle's earlier starts put over a limit is not started.
                if self._over_limit(view, job_id, reasons):
                    free.give(placement)
                    continue
                self.limits.add(self._usage(view, job_id), +1)
            changes[job_id] = self._alloc(placement)
            reasons.pop(job_id, None)
        self.last_plan = result
        if kept_order:  # the kept ends are all the running jobs'
            return endings.any_by(view.now) or any(e.end <= view.now for e in started)
        return any(e.end <= view.now for e in running)


def _end_arrays(
    rows: tuple[np.ndarray, np.ndarray, np.ndarray], started: list[Ending], pool: EntryPool
) -> EndArrays:
    """The running jobs' ends with a finite end as ``EndArrays``: those in the pool
    (``rows``: their ends, first entries and entry counts, in the engine's order), then
    the jobs this decision started (``started``), their entries after the pool's."""
    new = EndArrays.of(started)
    end = np.concatenate((rows[0], new.end))
    first = np.concatenate((rows[1], new.first + pool.used))
    count = np.concatenate((rows[2], new.count))
    keep = np.isfinite(end)
    used = pool.used
    return EndArrays(
        end[keep],
        first[keep],
        count[keep],
        np.concatenate((pool.node[:used], new.node)),
        np.concatenate((pool.gpus[:used], new.gpus)),
        np.concatenate((pool.cpus[:used], new.cpus)),
        np.concatenate((pool.mem[:used], new.mem)),
    )
