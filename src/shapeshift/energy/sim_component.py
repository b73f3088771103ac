"""CES inside a simulation: a cluster-management component that powers nodes down.

Helios (Hu et al., SC'21, Sec. 5) runs CES next to the scheduler: nodes nobody needs
are switched off, and a job that needs them waits for a boot. ``CESPolicy`` models this
as a wrapper around any ``Policy``, so the engine needs no change:

* it keeps, per node, a power state: *on*, *booting* (woken at t, usable from
  ``t + boot_delay``) or *off*; only idle nodes are ever switched off;
* the inner policy sees a ``PoweredView``: the engine's view in which every node that is
  not usable (off or booting) has no free resources, so no job can be placed there (the
  wrapper also checks every allocation the inner policy returns and fails loudly if one
  uses such a node);
* on rounds, at every bin boundary (default 600 s), it runs ``CESController`` per
  partition (partitions never share nodes) with demand = busy nodes + the nodes the
  waiting jobs ask for (``ceil(waiting GPUs / GPUs per node)``) and a seasonal-naive
  forecast built from the demand it has itself observed (the simulation has no series
  recorded in advance; before a day of history it uses the current demand). The first
  control step of a partition powers it down to ``demand + buffer`` (as the replay starts).
  The buffer of ``CESConfig`` is for the whole cluster and is split over partitions in
  proportion to their node counts (``ceil``, at least 1);
* it accounts powered-down node-seconds (booting nodes draw power, so they do not
  count) and reports them with ``summary(end_time)``, with an estimate of the jobs that
  waited for a boot: at each wake-up caused by a shortage, the waiting jobs (in queue
  order) whose GPUs go beyond the free GPUs of usable nodes, up to the shortage.

Round length: the wrapper asks for rounds of ``gcd(bin, boot_delay)`` seconds (and of
the inner policy's own round, if it has one) so a booted node is noticed when it comes
up (300 s with the defaults); the inner policy is consulted at those rounds too. A node
woken between rounds (on an arrival) is noticed at the first round after its boot ends.
Waiting CPU-only jobs are not counted in node demand.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shapeshift.energy.ces import CESConfig, CESController
from shapeshift.engine.contract import ROUND, Policy, PolicyError, PolicyTraits, traits_of
from shapeshift.engine.state import FreeResources
from shapeshift.engine.view import ClusterView
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec, Schedule


class PoweredView(ClusterView):
    """The engine's view with unusable (off or booting) nodes showing no free resources."""

    __slots__ = ("_hidden",)

    def __init__(self, view: ClusterView, hidden: np.ndarray, dirty_partitions: frozenset[str]):
        super().__init__(view._engine, view.now, dirty_partitions, view.timer_fired, view.finished, view.touched)
        self._hidden = hidden

    def scratch(self) -> FreeResources:
        free = super().scratch()
        free.gpus[self._hidden] = 0
        free.cpus[self._hidden] = 0.0
        free.mem[self._hidden] = 0.0
        free.recount()
        return free

    def free(self) -> FreeResources:
        """A masked copy (read-only use, like the engine's)."""
        return self.scratch()

    def free_gpus(self, partition: str) -> int:
        nodes = self.partitions[partition]
        visible = nodes[~self._hidden[nodes]]
        return int(super().free().gpus[visible].sum())

    def capacity_gpus(self, partition: str) -> int:
        nodes = self.partitions[partition]
        hidden = nodes[self._hidden[nodes]]
        return super().capacity_gpus(partition) - int(super().free().gpu_capacity[hidden].sum())


@dataclass
class _Partition:
    nodes: np.ndarray
    gpus_per_node: float
    buffer: int
    controller: CESController | None = None
    history: dict[int, int] = field(default_factory=dict)


def ces_round(config: CESConfig) -> float:
    """Round length that sees both bin boundaries and boot completions."""
    b, d = config.bin_seconds, config.boot_delay
    if d <= 0:
        return b
    integral = float(b).is_integer() and float(d).is_integer()
    period = float(math.gcd(int(b), int(d))) if integral else min(b, d)
    if d <= 2 * period:
        return period
    # The simulator stops after 3 idle rounds with nothing running, so a boot must end within
    # 2 rounds: use the bin when that suffices (boots are then noticed up to a round late),
    # else half the boot delay (control then runs at the first round after each bin boundary).
    return b if d <= 2 * b else d / 2


class CESPolicy:
    """Wrap ``inner`` with CES power management (see the module docstring)."""

    def __init__(self, inner: Policy, cluster: ClusterSpec, config: CESConfig | None = None):
        self.inner = inner
        self.config = config or CESConfig()
        self.name = inner.name
        self.triggers = frozenset(inner.triggers | {ROUND})
        period = ces_round(self.config)
        inner_round = inner.default_round if ROUND in inner.triggers else None
        if inner_round and float(inner_round).is_integer() and float(period).is_integer():
            period = float(math.gcd(int(period), int(inner_round)))  # keep the inner policy's rounds too
        self.default_round: float | None = period
        #: The inner policy's traits, except that powering nodes down reads every partition.
        self.traits: PolicyTraits = dataclasses.replace(traits_of(inner), partition_local=False)
        n = len(cluster.nodes)
        self._cap_gpus = np.array([node.gpus for node in cluster.nodes], dtype=np.int64)
        self._cap_cpus = np.array([node.cpus for node in cluster.nodes], dtype=float)
        self._cap_mem = np.array([node.mem_gb for node in cluster.nodes], dtype=float)
        self._off = np.zeros(n, dtype=bool)
        self._ready_at = np.full(n, -math.inf)
        self._unusable = np.zeros(n, dtype=bool)
        self._n_off = 0
        self._next_boot = math.inf
        total_nodes = max(n, 1)
        self._parts: dict[str, _Partition] = {}
        for name, members in sorted(cluster.partition_nodes().items()):
            nodes = np.asarray(members, dtype=np.int64)
            gpn = float(self._cap_gpus[nodes].mean()) if nodes.size else 0.0
            buffer = max(1, math.ceil(self.config.buffer * nodes.size / total_nodes)) if self.config.buffer else 0
            self._parts[name] = _Partition(nodes=nodes, gpus_per_node=gpn, buffer=buffer)
        #: Why CES may save nothing here (a buffer as large as a partition keeps it all on).
        self.warnings = [
            f"partition {name or '(all nodes)'}: its buffer of {part.buffer} spare nodes covers all "
            f"{part.nodes.size} of its nodes, so CES can power nothing down there (lower --energy-arg buffer=N)"
            for name, part in self._parts.items()
            if part.nodes.size and part.buffer >= part.nodes.size
        ]
        self._next_bin = 0.0
        self._last_t: float | None = None
        self._first_t: float | None = None
        self.off_node_seconds = 0.0
        self.wakeups = 0
        self.nodes_woken = 0
        self.power_downs = 0
        self.nodes_powered_down = 0
        self.shortage_bins = 0
        self.shortage_node_bins = 0
        self.jobs_waited_for_boot: set[str] = set()

    # ---------------------------------------------------------------- state
    def unusable_nodes(self) -> np.ndarray:
        """Indexes of nodes that cannot take jobs now (off or booting)."""
        return np.flatnonzero(self._unusable)

    def off_nodes(self) -> np.ndarray:
        return np.flatnonzero(self._off)

    def _account(self, now: float) -> None:
        if self._last_t is not None and now > self._last_t:
            self.off_node_seconds += (now - self._last_t) * self._n_off
        if self._first_t is None:
            self._first_t = now
        self._last_t = now if self._last_t is None else max(self._last_t, now)

    def _finish_boots(self, now: float) -> frozenset[str]:
        if now < self._next_boot:
            return frozenset()
        booted = self._unusable & ~self._off & (self._ready_at <= now)
        self._unusable[booted] = False
        waiting = self._unusable & ~self._off
        self._next_boot = float(self._ready_at[waiting].min()) if waiting.any() else math.inf
        return frozenset(p for p, part in self._parts.items() if booted[part.nodes].any())

    # ------------------------------------------------------------- decision
    def decide(self, view: ClusterView) -> Schedule:
        now = view.now
        self._account(now)
        dirty = set(self._finish_boots(now))
        if now >= self._next_bin:
            dirty |= self._control(view, now)
            bin_s = self.config.bin_seconds
            self._next_bin = (math.floor(now / bin_s) + 1) * bin_s
        else:
            dirty |= self._wake_on_arrival(view, now)
        dirty |= view.dirty_partitions
        schedule = self.inner.decide(PoweredView(view, self._unusable, frozenset(dirty)))
        for job_id, alloc in schedule.changes.items():
            if alloc is not None and any(self._unusable[n] for n in alloc.nodes):
                bad = [n for n in alloc.nodes if self._unusable[n]]
                raise PolicyError(f"{self.inner.name}: job {job_id} placed on powered-down node(s) {bad}")
        # Decide again the moment a booting node comes up, not at the next round.
        wake = min(schedule.wake_at if schedule.wake_at is not None else math.inf, self._next_boot)
        if math.isfinite(wake) and wake != schedule.wake_at:
            schedule = dataclasses.replace(schedule, wake_at=wake)
        return schedule

    def _used(self, free: FreeResources, nodes: np.ndarray) -> np.ndarray:
        eps = 1e-9
        return (
            (free.gpus[nodes] < self._cap_gpus[nodes])
            | (free.cpus[nodes] < self._cap_cpus[nodes] - eps)
            | (free.mem[nodes] < self._cap_mem[nodes] - eps)
        )

    def _demand(self, view: ClusterView, part: _Partition, name: str, used: int) -> int:
        total = part.nodes.size
        room = (total - used) * part.gpus_per_node
        pending_gpus = 0
        for job_id in view.pending(name):
            pending_gpus += view.job(job_id).spec.num_gpus
            if pending_gpus >= room:
                break
        return min(total, used + math.ceil(pending_gpus / part.gpus_per_node))

    def _forecast(self, part: _Partition, b: int, demand: int) -> list[float]:
        season = round(86400.0 / self.config.bin_seconds)
        return [float(part.history.get(b + k - season, demand)) for k in range(1, self.config.lookahead_bins + 1)]

    def _control(self, view: ClusterView, now: float) -> set[str]:
        """One CES step per partition; returns the partitions whose usable nodes changed."""
        changed: set[str] = set()
        free = view.free()
        b = math.floor(now / self.config.bin_seconds)
        cfg = self.config
        for name, part in self._parts.items():
            nodes = part.nodes
            if nodes.size == 0 or part.gpus_per_node <= 0:
                continue
            used_mask = self._used(free, nodes)
            used = int(used_mask.sum())
            demand = self._demand(view, part, name, used)
            off = self._off[nodes]
            idle_on = nodes[~off & ~self._unusable[nodes] & ~used_mask]
            total = int(nodes.size)
            if part.controller is None:
                local = CESConfig(**{**cfg.as_dict(), "buffer": part.buffer})
                part.controller = CESController(local, powered=total)
                target = min(total, demand + part.buffer)
                cut = min(total - target, idle_on.size)
                part.controller.powered = total - cut
                decision_woken, decision_cut, shortage = 0, cut, 0
            else:
                d = part.controller.step(
                    demand, total, lambda part=part, demand=demand: self._forecast(part, b, demand), int(idle_on.size)
                )
                decision_woken, decision_cut, shortage = d.woken, d.cut, d.shortage
            part.history[b] = demand
            if decision_cut > 0:
                victims = idle_on[::-1][:decision_cut]  # highest indexes first; placement fills low ones
                self._off[victims] = True
                self._n_off += int(victims.size)
                self._unusable[victims] = True
                self.power_downs += 1
                self.nodes_powered_down += int(victims.size)
                changed.add(name)
            if decision_woken > 0:
                self._wake(nodes, decision_woken, now)
                changed.add(name)
            part.controller.powered = int((~self._off[nodes]).sum())
            if shortage > 0:
                self.shortage_bins += 1
                self.shortage_node_bins += shortage
                self._mark_waiting(view, name, free, nodes, shortage * part.gpus_per_node)
        return changed

    def _wake(self, nodes: np.ndarray, count: int, now: float) -> None:
        """Power up ``count`` sleeping nodes of ``nodes``; they take jobs after the boot."""
        cfg = self.config
        sleepers = nodes[self._off[nodes]][:count]
        self._off[sleepers] = False
        self._n_off -= int(sleepers.size)
        self._ready_at[sleepers] = now + cfg.boot_delay
        self._unusable[sleepers] = cfg.boot_delay > 0
        if cfg.boot_delay > 0:
            self._next_boot = min(self._next_boot, now + cfg.boot_delay)
        self.wakeups += 1
        self.nodes_woken += int(sleepers.size)

    def _wake_on_arrival(self, view: ClusterView, now: float) -> set[str]:
        """Between bins: a partition whose requested nodes exceed its powered ones wakes the
        shortfall plus its buffer at once (Helios Algorithm 2), not at the next bin."""
        changed: set[str] = set()
        free = view.free()
        for name in view.dirty_partitions:
            part = self._parts.get(name)
            if part is None or part.controller is None or not view.pending_count(name):
                continue
            nodes = part.nodes
            demand = self._demand(view, part, name, int(self._used(free, nodes).sum()))
            woken = part.controller.wake_for(demand, int(nodes.size))
            if woken > 0:
                self._wake(nodes, woken, now)
                part.controller.powered = int((~self._off[nodes]).sum())
                changed.add(name)
        return changed

    def _mark_waiting(self, view: ClusterView, name: str, free: FreeResources, nodes: np.ndarray, gpus: float) -> None:
        """Record the waiting jobs the shortage stands for: in queue order, those whose
        GPUs go beyond what the usable nodes have free, up to ``gpus`` more."""
        usable = nodes[~self._unusable[nodes]]
        room = float(free.gpus[usable].sum())
        limit = room + gpus
        acc = 0.0
        for job_id in view.pending(name):
            acc += view.job(job_id).spec.num_gpus
            if acc > room:
                self.jobs_waited_for_boot.add(job_id)
            if acc >= limit:
                break

    # -------------------------------------------------------------- report
    def summary(self, end_time: float | None = None) -> dict[str, Any]:
        """Energy figures up to ``end_time`` (default: the last decision)."""
        off_seconds = self.off_node_seconds
        last = self._last_t if self._last_t is not None else 0.0
        if end_time is not None and end_time > last:
            off_seconds += (end_time - last) * self._n_off
        end = max(end_time or last, last)
        span = end - (self._first_t or 0.0)
        node_hours = off_seconds / 3600.0
        total_nodes = self._off.size
        return {
            "energy_policy": "ces",
            "energy_node_hours_saved": node_hours,
            "energy_kwh_saved": self.config.kwh(node_hours),
            "energy_saved_fraction": off_seconds / (total_nodes * span) if span > 0 else 0.0,
            "energy_avg_nodes_off": off_seconds / span if span > 0 else 0.0,
            "energy_wakeups": self.wakeups,
            "energy_nodes_woken": self.nodes_woken,
            "energy_power_downs": self.power_downs,
            "energy_shortage_bins": self.shortage_bins,
            "energy_jobs_waited_for_boot": len(self.jobs_waited_for_boot),
            "energy_boot_delay": self.config.boot_delay,
            "energy_idle_node_watts": self.config.idle_node_watts,
            "energy_cooling_factor": self.config.cooling_factor,
            "energy_warnings": list(self.warnings),
        }


def parse_energy_args(items: list[str] | None) -> tuple[tuple[str, str], ...]:
    """``["buffer=2", "boot_delay=120"]`` -> ``(("boot_delay", "120"), ("buffer", "2"))``;
    malformed items raise ``InputError`` naming ``--energy-arg``."""
    pairs: dict[str, str] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--energy-arg {item!r} must look like key=value", field="--energy-arg")
        pairs[key.strip()] = raw.strip()
    return tuple(sorted(pairs.items()))


def ces_config(params: tuple[tuple[str, Any], ...] | dict[str, Any]) -> CESConfig:
    """CES parameters (values as numbers or as typed on the command line) -> ``CESConfig``;
    unknown keys and bad values raise ``InputError``."""
    defaults = CESConfig().as_dict()
    values: dict[str, Any] = {}
    for key, raw in dict(params).items():
        if key not in defaults:
            raise InputError(f"unknown CES parameter {key!r}; known: {', '.join(defaults)}", field="--energy-arg")
        kind = type(defaults[key])
        try:
            if isinstance(raw, bool):
                raise ValueError
            number = float(raw)
            if not math.isfinite(number) or (kind is int and not number.is_integer()):
                raise ValueError
            values[key] = int(number) if kind is int else number
        except (TypeError, ValueError):
            raise InputError(
                f"CES parameter {key}: expected a finite {kind.__name__}, got {raw!r}", field="--energy-arg"
            ) from None
    try:
        return CESConfig(**values)
    except ValueError as exc:
        raise InputError(str(exc), field="--energy-arg") from None


def _avg_jct(result: Any) -> float | None:
    from shapeshift.engine.state import JobState

    jct = [j.end_time - j.spec.submit_time for j in result.jobs if j.state is JobState.COMPLETED]
    return sum(jct) / len(jct) if jct else None


def energy_extra(result: Any, baseline: Any | None, policy: CESPolicy) -> dict[str, Any]:
    """Summary fields of a CES run: energy saved and, when ``baseline`` (the same run
    without CES) is given, the JCT impact against it. Energy is counted up to the last
    completion."""
    ends = [j.end_time for j in result.jobs if j.end_time is not None]
    fields = policy.summary(max(ends) if ends else None)
    jct = _avg_jct(result)
    base = _avg_jct(baseline) if baseline is not None else None
    fields["energy_baseline_avg_jct"] = base
    fields["energy_avg_jct_change_pct"] = 100.0 * (jct - base) / base if jct is not None and base else None
    return fields
