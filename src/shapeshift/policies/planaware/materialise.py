"""Step 3 of a plan-aware decision: plans, CPUs and host memory for every placement.

For the GPUs each job ended up with, the best plan of its plan space is chosen from the
(cached) performance model, GPUs that plan cannot use are dropped, and host memory and
CPUs are allocated per node. Unchanged jobs keep their allocation object, so the engine
reconciles only what changed.
"""

from __future__ import annotations

from shapeshift.engine.view import ClusterView
from shapeshift.model import Allocation, ExecutionPlan, Resources, ZeroMode
from shapeshift.perf.arch import get_arch
from shapeshift.perf.ground_truth import host_memory_gb
from shapeshift.policies.planaware.growth import Growth
from shapeshift.policies.planaware.jobs import PlanJob
from shapeshift.policies.planaware.knowledge import Choice, fixed_space
from shapeshift.policies.planaware.synergy_cpus import SynergyCpus


class Materialise(SynergyCpus, Growth):
    """Mixin of ``PlanAwareScheduler``: from GPU counts per node to allocations."""

    mem_free: dict[int, float]  # host memory per node not held by any job (this decision)
    mem_held: dict[str, dict[int, float]]  # host memory per node each job holds

    # ------------------------------------------------------------ materialise
    def _materialise(
        self,
        view: ClusterView,
        nodes: list[int],
        jobs: dict[str, PlanJob],
        desired: dict[str, Allocation],
        reasons: dict[str, str],
    ) -> None:
        cluster = view.cluster
        cpu_free = {n: float(cluster.nodes[n].cpus) for n in nodes}
        mem_free = {n: float(cluster.nodes[n].mem_gb) for n in nodes}
        keep: list[PlanJob] = []
        change: list[PlanJob] = []
        for j in jobs.values():
            if not j.nodes:
                continue
            cur = j.status.allocation
            same = cur is not None and {n: r.gpus for n, r in cur.placement if r.gpus} == j.nodes
            if same and not (j.pinned and cur is not None and cur.plan != j.spec.plan):
                keep.append(j)
            else:
                change.append(j)
        if self.variant.cpu_mode in ("tune", "proportional"):
            keep, change = self._reclaim_for_proportional(view, keep, change)
        for j in keep:
            alloc = j.status.allocation
            assert alloc is not None
            for n, r in alloc.placement:
                cpu_free[n] -= r.cpus
                mem_free[n] -= r.mem_gb
            desired[j.id] = alloc
        change.sort(key=lambda j: (not j.protected, -self._gain(j)[0] if self.variant.order == "slope" else 0, j.order))
        for j in change:
            alloc = self._allocation(j, cpu_free, mem_free)
            if alloc is None:
                reasons[j.id] = "no plan fits the GPUs, CPUs and host memory found"
                continue
            for n, r in alloc.placement:
                cpu_free[n] -= r.cpus
                mem_free[n] -= r.mem_gb
            desired[j.id] = alloc
        if self.variant.cpu_mode == "tune" and view.timer_fired:
            self._retune_round(keep, [j for j in change if j.id in desired], desired, cpu_free, mem_free)
        elif self.variant.cpu_mode == "tune":
            self._tune_cpus([j for j in change if j.id in desired], desired, cpu_free, mem_free)

    def _choose_plan(self, j: PlanJob) -> tuple[Choice | None, dict[int, int]]:
        """Best plan on the found GPUs; drop GPUs that the best plan cannot use."""
        place = dict(j.nodes)
        spec = j.spec
        kn = self.knowledge
        if kn.knowledge(spec.model) is None:
            return None, place

        def best(p: dict[int, int]) -> Choice | None:
            g = sum(p.values())
            if j.protected and g == j.g_min:
                chosen = None if j.id in self._pinned else self._min_res.get(j.id, (0, None, 0.0))[1]
                if chosen is not None and chosen.plan.gpus == g:
                    return chosen
                if spec.plan is not None:
                    return kn.best(spec.model, list(p.values()), self._job_cpus(j, g), fixed_space(spec.plan))
            return kn.best(spec.model, list(p.values()), self._job_cpus(j, g), j.space)

        choice = best(place)
        if (j.protected and (self.variant.fixed_guaranteed or j.g <= j.g_min)) or not self.variant.elastic:
            return choice, place
        while sum(place.values()) - j.unit >= max(j.g_min, 1):
            trials = []
            for n in sorted(place, key=lambda n: (place[n], n)):
                p = dict(place)
                p[n] -= j.unit
                if not p[n]:
                    del p[n]
                c = best(p)
                if c is not None:
                    trials.append((c.throughput, -len(p), -n, p, c))
            if not trials:
                break
            thr, _, _, p, c = max(trials, key=lambda t: t[:3])
            if choice is not None and thr < choice.throughput * (1 - 1e-6):
                break
            place, choice = p, c
        return choice, place

    def _allocation(self, j: PlanJob, cpu_free: dict[int, float], mem_free: dict[int, float]) -> Allocation | None:
        choice, place = self._choose_plan(j)
        spec = j.spec
        if choice is None:
            if self.knowledge.knowledge(spec.model) is not None:
                return None
            plan = spec.plan if spec.plan is not None and spec.plan.gpus == sum(place.values()) else None
            mem_total = spec.mem_gb
        else:
            plan = choice.plan
            mem_total = sum(self._plan_memory(j, plan, place).values())
        g = sum(place.values())
        cpus_total = self._cpu_amount(j, plan, g)
        shares = []
        for n in sorted(place):
            frac = place[n] / g
            cpus = cpus_total * frac
            mem = mem_total * frac
            if self.variant.cpu_mode in ("tune", "proportional"):
                # Synergy: the proportional share, or a profiled job's smaller demand at no loss
                cpus, floor_mem = self._floor(j, n, place[n])
                mem = mem if floor_mem is None else floor_mem
            offload = plan is not None and plan.zero is ZeroMode.OFFLOAD
            if self.variant.cpu_mode == "elastic" and offload and not j.protected:
                # Offload jobs also get spare CPUs of their nodes (CPU-sensitive optimizer step)
                cpus = max(cpus, min(cpu_free[n], 2 * cpus))
            if cpus > cpu_free[n] + 1e-9 or mem > mem_free[n] + 1e-9:
                return None
            shares.append((n, Resources(place[n], cpus, mem)))
        return Allocation(tuple(shares), plan)

    def _cpu_amount(self, j: PlanJob, plan: object, g: int) -> float:
        return self._job_cpus(j, g)

    # ------------------------------------------------------------ host memory (AllocMem)
    def _plan_memory(self, j: PlanJob, plan: ExecutionPlan | None, place: dict[int, int]) -> dict[int, float]:
        """Host memory per node that ``j`` needs for ``plan`` on ``place``."""
        g = sum(place.values())
        if plan is None or not g:
            total = j.spec.mem_gb
        else:
            total = host_memory_gb(get_arch(j.spec.model), plan)
            if j.protected:
                total = max(total, j.spec.mem_gb)
        return {n: total * k / g for n, k in place.items()} if g else {}

    def _fits_memory(self, j: PlanJob, mark: int, choice: Choice | None = None) -> bool:
        """AllocMem before anything is committed (Algorithm 1): the host memory of ``j``'s
        plan (``choice``, else its best plan) on the GPUs it now holds must fit what its
        nodes have left; else every move since ``mark`` is undone. Memory a job held before
        this decision counts as its own."""
        if not j.nodes or self.knowledge.knowledge(j.spec.model) is None:
            return True
        if choice is None:
            choice, _ = self._choose_plan(j)
            if choice is None:
                self._rollback(mark)
                return False
        need = self._plan_memory(j, choice.plan, j.nodes)
        held = self.mem_held.get(j.id, {})
        if any(need[n] > self.mem_free[n] + held.get(n, 0.0) + 1e-6 for n in need):
            self._rollback(mark)
            return False
        for n, gb in held.items():
            self.mem_free[n] += gb
        for n, gb in need.items():
            self.mem_free[n] -= gb
        self.mem_held[j.id] = need
        return True
