"""Placement strategies: on which nodes of a partition a job's GPUs go.

Each strategy answers one question, ``find(job, nodes, free)``, against a scratch copy
of free resources, and returns an ``Allocation`` or ``None``. A job's CPUs and memory
follow its GPUs: they are split over nodes in proportion to the GPUs on each node.

Two rules hold for every strategy: a job with a GPU-type constraint (``JobSpec.gpu_types``)
is placed only on nodes of the types it allows (``eligible``), and on a cluster with
fractional GPUs (``FreeResources.milli``) a job asking for a fraction of one GPU goes to
one GPU that still has that share free (``fraction_find``), idle or not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, JobSpec, Resources
from shapeshift.policies.framework.fgd import Fgd
from shapeshift.policies.framework.gpu_shapes import eligible, fraction_find, host_fits

#: The placement strategies a policy parameter may name (see ``PLACEMENTS``).
PlacementName = Literal["consolidated", "first-fit", "scattered", "yarn", "fgd"]


class Placement(Protocol):
    name: str

    def find(self, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None: ...


@runtime_checkable
class SurelyFails(Protocol):
    """What a placement may also answer: ``cannot_fit(gpus, histogram, nodes, free)`` is
    True only when ``find`` would surely return ``None`` for a job of ``gpus`` GPUs on
    ``nodes`` whose free GPUs are counted by ``histogram`` (``histogram[i]`` nodes have
    ``i`` free), without looking at the nodes: what preemptive decisions ask before
    handing evicted GPUs back (``evictions.Evictions``). False means it may fit."""

    def cannot_fit(self, gpus: int, histogram: list[int], nodes: np.ndarray, free: FreeResources) -> bool: ...


#: ``SurelyFails.cannot_fit``, as handed to whoever asks it.
CannotFit = Callable[[int, list[int], np.ndarray, FreeResources], bool]


#: The largest node of a partition (GPUs) and whether every node is that large, by the
#: engine's partition array (the same array on every decision; capacities never change).
_SHAPES: dict[int, tuple[np.ndarray, int, bool]] = {}


def partition_shape(nodes: np.ndarray, free: FreeResources) -> tuple[int, bool]:
    """(GPUs of the largest node, whether every node has that many) of ``nodes``."""
    hit = _SHAPES.get(id(nodes))
    if hit is None or hit[0] is not nodes:
        cap = free.gpu_capacity[nodes]
        largest = int(cap.max()) if cap.size else 0
        if len(_SHAPES) > 1000:
            _SHAPES.clear()
        hit = _SHAPES[id(nodes)] = (nodes, largest, bool((cap == largest).all()))
    return hit[1], hit[2]


def _no_node_with(histogram: list[int], gpus: int, largest: int) -> bool:
    """Whether no node has ``gpus`` GPUs free (a one-node placement surely fails)."""
    return 0 < gpus <= largest and not any(histogram[gpus:])


#: One-node allocations of plan-less jobs, by (node, GPUs, CPUs, memory): immutable
#: values, so one object serves every job of that shape there. Under preemptive
#: policies the same shapes are placed again and again; building each anew cost about a
#: third of a placement. Cleared when it grows large (many node x shape pairs).
_ONE_NODE: dict[tuple[int, int, float, float], Allocation] = {}


def allocation_for(job: JobSpec, gpus_by_node: dict[int, int], free: FreeResources) -> Allocation | None:
    """Build the allocation giving ``gpus_by_node`` GPUs, with CPUs/memory in proportion;
    ``None`` if some node lacks the CPUs or memory for its share."""
    if len(gpus_by_node) == 1 and job.plan is None:
        ((node, gpus),) = gpus_by_node.items()
        key = (node, gpus, job.num_cpus, job.mem_gb)
        alloc = _ONE_NODE.get(key)
        if alloc is not None:
            # The share is the whole job (fraction 1.0), as below.
            if free.cpus.item(node) + 1e-9 < job.num_cpus * 1.0 or free.mem.item(node) + 1e-9 < job.mem_gb * 1.0:
                return None
            return alloc
        alloc = _allocation_for(job, gpus_by_node, free)
        if alloc is not None:
            if len(_ONE_NODE) > 100_000:
                _ONE_NODE.clear()
            _ONE_NODE[key] = alloc
        return alloc
    return _allocation_for(job, gpus_by_node, free)


def _allocation_for(job: JobSpec, gpus_by_node: dict[int, int], free: FreeResources) -> Allocation | None:
    total = sum(gpus_by_node.values())
    shares = []
    for node, gpus in gpus_by_node.items():
        fraction = gpus / total if total else 1.0
        res = Resources(gpus, job.num_cpus * fraction, job.mem_gb * fraction)
        if free.cpus[node] + 1e-9 < res.cpus or free.mem[node] + 1e-9 < res.mem_gb:
            return None
        shares.append((node, res))
    # Keep the requested plan when the GPU count matches; plan-aware policies choose plans themselves.
    plan = job.plan if job.plan is not None and job.plan.gpus == total else None
    return Allocation(tuple(shares), plan)


_host_fits = host_fits


def _cpu_only(job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
    for node in nodes.tolist():
        if _host_fits(job, node, free):
            return Allocation(((node, Resources(0, job.num_cpus, job.mem_gb)),))
    return None


_Find = Callable[[Any, JobSpec, np.ndarray, FreeResources], "Allocation | None"]


def _shared_rules(fraction_rule: str) -> Callable[[_Find], _Find]:
    """The rules every strategy applies before its own whole-GPU search (the module's
    two rules): a job without GPUs takes the first node whose host fits it; the others
    see only the nodes of the types they allow; a share of one GPU is placed by
    ``fraction_find`` under ``fraction_rule``. The decorated ``find`` handles whole GPUs."""

    def wrap(find_whole: _Find) -> _Find:
        @functools.wraps(find_whole)
        def find(self: Any, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
            if job.num_gpus == 0:
                return _cpu_only(job, nodes, free)
            if job.gpu_types:
                nodes = eligible(job, nodes, free)
            if job.gpu_milli and free.milli is not None:
                return fraction_find(job, nodes, free, fraction_rule)
            return find_whole(self, job, nodes, free)

        return find

    return wrap


class Consolidated:
    """Fewest nodes, best fit (the Helios / Tiresias consolidation rule).

    A job that fits on one node goes to the node with the *fewest* free GPUs that still
    fit it, keeping emptier nodes whole for large jobs. A larger job takes whole free
    nodes and puts any remainder on the best-fitting other node.
    """

    name = "consolidated"

    def cannot_fit(self, gpus: int, histogram: list[int], nodes: np.ndarray, free: FreeResources) -> bool:
        """``find``'s own early exits, on counts (see ``SurelyFails``): no node with the
        GPUs free, or for a wider job on equal nodes, ``_cannot_span``."""
        largest, uniform = partition_shape(nodes, free)
        if gpus <= largest or gpus <= 0:
            return _no_node_with(histogram, gpus, largest)
        if not uniform:
            return False
        whole = histogram[largest]
        k = min(whole, gpus // largest)
        rest = gpus - k * largest
        return not (rest == 0 or whole > k) and not any(histogram[rest:largest])

    @staticmethod
    def _cannot_span(g: int, largest: int, nodes: np.ndarray, free: FreeResources) -> bool:
        """Whether a job wider than every node (all ``largest`` GPUs) surely finds no room,
        read off the partition's counts: it takes ``k`` whole free nodes and needs one
        other node with the rest free; when every whole node is taken, that one must be
        a partly used node with at least the rest free."""
        whole = free.nodes_with(nodes, largest)
        if whole is None:
            return False  # unregistered nodes: let the scan decide
        k = min(whole, g // largest)
        rest = g - k * largest
        if rest == 0 or whole > k:
            return False
        fewest = free.smallest_fit(nodes, rest)
        return fewest is None or fewest == largest

    @_shared_rules("tight")
    def find(self, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
        g = job.num_gpus
        largest, uniform = partition_shape(nodes, free)
        if g <= largest:
            # Best fit: the node with the fewest free GPUs that still fit, lowest index on
            # ties. The fewest is read off the partition's counts; only when that node's
            # host lacks CPUs or memory are the other candidates ranked the same way.
            fewest = free.smallest_fit(nodes, g)
            if fewest is None:
                return None
            fg = free.gpus_in(nodes)
            node = nodes.item(int((fg == fewest).argmax()))
            if _host_fits(job, node, free):
                return allocation_for(job, {node: g}, free)
            candidates = np.flatnonzero(fg >= g)
            if candidates.size == 1:
                order = candidates.tolist()
            else:
                order = candidates[np.argsort(fg[candidates], kind="stable")].tolist()
            for i in order:
                node = int(nodes[i])
                if _host_fits(job, node, free):
                    return allocation_for(job, {node: g}, free)
            return None
        if free.free_gpus_in(nodes) < g or (uniform and self._cannot_span(g, largest, nodes, free)):
            return None
        fg = free.gpus_in(nodes)
        cap = free.gpu_capacity[nodes]
        whole = np.flatnonzero((fg == cap) & (cap > 0))
        picked: dict[int, int] = {}
        need = g
        for i in whole[np.argsort(-cap[whole], kind="stable")].tolist():
            if need <= 0 or int(cap[i]) > need:
                break
            picked[int(nodes[i])] = int(cap[i])
            need -= int(cap[i])
        if need > 0:
            rest = [i for i in np.flatnonzero(fg >= need).tolist() if int(nodes[i]) not in picked]
            if not rest:
                return None
            best = min(rest, key=lambda i: (int(fg[i]), i))
            picked[int(nodes[best])] = need
        return allocation_for(job, picked, free)


class FirstFit:
    """The first node (in index order) that fits the whole job; a job larger than every
    node takes free GPUs from nodes in index order."""

    name = "first-fit"

    def cannot_fit(self, gpus: int, histogram: list[int], nodes: np.ndarray, free: FreeResources) -> bool:
        """No node with the GPUs free, for a job that fits one (see ``SurelyFails``)."""
        return _no_node_with(histogram, gpus, partition_shape(nodes, free)[0])

    @_shared_rules("first")
    def find(self, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
        g = job.num_gpus
        fg = free.gpus[nodes]
        for i in np.flatnonzero(fg >= g).tolist():
            node = int(nodes[i])
            if _host_fits(job, node, free):
                return allocation_for(job, {node: g}, free)
        if g <= int(free.gpu_capacity[nodes].max()) or int(fg.sum()) < g:
            return None
        picked: dict[int, int] = {}
        need = g
        for i in np.flatnonzero(fg > 0).tolist():
            take = min(int(fg[i]), need)
            picked[int(nodes[i])] = take
            need -= take
            if need == 0:
                break
        return allocation_for(job, picked, free)


class Scattered:
    """Spread a job's GPUs one at a time over the nodes with the most free GPUs (worst
    fit): the opposite of consolidation, useful to measure what locality is worth."""

    name = "scattered"

    @_shared_rules("loose")
    def find(self, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
        g = job.num_gpus
        fg = free.gpus[nodes].copy()
        if int(fg.sum()) < g:
            return None
        picked: dict[int, int] = {}
        for _ in range(g):
            i = int(np.argmax(fg))  # first index among ties: deterministic
            fg[i] -= 1
            node = int(nodes[i])
            picked[node] = picked.get(node, 0) + 1
        return allocation_for(job, dict(sorted(picked.items())), free)


class Yarn:
    """The Tiresias reference simulator's default scheme (``ms_yarn`` in its ``switch.py``):
    a job that fits one node takes the first node, in index order, with enough free GPUs;
    a larger job takes ``g // per_node`` whole free nodes (first in index order) plus one
    more node, first in index order, for the remainder."""

    name = "yarn"

    def cannot_fit(self, gpus: int, histogram: list[int], nodes: np.ndarray, free: FreeResources) -> bool:
        """``find``'s early exits, on counts (see ``SurelyFails``): no node with the GPUs
        free; for a wider job on equal nodes, too few whole free nodes or no other node
        for the remainder."""
        per_node, uniform = partition_shape(nodes, free)
        if gpus <= per_node or gpus <= 0:
            return _no_node_with(histogram, gpus, per_node)
        if not uniform:
            return False
        full, rest = divmod(gpus, per_node)
        if histogram[per_node] < full:
            return True
        return rest > 0 and sum(histogram[rest:]) - full <= 0

    @_shared_rules("first")
    def find(self, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
        g = job.num_gpus
        fg = free.gpus[nodes]
        cap = free.gpu_capacity[nodes]
        per_node = int(cap.max())
        if g <= per_node:
            for i in np.flatnonzero(fg >= g).tolist():
                node = int(nodes[i])
                if _host_fits(job, node, free):
                    return allocation_for(job, {node: g}, free)
            return None
        whole = np.flatnonzero((fg == cap) & (cap > 0)).tolist()
        full, rest = divmod(g, per_node)
        if len(whole) < full:
            return None
        picked = {int(nodes[i]): int(cap[i]) for i in whole[:full]}
        if rest:
            others = [int(nodes[i]) for i in np.flatnonzero(fg >= rest).tolist() if int(nodes[i]) not in picked]
            last = others[0] if others else None
            if last is None:
                return None
            picked[last] = rest
        return allocation_for(job, dict(sorted(picked.items())), free)


PLACEMENTS: dict[str, Callable[[], Placement]] = {
    Consolidated.name: Consolidated,
    FirstFit.name: FirstFit,
    Scattered.name: Scattered,
    Yarn.name: Yarn,
    # FGD (policies/framework/fgd.py) for GPU-sharing clusters; jobs wider than a node
    # are consolidated.
    Fgd.name: lambda: Fgd(fallback=Consolidated().find),
}
