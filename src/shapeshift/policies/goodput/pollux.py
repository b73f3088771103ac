"""``pollux``: goodput-optimised co-adaptive scheduling (GPU counts and batch sizes).

Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning", OSDI 2021), as its artifact's simulator runs it (petuum/adaptdl, branch
``osdi21-artifact``, ``simulator/pollux.py``, ``simulator/simulator.py``). Every round
(``round``, default 60 s: the artifact simulator's ``--interval 60``), for the jobs of a partition:

* **speedup** of job j on ``r`` GPUs over ``k`` nodes = its best goodput there (batch
  size chosen to maximise throughput x statistical efficiency, PolluxAgent, §4.1;
  ``best_batch``)
  divided by its goodput at the fair share ``ceil(GPUs / jobs)`` on one node (artifact
  ``Problem.__init__``: "change base goodput to fair-share goodput"), scaled by
  ``nodes / GPUs`` (one node's share = 1);
* **restart penalty** (PolluxSched, §4.2; ``Problem._evaluate``): a job whose allocation changes has its
  speedup multiplied by ``max(age - restarts x restart_delay, 0) / (age + restart_delay)``
  (``restart_delay`` = 30 s, the artifact's figure); with ``unaware``, a move to other nodes of the
  same type and GPUs per node is no restart (the Sia artifact's ``Job.reallocate``; ``restart_count``);
* **objective**: the power mean of the (speedup + 1e-3) with exponent ``p`` (§4.2;
  ``p = -1`` in the artifact); jobs left without GPUs count with speedup 0;
* **limits**: a job gets at most twice the largest replica count it has run on
  (``explore``; artifact ``get_pollux_job_info``: ``max(2 x max_profiled_replicas, 1)``),
  at most ``max_replicas`` (64) and ``max_batch / min_local``; a fixed-batch job (NCF in
  the workload) at most its request (the artifact pins NCF at one replica);
* **placement** (§4.2, ``Problem._repair``): at most one distributed job per node, jobs
  packed on as few nodes as possible.

Search (``search=genetic``, the default): the artifact's genetic search (NSGA-II, 100
states x 100 generations a round; :mod:`.genetic`: ``population``, ``generations``,
warm-started from the partition's last result, its final population's first front, its
randomness from ``seed``): each state values a job on the nodes and GPUs it gives it
(``Problem._get_job_speedups``: its speedup on ``count_nonzero`` nodes), a job restarts
when its placement changes, and the state found is the allocation, its placement
included. ``genetic_value=packed`` (ours) values a job at its count packed and places the
counts as ``search=exact`` does.

``search=exact`` (ours, about a tenth of the CPU): the objective is a sum of per-job
terms of the GPU count once a job's node count is that of packed placement
(``ceil(r / GPUs per node)``), so a knapsack over GPU counts (:func:`solve`) finds its
optimum exactly. Placement then keeps every job whose count is unchanged where it is and
packs the rest largest first, one distributed job per node; a job that does not fit
takes the largest count that does (brute force agrees on small clusters, ``test_pollux.py``).
It finds better states than the genetic search (docs/sia-artifact.md).

**What a job knows of its speed** (``goodput_model=online``): as in the artifact
(``simulator.py``, ``Job.update_params``), each job's own throughput model, fitted on the
step times of every distinct (nodes, replicas, per-GPU batch) it has run, refitted after
each new one (:mod:`shapeshift.perf.pollux.online`, with scipy's default tolerance as the
artifact's ``fit_perf_params``); before its first observation its speedup is linear in
its GPUs (``Job.get_speedup_fn``: ``r`` over the fair share's ``r``) and it starts at its
initial batch, or its smallest per-GPU batch on every GPU (``Job.update_local_bsz``).
``goodput_model=offline`` (ours) gives every job its application's model fitted on the
whole ``placements.csv`` instead.

**Batch**: a job runs at the best batch for its model on its GPUs, re-chosen after every
epoch it completes, not only each round (``Job.step``: "Re-scale batch size between
epochs"; ``batch_retune=epoch``, :mod:`.epochs`, whose rows its model records);
``batch_retune=round`` (ours) re-chooses it once per round. Both the speedups and the
batch search candidates as both artifacts' ``GoodputFunction.optimize`` does: each GPU's
share rounded up and only the per-GPU batch checked, so a candidate may pass the largest
batch (the job then runs it cut back to the largest; ``batch_overshoot``, on; off, ours,
drops such candidates), with the candidate's accumulation steps and a smaller per-GPU
batch (``update_local_bsz``; ``batch_cut``, :func:`.epochs.cut_back`).

``unaware=true`` runs the Sia paper's heterogeneity-unaware baseline on a cluster of
several GPU types (:mod:`.unaware`); off, as in the Pollux artifact, whose clusters have
one type. Its online model merges a job's rows across types and is fitted with the Sia
artifact's tolerance (``job.py``, ``h_unaware``; ``goodput.py``, ``tol=1e-5``); a job gets
at most the GPUs of the type with fewest (``unaware_cap``), and its speedups assume one
type's per-GPU batch range, ``aws``'s in the artifact (``unaware_profile``). A job whose
workload fixes its batch (NCF) has it tuned up to the fixed one on at most the GPUs it
asked for, as the Sia artifact builds every job with batch tuning on (``cluster_unaware.py``,
``ClusterUnaware.__init__``, ``get_unaware_job_info``; ``fixed_batch``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from shapeshift.engine.contract import PolicyTraits
from shapeshift.engine.fractions import allowed_nodes
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, JobSpec, Resources, Schedule
from shapeshift.perf.pollux.knowledge import GoodputKnowledge, JobGoodput, shape_pairs
from shapeshift.perf.pollux.online import FIT_TOL, POLLUX_FIT_TOL, OnlineFits
from shapeshift.policies.framework.base import ROUND
from shapeshift.policies.framework.registry import register
from shapeshift.policies.goodput.common import decide_partitions, keep_or_pack
from shapeshift.policies.goodput.epochs import (
    EpochRetuner,
    Shape,
    decide_between_epochs,
    own_batch,
    round_batch,
    running_batch,
    tuned,
)
from shapeshift.policies.goodput.genetic import MAX_NODES, GeneticSearch, Values, Warm, adapt
from shapeshift.policies.goodput.pollux_knapsack import power_utility, solve
from shapeshift.policies.goodput.pollux_params import PolluxParams
from shapeshift.policies.goodput.sia_placement import same_shape_move
from shapeshift.policies.goodput.unaware import (
    as_virtual,
    majority_type,
    reference_limits,
    smallest_type,
    to_real,
    virtual_nodes,
)


@dataclass
class _Job:
    job_id: str
    table: JobGoodput
    current: Allocation | None
    max_r: int
    factor: float
    #: Rigid: runs on exactly ``max_r`` GPUs or not at all (no batch to adapt, no model).
    rigid: bool = False


class PolluxPolicy:
    name = "pollux"
    triggers = frozenset({ROUND})
    #: Pollux allocates whole GPUs: a job asking for a fraction of one gets a whole GPU
    #: (ours; Pollux has no fractions).
    traits = PolicyTraits(whole_gpus=True)

    def __init__(self, params: PolluxParams):
        self.params = params
        self.default_round = params.round
        self.knowledge = GoodputKnowledge(params.profiles)
        root = self.knowledge.root
        tol = FIT_TOL if params.unaware else POLLUX_FIT_TOL
        wants_online = params.goodput_model == "online"
        self.online = OnlineFits(root, tol, merged=True) if wants_online and root is not None else None
        self.retuner = EpochRetuner(self.knowledge, self.online, self._batch)
        #: Largest replica count each job was given (the exploration limit offline; online,
        #: the most it has run on, as the artifact's ``max_profiled_replicas``).
        self._seen: dict[str, int] = {}
        #: ``unaware``: the GPU types each job's merged model spans.
        self._merged: dict[str, tuple[str, ...]] = {}
        #: ``unaware``: each job's allocation and the virtual placement it was given as.
        self._virtual: dict[str, tuple[Allocation, dict[int, int]]] = {}
        #: ``search=genetic``: each partition's final population, and the search's randomness.
        self._warm: dict[str, Warm] = {}
        self._rng = np.random.default_rng(params.seed)
        #: Per job, moves that are no restart in the Sia artifact's count (``restart_count``).
        self._free_moves: dict[str, int] = {}
        self._view: ClusterView | None = None

    def decide(self, view: ClusterView) -> Schedule:
        self._view = view
        if self.params.batch_retune == "round" or self.knowledge.root is None:
            return decide_partitions(view, self._decide_partition, self._seen)
        return decide_between_epochs(
            view, self.retuner, lambda v: decide_partitions(v, self._decide_partition, self._seen)
        )

    def _batch(self, spec: JobSpec, batch_now: int | None, progress: float, gpu_type: str, shape: Shape) -> int:
        """The batch ``spec`` runs at on ``shape`` (GPUs per node of ``gpu_type``): the best
        for its own model (:func:`.epochs.own_batch`, each GPU's batch within what its
        placement measured, as the Sia artifact's ``update_local_bsz``), offline the best
        for its application's model."""
        cap = not self.params.batch_overshoot
        spec = self._as_run(spec)
        if self.online is not None:
            batch_now = self._running(spec.job_id, batch_now)
            cut = self.params.batch_cut
            return own_batch(self.knowledge, self.online, spec, batch_now, progress, gpu_type, shape, True, cap, cut)
        table = self.knowledge.job(spec, batch_now, progress, merged=self._merged.get(spec.job_id))
        return int(replace(table, cap_total=cap).best(len(shape), sum(shape))[1][0])

    def _as_run(self, spec: JobSpec) -> JobSpec:
        """``spec`` with its batch tuned where the source tunes it (``fixed_batch``)."""
        if self.params.unaware and self.params.fixed_batch == "tune":
            return tuned(spec)
        return spec

    @staticmethod
    def _repack(jobs: list[_Job], gpn: int) -> Callable[[str, int, int], bool]:
        """Whether a job spread on ``now`` nodes gains by moving to ``tight``: its goodput
        on its GPUs over ``tight`` nodes times its restart factor above that over ``now``
        (before its first run its speedup is linear, so it never moves)."""
        by_id = {j.job_id: j for j in jobs}

        def better(job_id: str, now: int, tight: int) -> bool:
            job = by_id[job_id]
            r = job.current.gpus if job.current is not None else 0
            if job.table.params is None or not 0 < r <= job.max_r:
                return False
            good = job.table.by_shape(gpn, job.max_r, now)
            return bool(good[tight, r] * job.factor > good[now, r])

        return better

    def _running(self, job_id: str, batch: int | None) -> int | None:
        """With ``batch_cut=artifact``, the batch ``job_id``'s current allocation runs at
        when ``batch`` is the one it was handed (they differ for a batch cut back)."""
        alloc = self._view.allocations.get(job_id) if self._view is not None else None
        if self.params.batch_cut != "artifact" or alloc is None or batch is None or alloc.batch_size != batch:
            return batch
        gpu_type = self._view.cluster.nodes[alloc.placement[0][0]].gpu_type
        return running_batch(self.knowledge, self._view.job(job_id).spec, alloc, gpu_type)

    def _jobs(
        self,
        view: ClusterView,
        part: str,
        total: int,
        merged: tuple[str, ...] | None = None,
        type_cap: int | None = None,
    ) -> list[_Job]:
        """The partition's jobs in the artifact's order, each with its goodput table, GPU
        limit and restart factor. ``merged``: the types one unaware model spans;
        ``type_cap``: the unaware GPU limit of ``unaware_cap=type``."""
        ids = list(view.running(part)) + list(view.pending(part))
        # The artifact orders jobs by attained service, then submission (PolluxPolicy.optimize).
        ids.sort(key=lambda j: (view.attained(j), view.job(j).spec.submit_time, j))
        jobs = []
        for job_id in ids:
            status = view.job(job_id)
            spec = self._as_run(status.spec)
            pinned = spec is not status.spec  # a fixed batch tuned: its GPUs stay its request
            current = status.allocation
            batch_now = self._running(job_id, current.batch_size) if current is not None else None
            progress = status.progress_at(view.now)
            if merged:
                self._merged[job_id] = merged
                table = self.knowledge.job(spec, batch_now, progress, merged=merged)
                if self.knowledge.root is not None and spec.batch is not None and spec.batch.adaptive:
                    table = reference_limits(table, self.knowledge.root, spec.model, self.params.unaware_profile)
            else:
                table = self.knowledge.job(spec, batch_now, progress)
            table = replace(table, cap_total=not self.params.batch_overshoot)
            rigid = table.params is None
            seen = self._seen.get(job_id, 0)
            if self.online is not None and not rigid:
                if current is not None and status.stall_until < view.now:  # it ran since its pause
                    self.online.observe(spec, current, view.cluster.nodes[current.placement[0][0]].gpu_type)
                # Its own model; None before its first observation: linear speedup.
                table = replace(table, params=self.online.params(job_id, ""))
                seen = self.online.max_replicas(job_id)
            cap = min(self.params.max_replicas, total, type_cap or total)
            if self.params.explore:
                cap = min(cap, max(2 * seen, 1))
            if rigid:  # nothing to adapt: its request or nothing
                cap = max(min(spec.num_gpus, total), 1)
            elif pinned:
                cap = min(cap, max(spec.num_gpus, 1))
            elif spec.batch is not None and spec.batch.adaptive:
                cap = min(cap, spec.batch.max_size // spec.batch.min_local)
            else:
                cap = min(cap, max(spec.num_gpus, 1))
            age = view.now - spec.submit_time
            restarts = status.reconfigurations + status.preemptions - self._free_moves.get(job_id, 0)
            d = self.params.restart_delay
            factor = max(age - restarts * d, 0.0) / (age + d) if age + d > 0 else 1.0
            jobs.append(_Job(job_id, table, current, max(cap, 1), factor, rigid))
        return jobs

    def speedups(self, jobs: list[_Job], total: int, gpn: int) -> list[np.ndarray]:
        """Per job, its speedup over the fair share (``ceil(total / jobs)`` GPUs on one
        node) on 0..max_r GPUs packed on ceil(r / gpn) nodes."""
        fair = math.ceil(total / max(len(jobs), 1))
        cols = max(total, fair)
        result = []
        for job in jobs:
            r = np.arange(1, job.max_r + 1)
            good, _ = job.table.table(gpn, cols)
            base = good[cols + fair - 1]
            speed = good[: job.max_r] / base if base > 0 else r / fair
            result.append(np.concatenate([[0.0], speed]))
        return result

    def shape_speedups(self, jobs: list[_Job], total: int, gpn: int, max_nodes: int) -> list[np.ndarray]:
        """Per job, ``out[k, r]``: its speedup over the fair share on r GPUs spread over k
        nodes (0 where k nodes of ``gpn`` GPUs cannot hold r): the artifact's
        ``speedup_fn(num_nodes, num_replicas)``."""
        fair = math.ceil(total / max(len(jobs), 1))
        cols = max(total, fair)
        result = []
        for job in jobs:
            good = job.table.by_shape(gpn, job.max_r, max_nodes)
            base = job.table.table(gpn, cols)[0][cols + fair - 1]
            if base > 0:
                result.append(good / base)
            else:
                k, r = shape_pairs(gpn, job.max_r, max_nodes)
                out = np.zeros_like(good)
                out[k, r] = r / fair
                result.append(out)
        return result

    def utilities(self, jobs: list[_Job], total: int, nodes: int, gpn: int) -> list[np.ndarray]:
        """Per job, the objective term for 0..max_r GPUs packed on ceil(r / gpn) nodes."""
        result = []
        for job, speed in zip(jobs, self.speedups(jobs, total, gpn), strict=True):
            x = speed * nodes / total
            cur = job.current.gpus if job.current is not None else 0
            changed = np.arange(job.max_r + 1) != cur
            x = np.where(changed, x * job.factor, x)
            u = power_utility(x, self.params.p)
            if job.rigid:
                u[1 : job.max_r] = -np.inf
            result.append(u)
        return result

    def _decide_partition(
        self, view: ClusterView, part: str, desired: dict[str, Allocation], reasons: dict[str, str]
    ) -> None:
        nodes = [int(n) for n in view.partitions[part]]
        caps = {n: view.cluster.nodes[n].gpus for n in nodes}
        vnodes = virtual_nodes(caps) if self.params.unaware else None
        merged = tuple(sorted({view.cluster.nodes[n].gpu_type for n in nodes})) if vnodes is not None else None
        if vnodes is not None:  # the optimisation sees virtual nodes only
            size = min(caps.values())
            caps_seen = dict.fromkeys(vnodes, size)
        else:
            caps_seen = caps
        gpn = max(caps_seen.values())
        total = sum(caps_seen.values())
        type_cap = None
        if vnodes is not None and self.params.unaware_cap == "type":
            type_cap = smallest_type({n: (view.cluster.nodes[n].gpu_type, caps[n]) for n in nodes})
        jobs = self._jobs(view, part, total, merged, type_cap)
        if not jobs:
            return
        current = {j.job_id: j.current for j in jobs}
        if vnodes is not None:
            current = as_virtual(current, self._virtual, vnodes, size)
        types = view.free().node_types
        specs = {j.job_id: view.job(j.job_id).spec for j in jobs}
        allowed = {j: allowed_nodes(spec, nodes, types) for j, spec in specs.items() if spec.gpu_types}
        if vnodes is not None:  # a typed job's virtual nodes are those of its allowed real nodes
            allowed = {j: [v for v, n in vnodes.items() if n in set(ok)] for j, ok in allowed.items()}
        found: dict[str, dict[int, int]] | None = None
        if self.params.search == "genetic":
            found = self._genetic(part, jobs, current, caps_seen, gpn, allowed)
            counts = [sum(found[j.job_id].values()) for j in jobs]
        else:
            counts = solve(self.utilities(jobs, total, len(caps_seen), gpn), total)
        if found is not None and self.params.genetic_value == "placement":
            placed = {j: place for j, place in found.items() if place}
        else:
            wanted = {job.job_id: (r, current[job.job_id]) for job, r in zip(jobs, counts, strict=True)}
            rigid = frozenset(j.job_id for j in jobs if j.rigid)
            repack = self._repack(jobs, gpn) if self.params.repack else None
            placed = keep_or_pack(wanted, [j.job_id for j in jobs], caps_seen, rigid, allowed, repack)
        for job in jobs:
            desired.pop(job.job_id, None)
            self._virtual.pop(job.job_id, None)
            place = placed.get(job.job_id)
            vplace: dict[int, int] = {}
            if place and vnodes is not None:
                kept = majority_type(place, vnodes, {n: view.cluster.nodes[n].gpu_type for n in nodes})
                if job.rigid and sum(kept.values()) < sum(place.values()):
                    kept = {}
                vplace, place = kept, to_real(kept, vnodes)
            if not place:
                reasons[job.job_id] = "no GPUs in this round's goodput optimisation"
                continue
            status = view.job(job.job_id)
            spec = self._as_run(status.spec)
            adaptive = spec.batch is not None and spec.batch.adaptive
            batch = None
            if adaptive:
                batch = round_batch(view, status, view.cluster.nodes[min(place)].gpu_type, place, self._batch)
            per_gpu = (spec.num_cpus / spec.num_gpus, spec.mem_gb / spec.num_gpus) if spec.num_gpus else (0.0, 0.0)
            alloc = Allocation(
                tuple((n, Resources(g, per_gpu[0] * g, per_gpu[1] * g)) for n, g in sorted(place.items())),
                batch_size=batch,
            )
            if self._free_move(view, job.current, alloc):
                self._free_moves[job.job_id] = self._free_moves.get(job.job_id, 0) + 1
            desired[job.job_id] = job.current if alloc == job.current else alloc
            if vnodes is not None:
                self._virtual[job.job_id] = (desired[job.job_id], vplace)

    def _free_move(self, view: ClusterView, current: Allocation | None, alloc: Allocation) -> bool:
        """Whether moving from ``current`` to ``alloc`` is no restart in the restart
        factor's count (``restart_count``)."""
        if not (self.params.unaware and self.params.restart_count == "artifact") or current is None:
            return False
        return same_shape_move(view, current, alloc)

    def _genetic(
        self,
        part: str,
        jobs: list[_Job],
        current: dict[str, Allocation | None],
        caps: dict[int, int],
        gpn: int,
        allowed: dict[str, list[int]],
    ) -> dict[str, dict[int, int]]:
        """GPUs per node for each job from the artifact's genetic search (:mod:`.genetic`),
        warm-started from this partition's previous result (its final front)."""
        total = sum(caps.values())
        ids, nodes = tuple(j.job_id for j in jobs), tuple(sorted(caps))
        max_nodes = min(MAX_NODES, len(nodes))
        width = max(j.max_r for j in jobs) + 1
        speed = np.zeros((len(jobs), max_nodes + 1, width))
        packed = self.params.genetic_value == "packed"
        if packed:  # every node count valued as the packed one
            for i, s in enumerate(self.speedups(jobs, total, gpn)):
                speed[i, :, : len(s)] = s
        else:
            for i, s in enumerate(self.shape_speedups(jobs, total, gpn, max_nodes)):
                speed[i, :, : s.shape[1]] = s
        values = Values(
            speed * len(nodes) / total,
            speed,
            np.array([j.factor for j in jobs]),
            np.array([j.max_r for j in jobs]),
            np.array([j.rigid for j in jobs], dtype=bool),
            by_count=packed,
        )
        col = {n: i for i, n in enumerate(nodes)}
        base = np.zeros((len(jobs), len(nodes)), dtype=np.int64)
        mask = np.ones((len(jobs), len(nodes)), dtype=bool)
        for i, job_id in enumerate(ids):
            alloc = current[job_id]
            for n, res in alloc.placement if alloc is not None else ():
                if n in col:
                    base[i, col[n]] += res.gpus
            if job_id in allowed:
                mask[i] = [n in set(allowed[job_id]) for n in nodes]
        warm = self._warm.get(part)
        start = adapt(warm, ids, nodes, self.params.genetic_warm == "position") if warm is not None else None
        search = GeneticSearch(self.params.population, self.params.generations, self._rng)
        caps_arr = np.array([caps[n] for n in nodes])
        best, pop = search.search(values, base, caps_arr, start, self.params.p, None if mask.all() else mask)
        self._warm[part] = Warm(pop, ids, nodes)
        return {job_id: {nodes[c]: int(g) for c, g in enumerate(best[i]) if g} for i, job_id in enumerate(ids)}


@register(
    "pollux",
    "Pollux: GPU counts and batch sizes maximising the power mean of goodput speedups.",
    PolluxParams,
    speed_models=("pollux", "pollux-calibrated"),
    speed_note="chooses batch sizes for goodput (throughput x statistical efficiency), and only the pollux "
    "profiles model statistical efficiency: here a batch size changes no job's progress",
)
def make_pollux(params: PolluxParams) -> PolluxPolicy:
    return PolluxPolicy(params)
