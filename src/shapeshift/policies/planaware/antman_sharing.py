"""AntMan's GPU sharing: opportunistic jobs packed beside resource-guaranteed ones.

AntMan (Xiao et al., OSDI 2020) co-designs the scheduler with the DL framework so that
several jobs share a GPU without hurting the job that paid for it:

* **Dynamic memory scaling** (paper Sec. 3.1.1): a job's GPU memory is bounded to what it
  uses, and the rest of the GPU's memory is open to other jobs. We declare each job's
  per-GPU memory from the plan's memory estimate (``shapeshift.perf.memory``; for a
  model without an architecture, its sharing profile) and treat the GPU's memory as a
  hard limit (the engine's ``GpuLedger``). AntMan instead moves an opportunistic job's
  tensors to host memory when a guaranteed job needs the GPU's memory (Sec. 3.3); here
  the opportunistic job stops when its memory no longer fits.
* **Adaptive computation** (Sec. 3.1.2, the GpuOpManager): an opportunistic job's kernels
  are launched only in the idle time slots of the resource-guaranteed job on its GPU, so
  the guaranteed job keeps its dedicated speed. ``AntManInterference`` (``antman_jobs``) models it: a
  guaranteed job beside opportunistic ones runs at ``1 - guaranteed_slowdown`` (default
  0, the paper's goal), and an opportunistic job beside a guaranteed one at the GPU's
  idle share, ``1 - u`` of the guaranteed partner's GPU utilisation (its sharing
  profile, ``shapeshift.perf.colocation``), never faster than the default model allows.
  Two opportunistic jobs interfere as the default model says.
* **Scheduling** (Sec. 3.3 and Algorithm 1): guaranteed jobs get their requested GPUs
  first, among the GPUs no guaranteed job holds; which of those is the plugin's rule
  (alibaba/GPU-scheduler-for-deep-learning at commit 2069b38b,
  ``scheduler-plugins/pkg/antman/antman.go``, ``Reserve``: the free GPUs are shuffled).
  An opportunistic job goes to the least-utilised GPUs whose utilisation is below M =
  80% (Sec. 3.3; ``limitedUtil`` in the plugin), whoever runs there; the plugin also
  requires used memory below 16 GiB (``limitedMem``), off by default here. A GPU holds
  at most one guaranteed job. A guaranteed job landing on an opportunistic job's GPU
  throttles it rather than preempting it (Sec. 3.3, local coordinator): the
  opportunistic job stays when the GPU's job count and memory allow, else it is
  stopped (back to the queue). A new opportunistic job evicts nobody.
  ``OpportunisticPacker`` does the device-level part of this.

Paper text read: the USENIX proceedings PDF (osdi20-xiao.pdf, 17 pages). Where the paper
leaves a choice open it follows the plugin; where we had to choose, the choice is a named
parameter of ``antman`` with a row in the fidelity table.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from shapeshift.engine.fractions import allowed_nodes
from shapeshift.engine.sharing import GpuLedger
from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, ExecutionPlan, JobSpec, Resources
from shapeshift.perf.colocation import profile_of
from shapeshift.policies.planaware.antman_jobs import gpu_memory_gb, host_memory

#: Paper Sec. 3.3, M = 80% (antman.go ``limitedUtil``): a GPU at or above this utilisation
#: takes no opportunistic job.
MAX_GPU_UTIL = 0.8
#: antman.go ``limitedMem`` (16 GiB; not in the paper): with ``max_used_gpu_mem_gb``, a GPU
#: using this much memory takes no opportunistic job.
MAX_USED_GPU_MEM_GB = 16.0
_EPS = 1e-9

Device = tuple[int, int]


class OpportunisticPacker:
    """Device-level half of an AntMan decision on a sharing cluster (module docstring).

    ``finish`` takes what the count-based skeleton decided for the jobs it saw (every
    job except those running packed), names GPUs for its new allocations (evicting or
    keeping the packed jobs on them) and packs waiting best-effort jobs onto GPUs with
    room. It returns the final desired allocations, the jobs it packed and the evicted.
    """

    def __init__(self, min_idle_share: float, idle_slots: bool, seed: int = 0, *,
                 max_gpu_util: float = MAX_GPU_UTIL, max_used_gpu_mem_gb: float | None = None,
                 guaranteed_only_util_limit: bool = False, prefer_empty_gpus: bool = False,
                 evict_opportunistic: bool = False):
        self.min_idle_share = min_idle_share
        self.evict_opportunistic = evict_opportunistic
        self.idle_slots = idle_slots
        self.seed = seed
        self.max_gpu_util = max_gpu_util
        self.max_used_gpu_mem_gb = max_used_gpu_mem_gb
        self.guaranteed_only_util_limit = guaranteed_only_util_limit
        self.prefer_empty_gpus = prefer_empty_gpus
        #: Per job, fixed while it exists: (GPU utilisation alone, guaranteed?).
        self._profile: dict[str, tuple[float, bool]] = {}
        #: Per (job, plan, node): GPU memory per GPU.
        self._memory: dict[tuple[str, ExecutionPlan | None, int], float] = {}

    def _util(self, job_id: str) -> tuple[float, bool]:
        found = self._profile.get(job_id)
        if found is None:
            spec = self._spec(job_id)
            found = self._profile[job_id] = (profile_of(spec, self.seed).gpu_util, spec.guaranteed)
        return found

    def _gpu_memory(self, spec: JobSpec, plan: ExecutionPlan | None, node: int) -> float:
        key = (spec.job_id, plan, node)
        found = self._memory.get(key)
        if found is None:
            found = self._memory[key] = gpu_memory_gb(spec, plan, self.cluster.nodes[node])
        return found

    def forget(self, live: set[str]) -> None:
        """Drop what is cached about jobs that are gone."""
        self._profile = {j: v for j, v in self._profile.items() if j in live}
        self._memory = {k: v for k, v in self._memory.items() if k[0] in live}

    # ------------------------------------------------------------ state
    def _load(self, view: ClusterView, ledger: GpuLedger, desired: Mapping[str, Allocation]) -> None:
        self.view = view
        self.ledger = ledger
        self.cluster = view.cluster
        #: occupants[(node, gpu)] = {job id: GPU memory}, after this decision's stops.
        self.occupants: dict[Device, dict[str, float]] = {}
        for job_id, devices in ledger.devices.items():
            if desired.get(job_id) is not view.allocations.get(job_id):
                continue  # stopped or moved by this decision
            for node, gpu in devices:
                self.occupants.setdefault((node, gpu), {})[job_id] = ledger.holders[node][gpu][job_id]
        self._slots: dict[int, list[tuple[float, int, float]]] | None = None
        self.cpus_free = [float(n.cpus) for n in self.cluster.nodes]
        self.mem_free = [float(n.mem_gb) for n in self.cluster.nodes]
        for alloc in desired.values():
            self._charge_host(alloc)

    def _charge_host(self, alloc: Allocation) -> None:
        for n, r in alloc.placement:
            self.cpus_free[n] -= r.cpus
            self.mem_free[n] -= r.mem_gb

    def _spec(self, job_id: str) -> JobSpec:
        return self.view.job(job_id).spec

    def _memory_used(self, device: Device) -> float:
        return sum(self.occupants.get(device, {}).values())

    def _room(self, device: Device, job: JobSpec, mem: float) -> bool:
        """Whether ``job`` (``mem`` GB per GPU) may join the GPU's occupants."""
        here = self.occupants.get(device, {})
        if len(here) >= self.ledger.limit:
            return False
        if self._memory_used(device) + mem > self.cluster.nodes[device[0]].gpu_mem_gb + _EPS:
            return False
        if not here:
            return True
        if not self.guaranteed_only_util_limit:
            # A guaranteed job takes its GPUs whoever sits there (antman.go ``Reserve``);
            # an opportunistic one only a GPU below the utilisation and memory limits.
            return job.guaranteed or self._takes_guest(device)
        if not self.idle_slots:
            return True
        # The opportunistic side only runs in the guaranteed side's idle slots (Sec. 3.1.2).
        profiles = [self._util(j) for j in here] + [self._util(job.job_id)]
        hosts = [u for u, guaranteed in profiles if guaranteed]
        if not hosts or len(hosts) == len(profiles):
            return True
        return all(1.0 - u >= self.min_idle_share - _EPS for u in hosts)

    def _takes_guest(self, device: Device) -> bool:
        """antman.go's test for an opportunistic job: the GPU's utilisation below
        ``max_gpu_util`` and its used memory below ``max_used_gpu_mem_gb`` (an empty GPU
        always passes)."""
        if not self.occupants.get(device):
            return True
        if self._utilisation(device) >= self.max_gpu_util - _EPS:
            return False
        return self.max_used_gpu_mem_gb is None or self._memory_used(device) < self.max_used_gpu_mem_gb - _EPS

    def _guest_slots(self, nodes: list[int]) -> dict[int, list[tuple[float, int, float]]]:
        """Per node, the GPUs an opportunistic job may join whatever its memory, as
        (utilisation, GPU, free memory), least utilised first; kept until a packing."""
        if self._slots is None:
            self._slots = {}
        missing = [n for n in nodes if n not in self._slots]
        for node in missing:
            found = []
            for gpu in range(self.cluster.nodes[node].gpus):
                device = (node, gpu)
                here = self.occupants.get(device, {})
                if len(here) >= self.ledger.limit:
                    continue
                if not self.guaranteed_only_util_limit and not self._takes_guest(device):
                    continue
                if self.guaranteed_only_util_limit and self.idle_slots and any(
                    g and 1.0 - u < self.min_idle_share - _EPS for u, g in map(self._util, here)
                ):
                    continue
                free = self.cluster.nodes[node].gpu_mem_gb - self._memory_used(device)
                found.append((self._utilisation(device), gpu, free))
            self._slots[node] = sorted(found)
        return self._slots

    def _utilisation(self, device: Device) -> float:
        return min(1.0, sum(self._util(j)[0] for j in self.occupants.get(device, {})))

    # ------------------------------------------------------------ decision
    def finish(
        self,
        view: ClusterView,
        ledger: GpuLedger,
        desired: dict[str, Allocation],
        packed: set[str],
        reasons: dict[str, str],
        keep: set[str] | frozenset[str] = frozenset(),
    ) -> tuple[dict[str, Allocation], set[str], set[str]]:
        """``keep``: running opportunistic jobs the skeleton stopped to free their GPUs;
        each stays where it runs when its GPUs and node still have room (``_keep``)."""
        self._load(view, ledger, desired)
        evicted: set[str] = set()
        fresh = [j for j, a in desired.items() if a is not view.allocations.get(j)]
        for job_id in fresh:  # guaranteed first: they choose their GPUs before anyone else
            if self._spec(job_id).guaranteed:
                desired[job_id] = self._name_devices(job_id, desired[job_id], desired, packed, evicted, reasons)
        newly: set[str] = {j for j in sorted(keep) if self._keep(j, desired, reasons)}
        sharing = packed | newly
        for job_id in fresh:
            if not self._spec(job_id).guaranteed:
                named = self._name_devices(job_id, desired[job_id], desired, sharing, evicted, reasons)
                if named is None:
                    for n, r in desired.pop(job_id).placement:
                        self.cpus_free[n] += r.cpus
                        self.mem_free[n] += r.mem_gb
                    reasons[job_id] = "no GPU free of jobs at or above the utilisation limit"
                else:
                    desired[job_id] = named
        for part in sorted(view.dirty_partitions):
            if part not in view.partitions:
                continue
            nodes = [int(n) for n in view.partitions[part]]
            for job_id in view.pending(part):
                spec = self._spec(job_id)
                if job_id in desired or spec.guaranteed or spec.num_gpus < 1:
                    continue
                alloc = self._pack(spec, allowed_nodes(spec, nodes, view.free().node_types))
                if alloc is None:
                    continue
                desired[job_id] = alloc
                newly.add(job_id)
                reasons.pop(job_id, None)
        return desired, newly, evicted

    def _keep(self, job_id: str, desired: dict[str, Allocation], reasons: dict[str, str]) -> bool:
        """Paper Sec. 3.3 (local coordinator): a guaranteed job landing on an opportunistic
        job's GPU throttles it instead of preempting it. The job keeps its allocation when
        each of its GPUs has a free slot (``gpu_share_limit``) and the memory it uses, and
        its nodes the CPUs and host memory, after this decision's guaranteed jobs."""
        alloc = self.view.allocations[job_id]
        devices = self.ledger.devices.get(job_id, ())
        if not devices:
            return False
        for node, gpu in devices:
            here = self.occupants.get((node, gpu), {})
            mem = self.ledger.holders[node][gpu][job_id]
            if len(here) >= self.ledger.limit:
                return False
            if self._memory_used((node, gpu)) + mem > self.cluster.nodes[node].gpu_mem_gb + _EPS:
                return False
        for n, r in alloc.placement:
            if r.cpus > self.cpus_free[n] + _EPS or r.mem_gb > self.mem_free[n] + _EPS:
                return False
        desired[job_id] = alloc
        self._charge_host(alloc)
        self._slots = None
        for node, gpu in devices:
            self.occupants.setdefault((node, gpu), {})[job_id] = self.ledger.holders[node][gpu][job_id]
        reasons.pop(job_id, None)
        return True

    def _name_devices(
        self,
        job_id: str,
        alloc: Allocation,
        desired: dict[str, Allocation],
        packed: set[str],
        evicted: set[str],
        reasons: dict[str, str],
    ) -> Allocation | None:
        """GPUs for a count-based allocation of the skeleton, among those only packed jobs
        (or nobody) hold; packed jobs that fit beside it stay, the rest are evicted.

        A guaranteed job draws them at random (antman.go ``Reserve`` shuffles the free
        GPUs; seeded per job); with ``prefer_empty_gpus`` (ours), and always for an
        opportunistic job (the least-utilised GPU first), empty GPUs come first, then
        those where it fits beside the packed jobs. An opportunistic job evicts nobody
        (paper Sec. 3.3: it only joins GPUs below the utilisation limit): where it finds
        no room it does not start (None), unless ``evict_opportunistic`` (ours)."""
        spec = self._spec(job_id)
        devices: list[Device] = []
        mem = min(self._gpu_memory(spec, alloc.plan, node) for node, _ in alloc.placement)
        shuffle = spec.guaranteed and not self.prefer_empty_gpus
        rng = random.Random(f"{self.seed}:{job_id}") if shuffle else None
        for node, res in alloc.placement:
            if not res.gpus:
                continue
            candidates = []
            for gpu in range(self.cluster.nodes[node].gpus):
                here = self.occupants.get((node, gpu), {})
                if any(j not in packed for j in here):
                    continue  # held by a job the skeleton counts
                fits = self._room((node, gpu), spec, mem)
                candidates.append((len(here) > 0, not fits, gpu))
            if rng is not None:
                candidates.sort(key=lambda c: c[2])
                rng.shuffle(candidates)
            else:
                candidates.sort()
            chosen = candidates[: res.gpus]
            if not spec.guaranteed and not self.evict_opportunistic and any(unfit for _, unfit, _ in chosen):
                for device in devices:  # undo what this job took on earlier nodes
                    self.occupants.get(device, {}).pop(job_id, None)
                return None
            for _, _, gpu in chosen:
                device = (node, gpu)
                if not self._room(device, spec, mem):
                    for victim in list(self.occupants.get(device, {})):
                        self._evict(victim, desired, evicted, reasons, job_id)
                devices.append(device)
                self.occupants.setdefault(device, {})[job_id] = mem
        self._free_host(alloc, devices, desired, packed, evicted, reasons, job_id)
        return Allocation(alloc.placement, alloc.plan, alloc.batch_size, devices=tuple(devices), gpu_mem_gb=mem)

    def _free_host(
        self,
        alloc: Allocation,
        devices: list[Device],
        desired: dict[str, Allocation],
        packed: set[str],
        evicted: set[str],
        reasons: dict[str, str],
        by: str,
    ) -> None:
        """The skeleton does not see packed jobs' CPUs and host memory: where the new
        allocation overdraws a node, packed jobs there yield (those on its GPUs first)."""
        mine = set(devices)
        for node, _ in alloc.placement:
            if self.cpus_free[node] >= -_EPS and self.mem_free[node] >= -_EPS:
                continue
            victims = sorted(
                (j for j in packed if j in desired and any(n == node for n, _ in desired[j].placement)),
                key=lambda j: (not mine & set(self.ledger.devices.get(j, ())), j),
            )
            for victim in victims:
                if self.cpus_free[node] >= -_EPS and self.mem_free[node] >= -_EPS:
                    break
                self._evict(victim, desired, evicted, reasons, by, "the CPUs or host memory it used")

    def _evict(
        self,
        victim: str,
        desired: dict[str, Allocation],
        evicted: set[str],
        reasons: dict[str, str],
        by: str,
        what: str = "its GPU",
    ) -> None:
        alloc = desired.pop(victim, None)
        evicted.add(victim)
        for device in self.ledger.devices.get(victim, ()):
            self.occupants.get(device, {}).pop(victim, None)
        if alloc is not None:
            for n, r in alloc.placement:
                self.cpus_free[n] += r.cpus
                self.mem_free[n] += r.mem_gb
        reasons[victim] = f"evicted: job {by} needs {what}"

    def _pack(self, spec: JobSpec, nodes: list[int]) -> Allocation | None:
        """The job's requested GPUs on the least-utilised GPUs with room (Sec. 3.3), on as
        few nodes as possible; its requested plan, CPUs and host memory."""
        plan = spec.plan if spec.plan is not None and spec.plan.gpus == spec.num_gpus else None
        per_node: dict[int, list[tuple[float, int]]] = {}
        mems: dict[int, float] = {}
        want = spec.num_gpus
        found = 0
        slots = self._guest_slots(nodes)
        for node in nodes:
            mems[node] = mem = self._gpu_memory(spec, plan, node)
            per_node[node] = [(u, gpu) for u, gpu, free in slots[node] if free + _EPS >= mem]
            found += len(per_node[node])
        if found < want:
            return None
        single = [n for n in nodes if len(per_node[n]) >= want]
        if single:
            best = min(single, key=lambda n: (sum(u for u, _ in per_node[n][:want]), n))
            order = [best]
        else:
            order = sorted(nodes, key=lambda n: (-len(per_node[n]), n))
        chosen: dict[int, list[int]] = {}
        left = want
        for node in order:
            take = per_node[node][:left]
            if take:
                chosen[node] = [gpu for _, gpu in take]
                left -= len(take)
            if not left:
                break
        if left:
            return None
        host = host_memory(spec, plan)
        shares = []
        for node in sorted(chosen):
            frac = len(chosen[node]) / want
            cpus, mem = spec.num_cpus * frac, host * frac
            if cpus > self.cpus_free[node] + _EPS or mem > self.mem_free[node] + _EPS:
                return None
            shares.append((node, Resources(len(chosen[node]), cpus, mem)))
        gpu_mem = min(mems[n] for n in chosen)
        devices = tuple((n, g) for n in sorted(chosen) for g in sorted(chosen[n]))
        alloc = Allocation(tuple(shares), plan, devices=devices, gpu_mem_gb=gpu_mem)
        self._charge_host(alloc)
        self._slots = None
        for device in devices:
            self.occupants.setdefault(device, {})[spec.job_id] = gpu_mem
        return alloc
