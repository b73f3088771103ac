"""The slurm policy's clock: each job's priority, and the calculations every period.

slurmctld's decay thread (``_decay_thread`` in ``priority_multifactor.c``) charges the
running jobs' usage, decays it and recomputes every pending job's priority once per
``PriorityCalcPeriod`` (at least a minute); a job gets its first priority when it is
submitted. This part keeps each pending job's facts (``priority.JobFacts``) and the
unchanging part of its priority, so that a calculation over a queue of thousands is a
few array operations (``Multifactor.priorities``) rather than a Python call per job.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from shapeshift.engine.view import ClusterView
from shapeshift.model import JobSpec
from shapeshift.policies.slurm.fairshare import FairShare, Running
from shapeshift.policies.slurm.priority import JobFacts, Multifactor
from shapeshift.policies.slurm.slots import ReusedSlots

if TYPE_CHECKING:
    from shapeshift.policies.slurm.queue_order import PriorityOrder
    from shapeshift.slurm.conf import SlurmConf, SlurmPartition


class PriorityClock:
    conf: SlurmConf | None
    fairshare: FairShare | None
    multifactor: Multifactor
    running: Running
    last_tick: float
    prio: dict[str, int]
    order: dict[str, int]
    facts: dict[str, JobFacts]
    static_rows: StaticRows
    queue_order: PriorityOrder
    begin: dict[str, float]
    largest: dict[str, int]
    part_norm: dict[str, float]
    qos: dict[str, float]
    _assoc_keys: dict[tuple[str, str], str]

    if TYPE_CHECKING:  # SlurmPolicy's

        def partition_of(self, spec: JobSpec) -> SlurmPartition | None: ...
        def _tier(self, view: ClusterView, job_id: str) -> int: ...

    def _assoc(self, spec: JobSpec) -> str:
        """The job's user association (added with share 1 when the tree lacks it; the tree
        only grows, so a pair's key, once known, is the same)."""
        assert self.fairshare is not None
        key = self._assoc_keys.get((spec.tenant, spec.user))
        if key is None:
            key = self._assoc_keys[(spec.tenant, spec.user)] = self.fairshare.ensure(
                spec.tenant or "root", spec.user or "nobody"
            )
        return key

    def _facts(self, view: ClusterView, spec: JobSpec, partition: str) -> JobFacts:
        largest = self.largest.get(partition, 0)
        nodes = math.ceil(spec.num_gpus / largest) if largest and spec.num_gpus > largest else 1
        part = self.partition_of(spec)
        return JobFacts(
            eligible=self.begin.get(spec.job_id, spec.submit_time),
            cpus=spec.num_cpus,
            min_nodes=nodes,
            assoc=self._assoc(spec),
            part_factor=self.part_norm.get(part.name, 0.0) if part is not None else 0.0,
            qos_factor=self.qos.get(spec.qos, 0.0),
        )

    def _priority(self, view: ClusterView, job_id: str, now: float) -> int:
        assert self.conf is not None and self.fairshare is not None
        if not self.conf.priority.multifactor:
            return -self.order[job_id]
        facts = self.facts.get(job_id)
        if facts is None:
            status = view.job(job_id)
            facts = self.facts[job_id] = self._facts(view, status.spec, status.partition)
        return self.multifactor.priority(facts, now, self.fairshare.factor(facts.assoc))

    # -- the clock: usage ticks and priority recalculation ----------------------------
    def _tick_due(self, now: float) -> bool:
        """Whether a calculation period has ended by ``now``."""
        assert self.conf is not None
        return self.last_tick + max(self.conf.priority.calc_period, 60) <= now

    def _ticks(self, view: ClusterView, priced: Callable[[], list[str]]) -> bool:
        """Run the calc periods up to now; whether any ran. ``priced``: the pending jobs
        with a priority (those a calculation recomputes)."""
        assert self.conf is not None and self.fairshare is not None
        period = max(self.conf.priority.calc_period, 60)
        ran = False
        while self._tick_due(view.now):
            ran = True
            tick = self.last_tick + period
            self.running.charge(self.fairshare, self.last_tick, tick)
            self.fairshare.recompute()
            self._recalculate(view, priced(), tick)
            self.last_tick = tick
        return ran

    def _priced(self, everyone: Callable[[], list[str]], known: int) -> list[str]:
        """The pending jobs with a priority, ``known`` of them: the kept order's jobs
        where it holds that many (it holds every such job, so then exactly those; a
        calculation's result does not depend on their order), else read from the queue."""
        kept = self.queue_order
        if kept.valid and len(kept.jobs) == known:
            return kept.jobs
        return [j for j in everyone() if j in self.prio]

    def _recalculate(self, view: ClusterView, jobs: list[str], now: float) -> None:
        """``_priority`` of every job in ``jobs`` at ``now``, computed over arrays (a
        calculation period recomputes every pending job's priority)."""
        assert self.conf is not None and self.fairshare is not None
        if len(jobs) < 2 or not self.conf.priority.multifactor:
            for job_id in jobs:
                self.prio[job_id] = self._priority(view, job_id, now)
            self.queue_order.valid = False  # the next decision sorts the queue anew
            return
        table = self.static_rows
        slots = list(map(table.slot.get, jobs))
        if None in slots:
            for job_id, slot in zip(jobs, slots, strict=True):
                if slot is not None:
                    continue
                facts = self.facts.get(job_id)
                if facts is None:
                    status = view.job(job_id)
                    facts = self.facts[job_id] = self._facts(view, status.spec, status.partition)
                row = self.multifactor.static(facts)
                table.add(job_id, row, facts.assoc, self._tier(view, job_id), self.order[job_id])
            slots = list(map(table.slot.__getitem__, jobs))
        at = np.array(slots, np.int64)
        factors = self.fairshare.factor_values()[table.tree_index(self.fairshare.index)]
        values = self.multifactor.priorities(table.rows[at], now, factors[table.assoc[at]])
        self.prio.update(zip(jobs, values.tolist(), strict=True))
        # The queue sorted anew by (-tier, -priority, submission order), from the same
        # rows; jobs queued since are placed in it by the decision.
        self.queue_order.rebuild_columns(jobs, -table.tier[at], -values, table.order[at])


class StaticRows(ReusedSlots):
    """Each pending job's ``Multifactor.static`` row, association index, priority tier
    and submission order, in reused slots (``slots.ReusedSlots``), so that a calculation
    gathers the whole queue's with one index (``PriorityClock._recalculate``)."""

    columns = ("rows", "assoc", "tier", "order")

    def __init__(self) -> None:
        super().__init__()
        self.rows = np.zeros((256, 5), np.float64)
        self.assoc = np.zeros(256, np.int64)
        self.tier = np.zeros(256, np.int64)  # the job's partition's priority tier
        self.order = np.zeros(256, np.int64)  # its submission order
        self.assoc_names: list[str] = []
        self._assoc_index: dict[str, int] = {}
        self._tree_index = np.zeros(0, np.int64)

    def add(self, job_id: str, row: tuple[float, ...], assoc: str, tier: int = 1, order: int = 0) -> None:
        slot = self._claim(job_id)
        index = self._assoc_index.get(assoc)
        if index is None:
            index = self._assoc_index[assoc] = len(self.assoc_names)
            self.assoc_names.append(assoc)
        self.rows[slot] = row
        self.assoc[slot] = index
        self.tier[slot] = tier
        self.order[slot] = order

    def tree_index(self, index: dict[str, int]) -> np.ndarray:
        """Each association's position in the fair-share tree's ``index`` (kept: a key's
        position there never changes, and both only grow)."""
        known = self._tree_index.size
        if known < len(self.assoc_names):
            more = [index[name] for name in self.assoc_names[known:]]
            self._tree_index = np.concatenate((self._tree_index, np.array(more, np.int64)))
        return self._tree_index
