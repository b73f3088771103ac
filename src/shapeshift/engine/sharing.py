"""Shared GPUs: which jobs hold which GPU, and how much of its memory.

The engine allocates whole GPUs by count (``FreeResources``) as long as a cluster allows
one job per GPU. When its ``gpu_share_limit`` is above 1 the engine also keeps this
ledger, which knows GPU identity: every running job's GPUs as ``(node, gpu)`` pairs, the
jobs on each GPU and the GPU memory each uses. An allocation that names GPUs
(``Allocation.devices``) may then join GPUs other jobs hold, within two hard limits:

* at most ``gpu_share_limit`` jobs on one GPU;
* the memory of the jobs on a GPU within its ``NodeSpec.gpu_mem_gb``. A job that declares
  no memory (``Allocation.gpu_mem_gb is None``) uses the whole GPU, so nobody can join it
  and it can join nobody: exclusive by default.

On a cluster with ``gpu_fractions`` a third limit joins them: a job may ask for a share of
one GPU (``Allocation.gpu_milli``, thousandths), and the shares on a GPU sum to at most one
GPU, a whole-GPU job counting as all of it. A fractional job that declares no memory uses
the same share of the GPU's memory.

An allocation that names no GPUs gets the lowest-numbered empty GPUs of its nodes, or for
a fraction the fullest GPU that still holds it (``shapeshift.engine.fractions``), so
policies that think in counts keep working unchanged on a sharing cluster.
``FreeResources.gpus`` keeps counting *empty* GPUs. The ledger is arithmetic on state
only; the speed partners lose to each other is the executor's business
(``shapeshift.perf.colocation``).

Why a ledger separate from ``FreeResources``: count-based placement is the hot path of
every exclusive policy, and a cluster without sharing never builds this object.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from shapeshift.engine.fractions import choose_gpus
from shapeshift.engine.state import JobStatus
from shapeshift.model import GPU_MILLI, Allocation, ClusterSpec, JobSpec
from shapeshift.wording import count

#: Slack for floating-point memory sums (GB).
_MEM_EPS = 1e-9

Device = tuple[int, int]


class GpuLedger:
    """Jobs and memory per GPU of every node (mutable; owned by the engine)."""

    def __init__(self, cluster: ClusterSpec):
        # On a cluster of fractional GPUs a job limit of 1 means "not set": the shares
        # alone bound a GPU (every job holds at least one thousandth of it).
        fractions_only = cluster.gpu_fractions and cluster.gpu_share_limit == 1
        self.limit = GPU_MILLI if fractions_only else cluster.gpu_share_limit
        self.gpu_mem = [node.gpu_mem_gb for node in cluster.nodes]
        #: ``holders[node][gpu]`` = {job id: GPU memory it uses there}, in arrival order.
        self.holders: list[list[dict[str, float]]] = [[{} for _ in range(n.gpus)] for n in cluster.nodes]
        self.devices: dict[str, tuple[Device, ...]] = {}
        self.statuses: dict[str, JobStatus] = {}
        #: Per node, how many times a job joined or left one of its GPUs: a policy that
        #: derives something from the holders of a set of nodes recomputes it only when
        #: their sum moved.
        self.node_changes = [0] * len(cluster.nodes)
        #: Whether shares of a GPU are counted (``ClusterSpec.gpu_fractions``), and the
        #: thousandths taken on each GPU.
        self.fractions = cluster.gpu_fractions
        self.used_milli: list[list[int]] = [[0] * n.gpus for n in cluster.nodes]
        self._milli: dict[str, int] = {}

    # ------------------------------------------------------------ questions
    def memory_of(self, node: int, alloc: Allocation) -> float:
        if alloc.gpu_mem_gb is not None:
            return alloc.gpu_mem_gb
        if alloc.gpu_milli is not None:
            return self.gpu_mem[node] * alloc.gpu_milli / GPU_MILLI
        return self.gpu_mem[node]

    @staticmethod
    def milli_of(alloc: Allocation) -> int:
        """Thousandths of each of its GPUs an allocation takes (a whole GPU: all of it)."""
        return alloc.gpu_milli if alloc.gpu_milli is not None else GPU_MILLI

    def free_milli(self, node: int) -> list[int]:
        """Thousandths free on each GPU of ``node`` that may take one more job (-1 where
        the job limit is reached)."""
        return [
            GPU_MILLI - used if len(held) < self.limit else -1
            for used, held in zip(self.used_milli[node], self.holders[node], strict=True)
        ]

    def problem(self, alloc: Allocation) -> str:
        """Why ``alloc``'s named GPUs cannot take it now ("" = they can). A fractional
        allocation that names no GPUs is checked on the GPU it would get."""
        if alloc.devices is None:
            if alloc.gpu_milli is None or not self.fractions or self._pick(alloc) is not None:
                return ""
            node = next(n for n, r in alloc.placement if r.gpus)
            return f"no GPU of node {node} has {alloc.gpu_milli} thousandths free"
        for node, gpu in alloc.devices:
            if node >= len(self.holders) or gpu >= len(self.holders[node]):
                return f"names GPU {gpu} of node {node}, which does not exist"
            held = self.holders[node][gpu]
            if len(held) >= self.limit:
                return f"GPU {gpu} of node {node} already holds {count(len(held), 'job')} (limit {self.limit})"
            used = sum(held.values()) + self.memory_of(node, alloc)
            if used > self.gpu_mem[node] + _MEM_EPS:
                return f"GPU {gpu} of node {node} would need {used:g} GB of its {self.gpu_mem[node]:g} GB memory"
            if self.fractions and self.used_milli[node][gpu] + self.milli_of(alloc) > GPU_MILLI:
                share = self.used_milli[node][gpu] + self.milli_of(alloc)
                return f"GPU {gpu} of node {node} would be {share / GPU_MILLI:g} GPUs full"
        return ""

    def occupants(self, node: int, gpu: int) -> tuple[str, ...]:
        return tuple(self.holders[node][gpu])

    def free_memory(self, node: int, gpu: int) -> float:
        return self.gpu_mem[node] - sum(self.holders[node][gpu].values())

    def partners(self, job_id: str) -> Iterator[list[JobStatus]]:
        """Per GPU of the job, the other jobs on it that may slow it. None on a cluster of
        fractional GPUs: each job holds its own share there (a quota, as GPU-sharing
        clusters enforce it), and its recorded duration was measured at that share."""
        if self.fractions:
            return
        for node, gpu in self.devices.get(job_id, ()):
            yield [self.statuses[j] for j in self.holders[node][gpu] if j != job_id]

    def share_rates(self, job_id: str) -> tuple[float, float] | None:
        """``(GPU-s per s counted beyond once, GPU-s per s on shared GPUs counted once)``
        for a job that shares a GPU; ``None`` when it holds all its GPUs alone.

        A GPU with ``k`` jobs is counted ``1/k`` for each, so summing over jobs counts
        every GPU once (utilisation) and the rest is the overcount.
        """
        over = once = 0.0
        for node, gpu in self.devices.get(job_id, ()):
            k = len(self.holders[node][gpu])
            if k > 1:
                over += 1.0 - 1.0 / k
                once += 1.0 / k
        return (over, once) if once > 0 else None

    # -------------------------------------------------------------- changes
    def take(self, status: JobStatus, alloc: Allocation) -> tuple[dict[int, int], list[str]]:
        """Record ``alloc`` for the job: (GPUs it makes non-empty per node, jobs it joins)."""
        devices = alloc.devices if alloc.devices is not None else self._pick(alloc)
        assert devices is not None, "take() of an allocation that problem() refuses"
        milli = self.milli_of(alloc)
        newly: dict[int, int] = {}
        joined: list[str] = []
        job_id = status.job_id
        for node, gpu in devices:
            held = self.holders[node][gpu]
            if held:
                joined.extend(held)
            else:
                newly[node] = newly.get(node, 0) + 1
            held[job_id] = self.memory_of(node, alloc)
            self.used_milli[node][gpu] += milli
            self.node_changes[node] += 1
        self.devices[job_id] = devices
        self._milli[job_id] = milli
        self.statuses[job_id] = status
        return newly, joined

    def give(self, job_id: str) -> tuple[dict[int, int], list[str]]:
        """Forget the job's GPUs: (GPUs it leaves empty per node, jobs it leaves behind)."""
        emptied: dict[int, int] = {}
        left: list[str] = []
        milli = self._milli.pop(job_id)
        for node, gpu in self.devices.pop(job_id):
            held = self.holders[node][gpu]
            del held[job_id]
            self.used_milli[node][gpu] -= milli
            self.node_changes[node] += 1
            if held:
                left.extend(held)
            else:
                emptied[node] = emptied.get(node, 0) + 1
        del self.statuses[job_id]
        return emptied, left

    def _pick(self, alloc: Allocation) -> tuple[Device, ...] | None:
        if alloc.gpu_milli is not None and self.fractions:
            node = next(n for n, r in alloc.placement if r.gpus)
            chosen = choose_gpus(self.free_milli(node), 1, alloc.gpu_milli)
            return None if chosen is None else ((node, chosen[0]),)
        devices: list[Device] = []
        for node, res in alloc.placement:
            wanted = res.gpus
            for gpu, held in enumerate(self.holders[node]):
                if wanted == 0:
                    break
                if not held:
                    devices.append((node, gpu))
                    wanted -= 1
        return tuple(devices)


def never_fits_shaped(cluster: ClusterSpec, nodes: Iterable[int], spec: JobSpec, where: str) -> str:
    """Why a job with a GPU-type constraint or a fraction of a GPU, or any job on a
    cluster of fractional GPUs, can never run on ``nodes`` ('' if it can): no node of an
    allowed type, too few GPUs of those types, or no allowed node with the job's GPUs, CPUs
    and memory where the job must sit on one node: a fraction of a GPU, and every job of a
    cluster of fractional GPUs, whose jobs are Kubernetes pods (openb)."""
    allowed = [cluster.nodes[n] for n in nodes if spec.allows(cluster.nodes[n].gpu_type) and cluster.nodes[n].gpus]
    if spec.num_gpus and not allowed:
        types = ", ".join(sorted(spec.gpu_types))
        have = ", ".join(sorted({cluster.nodes[n].gpu_type for n in nodes if cluster.nodes[n].gpus}))
        return f"asks for GPU type {types} but the cluster{where} has only {have or 'no GPUs'}"
    total = sum(node.gpus for node in allowed)
    if spec.num_gpus > total:
        types = ", ".join(sorted(spec.gpu_types))
        return f"needs {count(spec.num_gpus, 'GPU')} of type {types} but the cluster{where} has {total}"
    if spec.gpu_milli or cluster.gpu_fractions:
        hosts = allowed if spec.num_gpus else [cluster.nodes[n] for n in nodes]
        if not any(n.gpus >= spec.num_gpus and n.cpus >= spec.num_cpus and n.mem_gb >= spec.mem_gb for n in hosts):
            gpus = f"{count(spec.num_gpus, 'GPU')}, " if spec.num_gpus else ""
            return f"no node{where} has its {gpus}{spec.num_cpus:g} CPUs and {spec.mem_gb:g} GB (a pod takes one node)"
    return ""
