"""The Tiresias decision walked over plain lists, as the rule reads (and as the policy did
before ``policies/tiresias/queues.py``): the reference the differential tests hold the
incremental queues to. Every active job is visited at every decision."""

from __future__ import annotations

import math

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, Schedule
from shapeshift.policies.tiresias.policy import TiresiasPolicy, _Track


class ListTiresias(TiresiasPolicy):
    """``TiresiasPolicy`` with each queue a list of job ids in queue order."""

    def decide(self, view) -> Schedule:
        changes: dict[str, Allocation | None] = {}
        free = view.scratch()
        finished: dict[str, list[str]] = {}
        for job_id in view.finished:
            track = self._track.pop(job_id, None)
            if track is not None:
                self._instants.forget(track.partition, job_id)
                finished.setdefault(track.partition, []).append(job_id)
        for partition in sorted(view.dirty_partitions):
            if self._unchanged(view, partition, finished):
                continue
            self._walk_lists(view, partition, free, changes, finished.get(partition, ()))
        wake = min(self._next.values(), default=math.inf)
        return Schedule(base=view.allocations, changes=changes, wake_at=None if math.isinf(wake) else wake)

    def _walk_lists(self, view, partition: str, free: FreeResources, changes, finished) -> None:
        queues = self._queues.setdefault(partition, [[] for _ in range(len(self.thresholds) + 1)])
        gone = set(finished)
        for queue in queues:  # finished jobs leave their queue
            queue[:] = [j for j in queue if j not in gone]
        running = list(view.running(partition))
        for job_id in [*running, *self.admission.admit(view, partition)]:
            if job_id not in self._track:  # a new job enters the end of queue 0
                spec = view.job(job_id).spec
                self._track[job_id] = _Track(0, spec.num_gpus, partition, mark_time=spec.submit_time)
                queues[0].append(job_id)
        movers = [j for q in queues for j in q] if self.starvation > 0 else self._due_now(view, partition)
        for job_id in movers:  # demotions and promotions append to their new queue
            before = self._track[job_id].queue
            after = self._update(view, job_id).queue
            if after != before:
                queues[before].remove(job_id)
                queues[after].append(job_id)
        capacity = view.capacity_gpus(partition)
        is_running = set(running)
        keep: set[str] = set()
        start: list[str] = []
        for queue in queues:  # visit in order; keep or start what fits while GPUs are left
            if capacity == 0:
                break
            for job_id in queue:
                gpus = self._track[job_id].gpus
                if gpus <= capacity:
                    capacity -= gpus
                    (keep.add(job_id) if job_id in is_running else start.append(job_id))
                    if capacity == 0:
                        break
        for job_id in running:
            if job_id not in keep:
                changes[job_id] = None
                free.give(view.allocations[job_id])
        for job_id in start:
            alloc = self.placement.find(view.job(job_id).spec, view.partitions[partition], free)
            if alloc is not None:
                changes[job_id] = alloc
                free.take(alloc)
                keep.add(job_id)
        for queue in queues:  # waiting jobs go behind the running ones
            queue[:] = [j for j in queue if j in keep] + [j for j in queue if j not in keep]
        self._seen[partition] = self._active(view, partition)
        if self.starvation > 0:
            self._next[partition] = min(
                (self._next_change(view, j, self._track[j], j in keep) for q in queues for j in q), default=math.inf
            )
            return
        # Demotion instants of the jobs that stopped and of those that run on (the
        # policy's heap: the list rule changes only how the queues are walked).
        started = [*(keep - is_running), *(j for j in movers if j in keep)]
        self._schedule_demotions(view, partition, list(is_running - keep), started)

