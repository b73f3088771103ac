"""The Sia paper's heterogeneity-unaware Pollux baseline, as its artifact runs it.

Sia (Jayaram Subramanya et al., SOSP 2023) compares against Pollux run on a
heterogeneous cluster as if it were one type (siasosp23/artifacts, ``sia-simulator/``:
``multi_simulator_unaware.py`` with ``cluster_unaware.py`` and ``pollux_unaware.py``).
These rules make Pollux run there, and ``pollux``'s ``unaware`` parameter applies them:

* **virtual nodes** (``ClusterUnaware.__init__``, ``vnode_cluster_node_id_map``): every
  node is split into ``gpus // smallest`` virtual nodes of ``smallest`` GPUs, the
  smallest GPU count of any node (an 8-GPU node becomes two 4-GPU ones beside 4-GPU
  nodes); Pollux's optimisation and its one-distributed-job-per-node rule see only these;
* **one model across types** (``job.py``, ``h_unaware``): a job's throughput model is
  fitted on observations from whichever types it ran on, merged (``pollux``'s online
  model, :class:`shapeshift.perf.pollux.online.OnlineFits` with ``merged``); with
  ``goodput_model=offline`` (ours), on the rows of every type's profile present in the
  partition together (:meth:`GoodputKnowledge.job`, ``merged``);
* **GPUs per job** (``multi_simulator_unaware.py``, ``max_num_replicas``, and
  ``ClusterUnaware.get_unaware_job_info``): a job gets at most as many GPUs as the GPU
  type with fewest GPUs has (16 on the artifact's default cluster: 2 x 8 A100s), on top
  of Pollux's own limits (:func:`smallest_type`; ``unaware_cap``);
* **one batch range** (``Job.get_speedup_fn``, ``get_unaware_job_info``): the speedups
  search per-GPU batches over the measured range of one type's profile, ``aws`` in the
  artifact, whatever type the job runs on (:func:`reference_limits`; ``unaware_profile``);
* **majority type** (``fix_allocations_by_dropping``): an allocation that spans GPU types
  keeps only the GPUs of the type holding most of them (ties to the artifact's order of
  types, then by name) and drops the rest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from shapeshift.model import Allocation, Resources
from shapeshift.perf.pollux.profiles import MEMORY_LIMITS, app_name, load_profile

if TYPE_CHECKING:
    from shapeshift.perf.pollux.knowledge import JobGoodput

#: The artifact's tie-break between types holding equal GPU counts of one allocation
#: (``fix_allocations_by_dropping``, ``prio_order``): the first listed is kept.
ARTIFACT_TYPE_ORDER = ("dgx-ext", "azure", "quad", "rtx", "aws")


def virtual_nodes(capacity: Mapping[int, int]) -> dict[int, int]:
    """Virtual node id -> real node, each virtual node holding ``min(capacity)`` GPUs.

    A node contributes ``gpus // smallest`` virtual nodes (the artifact's
    ``int(num_gpus / min(num_gpus))``; GPUs beyond a multiple are left out, as there).
    Ids run over the real nodes in index order."""
    if not capacity:
        return {}
    size = min(capacity.values())
    result: dict[int, int] = {}
    for node in sorted(capacity):
        for _ in range(capacity[node] // size if size > 0 else 0):
            result[len(result)] = node
    return result


def to_virtual(
    real: Mapping[int, int], vnodes: Mapping[int, int], size: int, taken: Mapping[int, int]
) -> dict[int, int]:
    """A real placement (GPUs per node) laid on virtual nodes: each node's GPUs fill its
    virtual nodes in id order, skipping GPUs ``taken`` already holds there (a job whose
    virtual placement is not remembered)."""
    left = {v: size - taken.get(v, 0) for v in vnodes}
    place: dict[int, int] = {}
    for node, gpus in sorted(real.items()):
        need = gpus
        for v in sorted(v for v, n in vnodes.items() if n == node):
            if need == 0:
                break
            take = min(need, max(left[v], 0))
            if take:
                place[v] = take
                left[v] -= take
                need -= take
        if need:  # more than the virtual nodes hold: put the rest on the node's first
            first = min(v for v, n in vnodes.items() if n == node)
            place[first] = place.get(first, 0) + need
    return place


def majority_type(place: Mapping[int, int], vnodes: Mapping[int, int], gpu_type: Mapping[int, str]) -> dict[int, int]:
    """``place`` (GPUs per virtual node) reduced to the GPUs of one type: the type with
    most of them, ties to the artifact's order (:data:`ARTIFACT_TYPE_ORDER`, unknown types
    after it by name)."""
    counts: Counter[str] = Counter()
    for v, gpus in place.items():
        counts[gpu_type[vnodes[v]]] += gpus
    if len(counts) <= 1:
        return dict(place)

    def rank(name: str) -> tuple[int, int, str]:
        order = ARTIFACT_TYPE_ORDER.index(name) if name in ARTIFACT_TYPE_ORDER else len(ARTIFACT_TYPE_ORDER)
        return (-counts[name], order, name)

    keep = min(counts, key=rank)
    return {v: g for v, g in place.items() if gpu_type[vnodes[v]] == keep}


def to_real(place: Mapping[int, int], vnodes: Mapping[int, int]) -> dict[int, int]:
    """GPUs per real node of a virtual placement."""
    real: Counter[int] = Counter()
    for v, gpus in place.items():
        real[vnodes[v]] += gpus
    return dict(real)


def as_virtual(
    current: Mapping[str, Allocation | None],
    given: Mapping[str, tuple[Allocation, dict[int, int]]],
    vnodes: dict[int, int],
    size: int,
) -> dict[str, Allocation | None]:
    """Current allocations on virtual nodes: the virtual placement a job was given
    (``given[job] = (allocation, virtual placement)``) when its allocation is still that
    one, else its GPUs laid on its nodes' virtual nodes around those already held."""
    result: dict[str, Allocation | None] = {}
    taken: dict[int, int] = {}
    later = []
    for job_id, alloc in current.items():
        known = given.get(job_id)
        if alloc is None:
            result[job_id] = None
        elif known is not None and known[0] == alloc:
            result[job_id] = _virtual_allocation(known[1])
            for v, g in known[1].items():
                taken[v] = taken.get(v, 0) + g
        else:
            later.append(job_id)
    for job_id in later:
        alloc = current[job_id]
        assert alloc is not None
        place = to_virtual({n: r.gpus for n, r in alloc.placement}, vnodes, size, taken)
        for v, g in place.items():
            taken[v] = taken.get(v, 0) + g
        result[job_id] = _virtual_allocation(place)
    return result


def _virtual_allocation(place: dict[int, int]) -> Allocation:
    """A placement on virtual node ids, in the shape ``keep_or_pack`` and the genetic
    search's current state read."""
    return Allocation(tuple((v, Resources(g, 0.0, 0.0)) for v, g in sorted(place.items())))


def smallest_type(nodes: Mapping[int, tuple[str, int]]) -> int:
    """The fewest GPUs any one GPU type has over ``nodes`` (node -> (type, GPUs)): the
    artifact's limit on one job's GPUs (``min`` over types of the type's GPUs)."""
    total: Counter[str] = Counter()
    for gpu_type, gpus in nodes.values():
        total[gpu_type] += gpus
    return min(total.values()) if total else 0


def reference_limits(table: JobGoodput, root: str, model: str, gpu_type: str) -> JobGoodput:
    """``table`` with the per-GPU batch range measured in ``gpu_type``'s profile of the
    job's application: its smallest and largest local batch (the Sia artifact's
    ``Application`` limits, which take no per-application cap but its memory limits), as
    the artifact's unaware speedups read them from ``applications['aws']``. Unchanged
    where ``gpu_type`` is empty or has no profile of its own."""
    profile = load_profile(root, app_name(model), gpu_type) if gpu_type else None
    if profile is None or profile.gpu_type is None:
        return table
    largest = int(max(r.local_bsz for r in profile.rows))
    largest = min(largest, MEMORY_LIMITS.get((profile.name, gpu_type), largest))
    smallest = min(profile.min_local, largest)
    return replace(table, limits=replace(table.limits, min_local=smallest, max_local=largest))
