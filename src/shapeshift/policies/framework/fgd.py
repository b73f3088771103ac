"""``fgd``: Fragmentation Gradient Descent as a placement part, usable with any ordering.

FGD (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC'23) puts a job on the node, and for a fraction
of a GPU the GPU, whose placement least increases that node's fragmentation F_n(M) against
the target workload M. The score, the measure and M's coverage rule are those of the
authors' simulator (``pkg/simulator/plugin/fgd_score.go``, ``pkg/utils/frag.go`` of
hkust-adsl/kubernetes-scheduler-simulator), computed by ``shapeshift.gpushare.frag``, the
code ``shapeshift fill`` matches against that simulator (docs/fgd.md):

* score ``int(sigmoid((F_before - F_after) / 1000) * 100)``, highest wins;
* a fractional job tries every GPU of the node that holds its share and keeps the first
  with the highest score; a job of whole GPUs takes the lowest-numbered idle GPUs (the
  engine's own choice); a CPU-only job changes only the node's CPUs;
* M: the shapes (CPU milli, milli per GPU, GPUs, allowed types) covering 95% of the pods.

Where this part differs from the simulator (its ``fill`` replay knows the whole trace in
advance; a scheduler does not):

* M is estimated from the jobs this placement has been asked to place so far (each job
  once), rebuilt whenever that count has grown by ``REBUILD_GROWTH`` since the last build;
* node ties go to the lowest node index (the simulator's seeded name order is a replay
  artefact);
* a job wider than every node is placed by the ``fallback`` (another placement's ``find``) (openb has none).

Node state is read from the engine's free resources (``FreeResources.milli`` on a cluster
of fractional GPUs; elsewhere each idle GPU counts 1000 thousandths free).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from shapeshift.engine.state import FreeResources
from shapeshift.gpushare.frag import FragMeasure, scoring_cpu, typical_of_counts
from shapeshift.model import GPU_MILLI, Allocation, JobSpec, Resources
from shapeshift.policies.framework.gpu_shapes import eligible

#: Another placement's ``find``, for the jobs FGD does not place.
Find = Callable[[JobSpec, np.ndarray, FreeResources], "Allocation | None"]

#: Rebuild M once the jobs seen have grown by this factor since the last build (1%: a
#: few hundred rebuilds over a trace of thousands of jobs, each a millisecond or so).
REBUILD_GROWTH = 1.01
#: The simulator's ``podPopularityThreshold`` (scripts/generate_config_and_run.py).
COVERAGE = 95.0


def _sigmoid_score(delta_milli: np.ndarray) -> np.ndarray:
    """``int64(sigmoid(delta / 1000) * 100)`` (fgd_score.go)."""
    return np.trunc(1.0 / (1.0 + np.exp(-(delta_milli / 1000.0))) * 100).astype(np.int64)


class Fgd:
    """The FGD placement (see the module doc); one instance per policy (it learns M)."""

    name = "fgd"

    def __init__(self, fallback: Find | None = None) -> None:
        self.fallback = fallback
        self._seen: set[str] = set()
        self._counts: Counter[tuple[int, int, int, str]] = Counter()
        self._built_at = 0
        self._measure: FragMeasure | None = None
        self._models: tuple[str, ...] = ()
        self._model_of: np.ndarray | None = None

    # ------------------------------------------------------------ target workload
    def _learn(self, job: JobSpec, free: FreeResources) -> FragMeasure:
        if job.job_id not in self._seen:
            self._seen.add(job.job_id)
            cpu = int(scoring_cpu(np.array([round(job.num_cpus * 1000)]))[0])
            milli = 0 if not job.num_gpus else (job.gpu_milli or GPU_MILLI)
            self._counts[(cpu, milli, job.num_gpus, "|".join(sorted(job.gpu_types)))] += 1
        if self._model_of is None:
            types = free.node_types
            self._models = tuple(sorted({t for t, cap in zip(types, free.gpu_capacity.tolist(), strict=True) if cap}))
            index = {m: k for k, m in enumerate(self._models)}
            self._model_of = np.array([index.get(t, 0) for t in types], dtype=np.int64)
        if self._measure is None or len(self._seen) >= self._built_at * REBUILD_GROWTH:
            self._measure = FragMeasure(typical_of_counts(self._counts, COVERAGE), self._models)
            self._built_at = len(self._seen)
        return self._measure

    # --------------------------------------------------------------- placement
    @staticmethod
    def _left(free: FreeResources, nodes: np.ndarray) -> np.ndarray:
        """Thousandths free per GPU of ``nodes`` (absent GPUs as 0)."""
        if free.milli is not None:
            return np.maximum(free.milli[nodes], 0)
        width = max(int(free.gpu_capacity.max()), 1)
        return np.where(np.arange(width)[None, :] < free.gpus[nodes][:, None], GPU_MILLI, 0)

    def find(self, job: JobSpec, nodes: np.ndarray, free: FreeResources) -> Allocation | None:
        measure = self._learn(job, free)
        g = job.num_gpus
        nodes = eligible(job, nodes, free)
        if g > int(free.gpu_capacity.max(initial=0)):
            return None if self.fallback is None else self.fallback(job, nodes, free)
        share = job.gpu_milli if job.gpu_milli and free.milli is not None else 0
        left = self._left(free, nodes)
        # Where a GPU may take one more job (its job limit), for a fraction.
        usable = free.usable_milli(nodes) if share else left
        ok = (free.cpus[nodes] + 1e-9 >= job.num_cpus) & (free.mem[nodes] + 1e-9 >= job.mem_gb)
        if share:
            ok &= usable.max(axis=1) >= share
        elif g:
            ok &= (left == GPU_MILLI).sum(axis=1) >= g
        rows = np.flatnonzero(ok)
        if not len(rows):
            return None
        left, usable = left[rows], usable[rows]
        cpu_left = np.rint(free.cpus[nodes[rows]] * 1000).astype(np.int64)
        model = self._model_of[nodes[rows]]  # type: ignore[index]
        before = measure(cpu_left, left, model)
        cpu_after = cpu_left - int(scoring_cpu(np.array([round(job.num_cpus * 1000)]))[0])
        if share:
            k, w = left.shape
            after_left = np.repeat(left, w, axis=0).reshape(k, w, w)
            after_left[:, np.arange(w), np.arange(w)] -= share
            after = measure(np.repeat(cpu_after, w), after_left.reshape(k * w, w), np.repeat(model, w)).reshape(k, w)
            scores = np.where(usable >= share, _sigmoid_score(before[:, None] - after), -1)
            gpus = np.argmax(scores, axis=1)  # the first GPU with the highest score
            best = int(np.argmax(scores[np.arange(k), gpus]))  # the first node among ties
            node = nodes.item(rows[best])
            res = Resources(1, job.num_cpus, job.mem_gb)
            return Allocation(((node, res),), devices=((node, int(gpus[best])),), gpu_milli=share)
        after_left = left.copy()
        if g:
            idle = after_left == GPU_MILLI
            after_left[idle & (np.cumsum(idle, axis=1) <= g)] = 0
        scores = _sigmoid_score(before - measure(cpu_after, after_left, model))
        node = nodes.item(rows[int(np.argmax(scores))])
        plan = job.plan if job.plan is not None and job.plan.gpus == g else None
        return Allocation(((node, Resources(g, job.num_cpus, job.mem_gb)),), plan)
