"""``lucid``: non-intrusive, interference-aware scheduling (Hu et al., ASPLOS 2023).

This follows Hu's thesis, chapter 4, and the authors' simulator
(S-Lab-System-Group/Lucid, ``simulation/policy/lucid.py``). Each decision does four
things per VC (partition):

1. **Profiler** (``profiler.py``): jobs that have run T_prof seconds in the profiling
   nodes stop there with their measured features. The profiling queue (least GPUs
   first) fills the profiling nodes.
2. **Orchestrator**: the main queue is ordered by priority = GPUs x predicted duration,
   smallest first. The duration comes from a Primo PrAM trained on finished jobs
   (``models.py``). As in the artifact (``utils.trace_profile`` is a separate pass and
   ``job.reset_trace`` keeps each job's submit time), a job is in the main queue from
   its submission, in parallel with the profiler: the main queue skips it while it
   profiles, and may start it before the profiler has (``profile_before_queue`` is the
   thesis's sequence instead).
3. **Affine pair, else exclusive**: while sharing is on, each job of at most one node's
   GPUs first looks for an affine partner (``packing.py``: sharing scores from a Primo
   PrDT, the binder's rules); profiled or not, as the artifact pairs any job of at most
   8 GPUs (``pair_profiled_only`` restricts it). Otherwise, and for every larger job, it
   takes the consolidated placement on the main nodes. The artifact skips a job that
   does not fit while sharing is on, and stops at it while sharing is off; we do the same.
   As in the artifact's pass, a job placed alone earlier in the decision may be a
   partner; either job's end frees the other to take a new partner (``pair_release``,
   ``binder.py``: the artifact's code frees only the older). In simulation a pair with
   NeuMF, ResNet50, BERT or Transformer runs at full speed, as in the artifact (``speeds.py``).
4. **Sharing switch** ("prescient adaptive sharing", ``check_pas``), with
   ``sharing="adaptive"``: every 100 s the workload forecaster predicts the GPU jobs
   submitted in the next five 10-minute bins. Sharing goes off while their mean is at
   most 2, and stays on until the forecaster has two days of history. The artifact
   applies it on Venus only, so the default shares always.

Lucid never preempts, except to end a profiling run. Both models retrain every
``retrain_days`` (the artifact's EBM estimates are "weekly updated"), on finished jobs
and past submissions only. Models are fitted lazily: at the first decision that needs a
prediction after they fall due, on the data as of the due instant. The artifact's
forecast-driven profiler scaling (Venus only) is ``profiler_scaling`` (``scaling.py``),
off by default as for the artifact's Philly runs. The thesis's system tuner
(a sweep of T_prof and the binder threshold in simulation on recent history) is
``system_tuner`` (``tuner.py``), off by default.

Pairs need a cluster that lets two jobs share a GPU (``gpu_share_limit: 2`` in the
cluster file). Elsewhere Lucid runs with profiling and priorities only. On a cluster of
fractional GPUs (``gpu_fractions``, openb) a job's share of a GPU is a quota the cluster
enforces, so the binder forms no pairs there; its placement packs the fractions
(``engine.fractions``) and honours GPU-type constraints, as every placement does. Every exclusive
placement declares the job's profiled GPU memory, so a later newcomer can join it.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from shapeshift.engine.replay import Replay, require
from shapeshift.engine.state import FreeResources
from shapeshift.model import Allocation, JobSpec, Schedule
from shapeshift.perf.colocation import SharingProfile
from shapeshift.policies.framework.base import ARRIVAL, COMPLETION
from shapeshift.policies.framework.placement import PLACEMENTS
from shapeshift.policies.framework.registry import register
from shapeshift.policies.lucid.binder import BinderMixin, name_devices
from shapeshift.policies.lucid.configs import ConfigProfiles
from shapeshift.policies.lucid.models import DurationModel, PrAMSettings, SubmissionForecaster
from shapeshift.policies.lucid.packing import BinderRules, PartnerIndex, fit_packing_model
from shapeshift.policies.lucid.params import LucidParams
from shapeshift.policies.lucid.partners import RunningPartners
from shapeshift.policies.lucid.profiler import ProfilerSettings, measure, read, split_partition, wants_profiling
from shapeshift.policies.lucid.scaling import ProfilerScaler

__all__ = ["Lucid", "LucidParams", "make_lucid"]

if TYPE_CHECKING:
    from shapeshift.engine.view import ClusterView
    from shapeshift.policies.lucid.tuner import TunerChoice

DAY = 86400.0


class Lucid(BinderMixin):
    name = "lucid"
    triggers = frozenset({ARRIVAL, COMPLETION})
    default_round = None

    def __init__(self, params: LucidParams):
        self.p = params
        self.profiler = ProfilerSettings(params.profiler_nodes, params.profile_seconds, params.profiler_max_gpus)
        self.rules = BinderRules(params.share_threshold, params.priority_ratio)
        self.packing = fit_packing_model(params.seed)
        pram = PrAMSettings(
            params.pram_learning_rate, params.pram_interactions, params.pram_max_rounds, params.outer_bags,
            params.pram_release,
        )  # fmt: skip
        self.durations = DurationModel(params.seed, pram, params.train_window, params.monotone_gpus)
        self.forecaster = SubmissionForecaster(params.seed, pram)
        self.placement = PLACEMENTS[params.placement]()
        self.features: dict[str, SharingProfile] = {}
        self.scores: dict[str, int] = {}
        #: Per-configuration profiles (``profiles``) and the labels they gave jobs.
        configs = params.profiles and params.scores == "configuration"
        self.configs = ConfigProfiles.read(params.profiles) if configs else None
        self.labels: dict[str, int] = {}
        self.configured: set[str] = set()
        self.running_partners = RunningPartners()
        self.pair_of: dict[str, str] = {}
        self.joined_by: dict[str, str] = {}
        self.locked: set[str] = set()
        self._shapes: dict[int, tuple[np.ndarray, tuple[int, int, float]]] = {}
        self.priority: dict[str, float] = {}
        #: Jobs waiting for (or in) the profiler, and when each profiling run started.
        self.profile_queue: dict[str, list[tuple[int, float, str]]] = {}
        self.profiling: dict[str, float] = {}
        self.profiling_in: dict[str, dict[str, None]] = {}
        self.main_queue: dict[str, dict[str, None]] = {}
        self.known: set[str] = set()
        self.finished_in_profiler = 0
        #: Profiling runs started, jobs started beside a partner, those of > 4 GPUs and
        #: those whose pair runs at full speed (``full_speed_pair_models``).
        self.profiled = self.paired = self.paired_large = self.paired_full_speed = 0
        #: Jobs in a profiling queue that the main queue has not started yet.
        self.awaiting_profile: set[str] = set()
        self.next_retrain = 0.0
        self._due_forecast: float | None = None
        self._due_rows: int | None = None
        self.sharing_on = params.sharing != "off"
        self.next_switch_check = 0.0
        self._split: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._current: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.scaler = ProfilerScaler(params.profiler_max_gpus) if params.profiler_scaling else None
        #: Recently finished jobs with their recorded durations (the tuner's history).
        self.history: deque[JobSpec] = deque(maxlen=params.tuner_jobs)
        self.next_tune = 0.0
        self.tunings: list[TunerChoice] = []
        self._replay: Replay | None = None

    def use_replay(self, replay: Replay) -> None:
        """The simulation the system tuner replays history with (``shapeshift.engine.replay``)."""
        self._replay = replay

    # ------------------------------------------------------------------ learning
    def _learn(self, view: ClusterView) -> None:
        ended = set(view.finished)
        for job_id in view.finished:
            self._release(view, job_id, ended, self.p.pair_release)
            status = view.job(job_id)
            if job_id in self.profiling:
                del self.profiling[job_id]
                del self.profiling_in[status.partition][job_id]
                self.running_partners.touch(status.partition)
                self.finished_in_profiler += 1
                self.main_queue.get(status.partition, {}).pop(job_id, None)
            duration = status.spec.duration if status.spec.duration is not None else status.work_total
            self.durations.observe(status.spec, self.features.get(job_id), duration)
            if self.p.system_tuner:
                self.history.append(replace(status.spec, duration=duration))
            self.priority.pop(job_id, None)
            self.running_partners.forget(job_id)
        # Jobs join the engine's pending order at its end; everything that arrived since the
        # last decision (Lucid decides on every arrival) lies after the last known job.
        for partition in sorted(view.dirty_partitions):
            new = []
            for job_id in reversed(view.pending(partition)):  # type: ignore[call-overload]
                if job_id in self.known:
                    break
                new.append(job_id)
            for job_id in reversed(new):
                self._arrive(view, partition, job_id)

    def _arrive(self, view: ClusterView, partition: str, job_id: str) -> None:
        self.known.add(job_id)
        spec = view.job(job_id).spec
        self.forecaster.observe_submit(spec.submit_time)
        profiler_nodes, _ = self._base(view, partition)
        profiler_gpus = sum(view.cluster.nodes[int(n)].gpus for n in profiler_nodes)
        if wants_profiling(spec, self.profiler, profiler_gpus):
            heapq.heappush(self.profile_queue.setdefault(partition, []), (spec.num_gpus, spec.submit_time, job_id))
            self.awaiting_profile.add(job_id)
            if self.p.profile_before_queue:
                return
        self._to_main(view, partition, spec, None)

    def _to_main(self, view: ClusterView, partition: str, spec: JobSpec, profile: SharingProfile | None) -> None:
        """Queue ``spec`` in the main queue, or, when it is there already (profiled while
        it waited), give it its measured features and the priority they predict."""
        self._ensure_models(view)
        if profile is not None:
            self.features[spec.job_id] = profile
        self.priority[spec.job_id] = spec.num_gpus * self._duration(spec, profile)
        self.running_partners.touch(partition)
        self.main_queue.setdefault(partition, {})[spec.job_id] = None

    def _duration(self, spec: JobSpec, profile: SharingProfile | None) -> float:
        if self.p.oracle_durations and spec.duration is not None:
            return spec.duration
        return self.durations.predict([spec], [profile])[0]

    def _note_due(self, now: float) -> None:
        """Record that the models are due for retraining, and on what data: every
        ``retrain_days``, and for a model that does not exist yet as soon as its history
        allows (two days of submissions; ``min_train_jobs`` finished jobs)."""
        if now >= self.next_retrain:
            self.next_retrain = now + self.p.retrain_days * DAY
            self._due_forecast = now
            self._due_rows = self.durations.observed
        if self.forecaster.model is None and self._due_forecast is None and self.forecaster.ready(now):
            self._due_forecast = now
        if self.durations.model is None and self._due_rows is None and self.durations.observed >= self.p.min_train_jobs:
            self._due_rows = self.durations.observed

    def _ensure_models(self, view: ClusterView) -> None:
        """Fit what is due, on the data as of the due instant, when a prediction is first
        needed. A long tail of decisions with nothing waiting fits nothing, and the models
        are the ones an eager refit at the due instant would have given. (Fitting the two
        in parallel threads was measured on the full Philly run: no faster.)"""
        if self._due_forecast is not None:
            self.forecaster.fit(self._due_forecast)
            self._due_forecast = None
        if self._due_rows is None:
            return
        rows, self._due_rows = self._due_rows, None
        if rows < self.p.min_train_jobs:
            return
        self.durations.fit(rows)
        waiting = [j for queue in self.main_queue.values() for j in queue]
        specs = [view.job(j).spec for j in waiting]
        predicted = self.durations.predict(specs, [self.features.get(j) for j in waiting])
        if self.p.oracle_durations:
            predicted = [s.duration if s.duration is not None else d for s, d in zip(specs, predicted, strict=True)]
        for job_id, spec, duration in zip(waiting, specs, predicted, strict=True):
            self.priority[job_id] = spec.num_gpus * duration
        self.running_partners.touch_all()

    def _tune(self, view: ClusterView) -> None:
        """The system tuner (tuner.py), when due and once enough jobs have finished."""
        if not self.p.system_tuner or view.now < self.next_tune or len(self.history) < self.p.tuner_jobs:
            return
        from shapeshift.policies.lucid.tuner import retune

        self.next_tune = view.now + self.p.tuner_every_days * DAY
        current = (self.profiler.seconds, self.rules.threshold)
        replay = require(self._replay, "lucid's system tuner")
        choice = retune(view.now, list(self.history), view.cluster, self._replica, self.p.sharing, current, replay)
        self.tunings.append(choice)
        self.profiler = replace(self.profiler, seconds=choice.profile_seconds)
        self.rules = replace(self.rules, threshold=choice.threshold)

    def _replica(self, update: dict) -> Lucid:  # type: ignore[type-arg]
        return Lucid(self.p.model_copy(update=update))

    def _forecast(self, view: ClusterView) -> float | None:
        if self._due_forecast is not None:
            self.forecaster.fit(self._due_forecast)
            self._due_forecast = None
        return self.forecaster.forecast(view.now)

    def _switch(self, now: float) -> None:
        if self.p.sharing != "adaptive" or now < self.next_switch_check:
            return
        self.next_switch_check = (math.floor(now / self.p.switch_every) + 1) * self.p.switch_every
        forecast = self.forecaster.forecast(now)
        self.sharing_on = forecast is None or forecast > self.p.switch_load

    # ------------------------------------------------------------------ deciding
    def _base(self, view: ClusterView, partition: str) -> tuple[np.ndarray, np.ndarray]:
        split = self._split.get(partition)
        if split is None:
            split = self._split[partition] = split_partition(view.partitions[partition], self.profiler)
        return split

    def _nodes(self, view: ClusterView, partition: str) -> tuple[np.ndarray, np.ndarray]:
        """(profiler, main) nodes now: the base split, plus any node lent by scaling."""
        return self._current.get(partition) or self._base(view, partition)

    def decide(self, view: ClusterView) -> Schedule:
        self._note_due(view.now)
        self._learn(view)
        self._tune(view)
        changes: dict[str, Allocation | None] = {}
        reasons: dict[str, str] = {}
        free = view.scratch()
        for partition in sorted(view.dirty_partitions):
            self._profile(view, partition, free, changes, reasons)
            self._orchestrate(view, partition, free, changes, reasons)
        ends = [start + self.profiler.seconds for start in self.profiling.values()]
        return Schedule(
            base=view.allocations,
            changes=changes,
            reasons=reasons,
            default_reason="waiting for GPUs in priority order",
            wake_at=min(ends) if ends else None,
        )

    def _profile(self, view: ClusterView, partition: str, free: FreeResources, changes, reasons) -> None:  # type: ignore[no-untyped-def]
        if self.scaler is not None:
            waiting = len(self.profile_queue.get(partition, []))
            base = self._base(view, partition)
            self._current[partition] = self.scaler.adjust(partition, base, waiting, free, self._forecast(view))
        nodes, _ = self._nodes(view, partition)
        if len(nodes) == 0:
            return
        now = view.now
        running = self.profiling_in.setdefault(partition, {})
        for job_id in list(running):
            if now + 1e-6 >= self.profiling[job_id] + self.profiler.seconds:
                del self.profiling[job_id]
                del running[job_id]
                self.running_partners.touch(partition)
                alloc = view.allocations[job_id]
                changes[job_id] = None
                free.give(alloc)
                spec = view.job(job_id).spec
                self._to_main(view, partition, spec, self._measure(spec))
        queue = self.profile_queue.get(partition, [])
        while queue:
            job_id = queue[0][2]
            if job_id not in self.awaiting_profile:  # the main queue started it first
                heapq.heappop(queue)
                continue
            alloc = self.placement.find(view.job(job_id).spec, nodes, free)
            if alloc is None:
                reasons[job_id] = "waiting for the profiler (least GPUs first)"
                break
            heapq.heappop(queue)
            self.awaiting_profile.discard(job_id)
            self.profiled += 1
            alloc = free.naming_gpus(alloc)
            free.take(alloc)
            changes[job_id] = alloc
            self.profiling[job_id] = now
            self.running_partners.touch(partition)
            running[job_id] = None

    def _orchestrate(self, view: ClusterView, partition: str, free: FreeResources, changes, reasons) -> None:  # type: ignore[no-untyped-def]
        queue = self.main_queue.get(partition)
        if not queue:
            return
        _, nodes = self._nodes(view, partition)
        self._ensure_models(view)
        self._switch(view.now)
        ledger = view.sharing
        # On a cluster of fractional GPUs the shares are the packing: no binder pairs.
        pairing = self.sharing_on and ledger is not None and ledger.limit >= 2 and not ledger.fractions
        partners: PartnerIndex | None = None  # built when a job first looks for a partner
        order = sorted(queue, key=lambda j: (self.priority[j], view.job(j).spec.submit_time, j))
        largest, main_gpus, gpu_mem = self._main_shape(view, nodes)
        # Per decision, not per job: the empty GPUs left, so a job that needs more than
        # are left is not handed to the placement at all (it would find nothing).
        everywhere = view.partitions[partition]
        empty_main, empty_all = int(free.gpus[nodes].sum()), int(free.gpus[everywhere].sum())
        for position, job_id in enumerate(order):
            if job_id in self.profiling:  # its profiling run ends within T_prof
                reasons[job_id] = "in the profiler"
                continue
            spec = view.job(job_id).spec
            alloc = None
            if pairing and 0 < spec.num_gpus <= largest and not self.p.pair_profiled_only:
                self._measure_unprofiled(job_id, spec)
            if pairing and 0 < spec.num_gpus <= largest and job_id in self.features:
                if partners is None:
                    partners = PartnerIndex(self.rules, self._partners(view, partition, changes))
                alloc = self._pair(view, spec, partners, free, gpu_mem, changes)
                if alloc is not None:
                    self.paired += 1
                    self.paired_full_speed += self._runs_full_speed(view, job_id)
                    self.paired_large += spec.num_gpus > 4
            if alloc is None:
                # A job larger than the main nodes may use the profiling nodes too, so
                # that every job the VC can hold can run (the artifact never meets one).
                main = spec.num_gpus <= main_gpus
                share = spec.gpu_milli > 0 and free.milli is not None  # may join a used GPU
                if share or spec.num_gpus <= (empty_main if main else empty_all):
                    alloc = self.placement.find(spec, nodes if main else everywhere, free)
                if alloc is not None:
                    alloc = free.naming_gpus(self._declare_memory(view, spec, alloc))
                    if pairing:  # a later job of this decision may join it on its GPUs
                        alloc = name_devices(view, changes, alloc)
                    free.take(alloc)
                    empty_main, empty_all = int(free.gpus[nodes].sum()), int(free.gpus[everywhere].sum())
            if alloc is None:
                if not pairing:
                    for later in order[position:]:
                        reasons[later] = "behind a higher-priority job that does not fit"
                    break
                reasons[job_id] = f"needs {spec.num_gpus} free GPUs or an affine partner"
                continue
            changes[job_id] = alloc
            del queue[job_id]
            self.awaiting_profile.discard(job_id)
            self._measure_unprofiled(job_id, spec)  # measured while it runs
            if pairing and job_id not in self.pair_of and self._may_offer(spec, alloc, largest):
                if partners is None:
                    partners = PartnerIndex(self.rules, self._partners(view, partition, changes))
                self._offer(view, partners, job_id, alloc)

    def _measure(self, spec: JobSpec) -> SharingProfile:
        """What the profiler reads for ``spec``: its configuration's figures where the
        profile file gives its configuration (the artifact's per-configuration data),
        else its model's profile; with ``profile_noise`` either way."""
        config = self.configs.of(spec) if self.configs is not None else None
        if config is None:
            return measure(spec, self.p.seed, self.p.profile_noise)
        self.configured.add(spec.job_id)
        if config.label is not None:
            self.labels[spec.job_id] = config.label
        return read(config.profile, spec, self.p.seed, self.p.profile_noise)

    def _measure_unprofiled(self, job_id: str, spec: JobSpec) -> None:
        """Features for a job the profiler has not measured: read once it runs (the
        artifact knows every job's features, so it pairs unprofiled jobs too)."""
        if job_id not in self.features:
            self.features[job_id] = self._measure(spec)

    def summary_fields(self) -> dict[str, float | int]:
        """Policy figures for ``summary.json``."""
        fields: dict[str, float | int] = {
            "lucid_profiled": self.profiled,
            "lucid_finished_in_profiler": self.finished_in_profiler,
            "lucid_paired": self.paired,
            "lucid_paired_over_4_gpus": self.paired_large,
            "lucid_paired_full_speed": self.paired_full_speed,
        }
        if self.configs is not None:
            fields["lucid_scored_by_configuration"] = len(self.configured)
        if self.scaler is not None:
            fields.update(lucid_profiler_grown=self.scaler.grown, lucid_profiler_shrunk=self.scaler.shrunk)
        if self.p.system_tuner:
            fields.update(
                lucid_tunings=len(self.tunings),
                lucid_profile_seconds=self.profiler.seconds,
                lucid_share_threshold=self.rules.threshold,
            )
        return fields


@register(
    "lucid",
    "Lucid (Hu et al. ASPLOS 2023): profiler partition (T_prof 200 s) in parallel with the main queue, "
    "PrDT sharing scores, affine pairs (score sum <= 2, priority within 2x, same GPUs, one node), PrAM "
    "priority GPUs x predicted duration; forecast sharing switch with sharing=adaptive. Pairs need "
    "gpu_share_limit >= 2.",
    LucidParams,
)
def make_lucid(params: LucidParams) -> Lucid:
    return Lucid(params)
