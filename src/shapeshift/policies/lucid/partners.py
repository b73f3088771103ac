"""The binder's view of the running jobs: which may take a partner, kept cheaply.

At every decision Lucid asks which running jobs of a partition's main queue run alone on
one node: the partners a newcomer may join (``PartnerIndex`` then picks one). Walking
every running job at every decision dominated whole-trace runs, so ``RunningPartners``
keeps each job's ``Candidate`` and each partition's list, and rebuilds a list only when
something it reads changed: a job joined or left a GPU of the partition
(``GpuLedger.node_changes``: launches, completions, stops and pairings), profiling
membership or a priority changed there (``touch``), or every priority changed
(``touch_all``, after a refit). The answer is the same as walking them all.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from typing import TYPE_CHECKING

from shapeshift.policies.lucid.packing import Candidate

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView

#: ``describe(job_id, node, priority)``: the binder's ``Candidate`` for a running job.
Describe = Callable[[str, int, float], Candidate]


class RunningPartners:
    """Per partition, the running jobs that may take a partner, in start order."""

    def __init__(self) -> None:
        self._candidates: dict[str, tuple[int, Candidate]] = {}
        self._lists: dict[str, tuple[tuple[int, int, int], list[Candidate]]] = {}
        self._roster: dict[str, int] = {}
        self._epoch = 0

    def touch(self, partition: str) -> None:
        """Profiling membership or a priority changed in ``partition``."""
        self._roster[partition] = self._roster.get(partition, 0) + 1

    def touch_all(self) -> None:
        """Priorities changed everywhere (the duration model was refitted)."""
        self._epoch += 1

    def forget(self, job_id: str) -> None:
        """A job finished."""
        self._candidates.pop(job_id, None)

    def of(
        self,
        view: ClusterView,
        partition: str,
        profiling: Container[str],
        features: Container[str],
        priorities: Mapping[str, float],
        describe: Describe,
        locked: Container[str] = (),
    ) -> list[Candidate]:
        """Running jobs of the main queue (not profiling, not ``locked``, with features and
        a priority) that hold their GPUs alone on one node, in start order."""
        ledger = view.sharing
        assert ledger is not None
        changes = ledger.node_changes
        moved = sum(changes[n] for n in view.partitions[partition].tolist())
        stamp = (moved, self._roster.get(partition, 0), self._epoch)
        kept = self._lists.get(partition)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        holders, cache, devices_of = ledger.holders, self._candidates, ledger.devices.get
        out = []
        for job_id in view.running(partition):
            devices = devices_of(job_id)
            if not devices:
                continue
            node, gpu = devices[0]
            if len(holders[node][gpu]) != 1 or job_id in profiling or job_id not in features or job_id in locked:
                continue
            priority = priorities.get(job_id)
            if priority is None:
                continue
            hit = cache.get(job_id)
            if hit is None or hit[0] != node or hit[1].priority != priority:
                hit = cache[job_id] = (node, describe(job_id, node, priority))
            out.append(hit[1])
        self._lists[partition] = (stamp, out)
        return out
