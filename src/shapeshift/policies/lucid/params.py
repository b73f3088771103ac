"""``lucid``'s parameters: each names its source (thesis, artifact, or ours).

Kept apart from ``policy.py`` so the policy module stays one job; ``policy`` re-exports
``LucidParams``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from shapeshift.perf.colocation import PROFILED
from shapeshift.policies.framework.placement import PlacementName
from shapeshift.policies.framework.registry import PolicyParams
from shapeshift.policies.lucid.speeds import ARTIFACT_FULL_SPEED


class LucidParams(PolicyParams):
    #: Profiler nodes taken from every VC (artifact: 2 from Philly's single VC; the
    #: bundled ``philly`` data set sets 2, with 80 s and 4 GPUs below).
    profiler_nodes: int = Field(1, ge=0)
    #: T_prof, seconds a job runs in the profiler at most (thesis: 200 s; artifact Philly 80 s).
    profile_seconds: float = Field(200.0, gt=0.0, allow_inf_nan=False)
    #: Largest job the profiler takes (artifact Venus: 8 GPUs; Philly: 4).
    profiler_max_gpus: int = Field(8, ge=1)
    #: Ours, off: the profiler reads each figure (GPU utilisation, memory-bandwidth use, GPU
    #: memory) times ``1 + U(-profile_noise, profile_noise)``, seeded per job, standing for
    #: one short run's measurement error. The artifact reads each configuration's measured
    #: figures from its table as they are, the same figures its scores use (0); the thesis
    #: gives no noise model for its simulation.
    profile_noise: float = Field(0.0, ge=0.0, lt=1.0, allow_inf_nan=False)
    #: Ours, off: a job waits for (and runs in) the profiler before it joins the main
    #: queue. The artifact profiles in a separate pass, so a job's main-queue wait counts
    #: from its submission and the main queue may start it before it was profiled.
    profile_before_queue: bool = False
    #: Ours, off: only jobs with profiled features look for a partner. The artifact pairs
    #: any job of at most 8 GPUs (every job's features are known to its simulator).
    pair_profiled_only: bool = False
    #: Ours, off: only jobs running before a decision may take a partner in it. The
    #: artifact's allocation pass appends each job it starts to its ``run_list`` at once,
    #: so a later job of the same pass may join a job placed alone just before it.
    partners_running_only: bool = False
    #: What a pair's end releases. ``both`` (the artifact's intent): either job's end
    #: frees the other to take a new partner, as its ``speed_recover`` call on the
    #: partner means. ``newer`` (the artifact's code, off): its ``Node.check_colocate_jobs``
    #: compares a job id with a job, so when the older job of a pair ends first it finds
    #: the ending job itself and the newer one is never offered as a partner again (its
    #: engine also leaves that job at its shared speed). A slip in the artifact, like its
    #: NCF pin in Sia's: kept as a name and measured (docs/lucid-artifact.md), not the default.
    pair_release: Literal["newer", "both"] = "both"
    #: A pair runs at full speed for both jobs when either job's model (in the artifact's
    #: names, ``speeds.artifact_model``) is one of these: the artifact's
    #: ``updater.check_outside_job`` ("little influence"). Empty (ours, off; on the command
    #: line ``full_speed_pair_models=``): every pair is slowed by the run's interference model.
    full_speed_pair_models: tuple[str, ...] = ARTIFACT_FULL_SPEED
    #: Lend the profiler an idle main node while jobs pile up there (artifact: Venus only).
    profiler_scaling: bool = False
    #: The thesis's system tuner: re-choose T_prof and share_threshold by replaying recent
    #: history every ``tuner_every_days`` on the last ``tuner_jobs`` finished jobs (tuner.py).
    system_tuner: bool = False
    tuner_every_days: float = Field(7.0, gt=0.0, allow_inf_nan=False)
    tuner_jobs: int = Field(300, ge=10)
    #: Sharing scores per profiled configuration (the artifact: model, dataset, batch size,
    #: AMP; ``configs.py``) where ``profiles`` gives configurations, else per model (our
    #: catalog's one profile per model); ``model`` ignores ``profiles``.
    scores: Literal["configuration", "model"] = "configuration"
    #: A per-configuration profile file in the artifact's column layout (``configs.py``),
    #: read from the user's disk; "" = none (every job is scored per model).
    profiles: str = ""
    #: Binder: most a pair's sharing scores may add up to (artifact: 2).
    share_threshold: int = Field(2, ge=0, le=4)
    #: Binder: a newcomer's priority may be at most this times its partner's (artifact: 2).
    priority_ratio: float = Field(2.0, gt=0.0, allow_inf_nan=False)
    #: always = share whenever the binder allows (the artifact's ``check_pas`` everywhere
    #: but Venus); adaptive = the forecaster's switch (the artifact's Venus runs); off.
    sharing: Literal["adaptive", "always", "off"] = "always"
    #: Sharing goes off while the forecast mean is at most this (artifact: 2 jobs / 10 min).
    switch_load: float = Field(2.0, ge=0.0, allow_inf_nan=False)
    #: Seconds between checks of the switch (artifact: 100).
    switch_every: float = Field(100.0, gt=0.0, allow_inf_nan=False)
    #: Days between retrainings of the duration model and the forecaster (artifact: weekly).
    retrain_days: float = Field(7.0, gt=0.0, allow_inf_nan=False)
    #: Finished jobs needed before the first duration model (earlier: the running mean).
    min_train_jobs: int = Field(200, ge=10)
    #: Most recent finished jobs a duration model trains on.
    train_window: int = Field(10_000, ge=100)
    #: PrAM (both models): the artifact's learning rate, interactions, boosting-round cap
    #: and bagging (interpret-core 0.2.7's 8 outer bags; the installed release's is 14).
    pram_learning_rate: float = Field(0.01, gt=0.0, le=1.0)
    pram_interactions: int = Field(20, ge=0)
    pram_max_rounds: int = Field(5000, ge=1)
    outer_bags: int = Field(8, ge=1)
    #: The rest of the EBM's settings: those of interpret-core 0.2.7, the release the
    #: artifact's notebook ran on ("0.2.7": cyclic rounds, uniform bins, early stopping
    #: after 50), or ours, "installed": the installed interpret's and PrAM's defaults.
    pram_release: Literal["0.2.7", "installed"] = "0.2.7"
    #: The thesis's rule, off as the artifact's notebook lacks it: the duration estimate
    #: made non-decreasing in the GPU count (pool-adjacent violators, ``models.py``).
    monotone_gpus: bool = False
    #: Ablation only, not Lucid: order the main queue by the job's recorded duration
    #: (GPUs x true duration) instead of the learned estimate, to measure what the
    #: estimate costs. A scheduler cannot know it.
    oracle_durations: bool = False
    #: Ours: the placement of every job that is not paired (profiling and main nodes).
    #: The artifact consolidates (``consolidated``); ``fgd`` is Fragmentation Gradient
    #: Descent for GPU-sharing clusters (docs/fgd.md), for Lucid's ordering with FGD.
    placement: PlacementName = "consolidated"
    seed: int = 0

    @field_validator("full_speed_pair_models")
    @classmethod
    def _artifact_names(cls, models: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [m for m in models if m not in PROFILED]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not one of the artifact's models: {', '.join(sorted(PROFILED))}")
        return models
