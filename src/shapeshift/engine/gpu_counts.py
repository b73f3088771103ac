"""Per-partition counts of nodes by free GPUs, kept up to date as GPUs are taken and given.

A placement decision asks two questions of a partition again and again: how many GPUs
are free, and which is the smallest number of free GPUs, at least ``g``, that some node
has (best fit). Read off the free-GPU array, both cost O(nodes) per question, which on a
1,500-node cluster is most of a decision. Counting, per partition, how many nodes have
each number of free GPUs answers both in O(GPUs per node), and costs O(1) per node a job
takes or gives back.

The counts are an index, never the truth: ``FreeResources`` keeps them beside its arrays,
updates them in ``take`` and ``give``, and copies them with the arrays. Whoever writes the
arrays directly must call ``FreeResources.recount()`` (CES masking powered-down nodes).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


class GpuCounts:
    """Nodes per free-GPU count, and free GPUs in total, for each registered group of nodes.

    Groups are the engine's partition node arrays, recognised by identity: the engine
    hands the same array to every decision, and a query about any other array (a policy's
    subset of nodes) answers ``None`` so the caller reads the arrays instead."""

    __slots__ = ("_arrays", "_group_of_node", "_histograms", "_slices", "_totals")

    def __init__(
        self,
        arrays: dict[int, tuple[np.ndarray, int]],
        group_of_node: list[int],
        histograms: list[list[int]],
        totals: list[int],
        slices: list[slice | None],
    ):
        self._arrays = arrays
        self._group_of_node = group_of_node
        self._histograms = histograms
        self._totals = totals
        self._slices = slices

    @classmethod
    def of(cls, groups: Mapping[str, np.ndarray], free: np.ndarray, capacity: np.ndarray) -> GpuCounts:
        arrays: dict[int, tuple[np.ndarray, int]] = {}
        group_of_node = [-1] * len(free)
        slices: list[slice | None] = []
        for index, nodes in enumerate(groups.values()):
            arrays[id(nodes)] = (nodes, index)
            listed = nodes.tolist()
            for n in listed:
                group_of_node[n] = index
            contiguous = bool(listed) and listed == list(range(listed[0], listed[0] + len(listed)))
            slices.append(slice(listed[0], listed[0] + len(listed)) if contiguous else None)
        width = int(capacity.max()) + 1 if len(capacity) else 1
        counts = cls(arrays, group_of_node, [[0] * width for _ in groups], [0] * len(groups), slices)
        counts.recount(free)
        return counts

    def recount(self, free: np.ndarray) -> None:
        """Rebuild every count from the free-GPU array (after direct writes to it)."""
        for histogram in self._histograms:
            histogram[:] = [0] * len(histogram)
        totals = [0] * len(self._totals)
        for group, gpus in zip(self._group_of_node, free.tolist(), strict=True):
            if group >= 0:
                self._histograms[group][gpus] += 1
                totals[group] += gpus
        self._totals[:] = totals

    def copy(self) -> GpuCounts:
        return GpuCounts(
            self._arrays,
            self._group_of_node,
            [h.copy() for h in self._histograms],
            self._totals.copy(),
            self._slices,
        )

    def moved(self, node: int, before: int, after: int) -> None:
        """Node ``node`` went from ``before`` to ``after`` free GPUs."""
        group = self._group_of_node[node]
        if group >= 0:
            histogram = self._histograms[group]
            histogram[before] -= 1
            histogram[after] += 1
            self._totals[group] += after - before

    def group(self, nodes: np.ndarray) -> int | None:
        """The group ``nodes`` is (by identity), or ``None`` for an unregistered array."""
        hit = self._arrays.get(id(nodes))
        return hit[1] if hit is not None and hit[0] is nodes else None

    def total(self, group: int) -> int:
        return self._totals[group]

    def nodes_with(self, group: int, gpus: int) -> int:
        """How many nodes of the group have exactly ``gpus`` free."""
        histogram = self._histograms[group]
        return histogram[gpus] if 0 <= gpus < len(histogram) else 0

    def histogram(self, group: int) -> list[int]:
        """How many nodes of the group have each number of free GPUs (live: do not change it)."""
        return self._histograms[group]

    def smallest_fit(self, group: int, gpus: int) -> int | None:
        """The fewest free GPUs, at least ``gpus``, that some node of the group has."""
        histogram = self._histograms[group]
        for free in range(gpus, len(histogram)):
            if histogram[free]:
                return free
        return None

    def window(self, group: int) -> slice | None:
        """The group's nodes as one slice of the arrays, when they are consecutive."""
        return self._slices[group]
