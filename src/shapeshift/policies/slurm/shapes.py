"""The per-node amounts the slurm policy hands around, built once per distinct value.

A replay starts one job per submission and asks for the same few request shapes
(GPUs, CPUs, memory) again and again: a ``Need`` per fit, a ``Resources`` per placed
node, both frozen. Building a frozen dataclass costs more than the fit's arithmetic, so
equal amounts share one object. The key includes each number's type, so a shared
object is the very value a fresh one would have been (``4`` and ``4.0`` stay apart).
"""

from __future__ import annotations

import numpy as np

from shapeshift.model import Allocation, JobSpec, Resources
from shapeshift.policies.slurm.plan import Free, Need

#: Distinct amounts kept before the tables are emptied (a guard, never reached by a
#: replay's handful of shapes).
_LIMIT = 65536


class Shapes:
    """Shared ``Need`` and ``Resources`` objects, and conversions between placements."""

    def __init__(self) -> None:
        self._needs: dict[tuple, Need] = {}
        self._resources: dict[tuple, Resources] = {}
        #: The same conversions by the identity of what is converted (kept in the entry,
        #: so a reused identity is told apart): a shared object is converted by one
        #: look-up, without building and hashing a key of its numbers.
        self._need_of: dict[int, tuple[Resources, Need]] = {}
        self._resources_of: dict[int, tuple[Need, Resources]] = {}
        #: Whether one-node allocations are shared (``alloc``); the policy sets it.
        self.reuse = False
        self._one_node: dict[tuple[int, int], tuple[Need, Allocation]] = {}

    def need(self, gpus: int, cpus: float, mem: float) -> Need:
        key = (gpus, cpus, mem, type(gpus), type(cpus), type(mem))
        hit = self._needs.get(key)
        if hit is None:
            if len(self._needs) >= _LIMIT:
                self._needs.clear()
            hit = self._needs[key] = Need(gpus, cpus, mem)
        return hit

    def of(self, spec: JobSpec) -> Need:
        """What ``spec`` asks for in all."""
        return self.need(spec.num_gpus, spec.num_cpus, spec.mem_gb)

    def resources(self, need: Need) -> Resources:
        known = self._resources_of.get(id(need))
        if known is not None and known[0] is need:
            return known[1]
        key = (need.gpus, need.cpus, need.mem, type(need.gpus), type(need.cpus), type(need.mem))
        hit = self._resources.get(key)
        if hit is None:
            if len(self._resources) >= _LIMIT:
                self._resources.clear()
            hit = self._resources[key] = Resources(need.gpus, need.cpus, need.mem)
        if len(self._resources_of) >= _LIMIT:
            self._resources_of.clear()
        self._resources_of[id(need)] = (need, hit)
        return hit

    def _need_for(self, res: Resources) -> Need:
        known = self._need_of.get(id(res))
        if known is not None and known[0] is res:
            return known[1]
        need = self.need(res.gpus, res.cpus, res.mem_gb)
        if len(self._need_of) >= _LIMIT:
            self._need_of.clear()
        self._need_of[id(res)] = (res, need)
        return need

    def placement(self, alloc: Allocation) -> tuple[tuple[int, Need], ...]:
        """An allocation's nodes and amounts as the planner's ``Need``s."""
        return tuple([(n, self._need_for(r)) for n, r in alloc.placement])

    def alloc(self, placement: list[tuple[int, Need]]) -> Allocation:
        """The allocation of a planned placement. With ``reuse``, the one-node ones are
        shared like the amounts: an ``Allocation`` is immutable, and only a cluster whose
        jobs share GPUs tells allocations apart by identity (the engine's GPU ledger)."""
        if self.reuse and len(placement) == 1:
            node, need = placement[0]
            known = self._one_node.get((node, id(need)))
            if known is not None and known[0] is need:
                return known[1]
            alloc = Allocation(((node, self.resources(need)),))
            if len(self._one_node) >= _LIMIT:
                self._one_node.clear()
            self._one_node[(node, id(need))] = (need, alloc)
            return alloc
        return Allocation(tuple([(n, self.resources(need)) for n, need in placement]))


def free_copy(gpus: np.ndarray, cpus: np.ndarray, mem: np.ndarray) -> Free:
    """A ``Free`` holding copies of the engine's free arrays, in ``Free``'s dtypes (one
    copy each, without ``Free``'s conversions of arrays that are already arrays; a plain
    ``copy`` where the dtype is already right, which costs less than ``np.array``'s)."""
    free = object.__new__(Free)
    free.gpus = gpus.copy() if gpus.dtype == _INT else np.array(gpus, dtype=np.int64)
    free.cpus = cpus.copy() if cpus.dtype == _FLOAT else np.array(cpus, dtype=np.float64)
    free.mem = mem.copy() if mem.dtype == _FLOAT else np.array(mem, dtype=np.float64)
    return free


def free_borrowed(gpus: np.ndarray, cpus: np.ndarray, mem: np.ndarray) -> Free:
    """A ``Free`` reading the engine's free arrays themselves until it changes them
    (``Free.borrowed``); ``free_copy``'s where one needs another dtype."""
    if gpus.dtype != _INT or cpus.dtype != _FLOAT or mem.dtype != _FLOAT:
        return free_copy(gpus, cpus, mem)
    free = object.__new__(Free)
    free.gpus, free.cpus, free.mem, free.borrowed = gpus, cpus, mem, True
    return free


_INT, _FLOAT = np.dtype(np.int64), np.dtype(np.float64)
