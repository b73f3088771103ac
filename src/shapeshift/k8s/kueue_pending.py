"""Kueue's pending workloads, kept between decisions and brought up to the engine's queue
by what changed rather than by a scan of every waiting job.

``PendingQueues`` holds each ClusterQueue's pending workloads grouped by requests and
priority, each group in Kueue's queue order (priority, then creation time;
site/content/en/docs/concepts/cluster_queue.md, "Queueing strategy", kubernetes-sigs/kueue
v0.20.0-devel), so that a decision finds each queue's head without sorting every waiting
workload again.

``sync`` reads the engine's waiting queues from their end: the engine appends every job
that enters a queue (an arrival, a preempted job) and never moves one already there, so
the jobs new since the previous decision are the queue's tail after the last one already
held. Jobs withdrawn from the queue are among the view's ``touched`` jobs. A count of the
waiting jobs checks the result; should it disagree (a job left the queue some other way),
the queues are rebuilt from a full scan, so the outcome never depends on the shortcut.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Reversible

from shapeshift.engine.state import JobState
from shapeshift.engine.view import ClusterView
from shapeshift.k8s.kueue_rules import Workload


def queue_order(w: Workload) -> tuple:
    """Kueue's order within a ClusterQueue: higher priority first, then older (name breaks ties)."""
    return w.order


def group_key(w: Workload) -> tuple:
    """Workloads with the same key (queue, requests, priority) fare alike against quota."""
    return w.key


class PendingQueues:
    """Each ClusterQueue's pending workloads grouped by ``group_key``, each group in queue
    order; a group that empties is dropped, so finding heads costs the groups that hold
    workloads."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[tuple, deque[Workload]]] = {}
        self.names: set[str] = set()

    def add(self, w: Workload) -> None:
        group = self.groups.setdefault(w.cluster_queue, {}).setdefault(w.key, deque())
        if group and w.order < group[-1].order:  # rare: out of order
            items = sorted([*group, w], key=queue_order)
            group.clear()
            group.extend(items)
        else:
            group.append(w)
        self.names.add(w.name)

    def pop_head(self, w: Workload) -> None:
        by_key = self.groups[w.cluster_queue]
        key = w.key
        group = by_key[key]
        group.popleft()  # a head is the front of its group
        if not group:
            del by_key[key]
        self.names.discard(w.name)

    def discard(self, w: Workload) -> None:
        if w.name in self.names:
            by_key = self.groups[w.cluster_queue]
            key = group_key(w)
            by_key[key].remove(w)
            if not by_key[key]:
                del by_key[key]
            self.names.discard(w.name)

    def __iter__(self):
        return (w for by_key in self.groups.values() for group in by_key.values() for w in group)

    def sync(self, view: ClusterView, workload: Callable[[str], Workload]) -> None:
        """Bring the held workloads up to the engine's waiting jobs (``workload`` makes a
        job's ``Workload``): the new tail of each waiting queue joins, withdrawn jobs leave."""
        known = self.names
        total = 0
        for partition in view.partitions:
            waiting = view.pending(partition)
            total += view.pending_count(partition)
            for job_id in _new_tail(waiting, known):
                self.add(workload(job_id))
        for job_id in view.touched:
            if job_id in known and job_id not in view.allocations and _left_queue(view, job_id):
                self.discard(workload(job_id))
        if len(known) != total:
            self._rebuild(view, workload)

    def _rebuild(self, view: ClusterView, workload: Callable[[str], Workload]) -> None:
        waiting = [j for p in view.partitions for j in view.pending(p)]
        present = set(waiting)
        for w in [w for w in self if w.name not in present]:
            self.discard(w)
        for job_id in waiting:
            if job_id not in self.names:
                self.add(workload(job_id))


def _new_tail(waiting: Iterable[str], known: set[str]) -> list[str]:
    """The jobs after the last one in ``known``, in queue order (all of them when the
    queue cannot be read from its end)."""
    if not isinstance(waiting, Reversible):
        return [j for j in waiting if j not in known]
    tail = []
    for job_id in reversed(waiting):
        if job_id in known:
            break
        tail.append(job_id)
    tail.reverse()
    return tail


def _left_queue(view: ClusterView, job_id: str) -> bool:
    return view.job(job_id).state is not JobState.PENDING
