"""Sia's parameters: every default the Sia artifact's (``sia-simulator/simulator_config.py``
and the policy's command line in ``run_experiment.sh``), each rule of ours a named value
(the policy: :mod:`.sia`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shapeshift.policies.planaware.common import PlanAwareParams

#: Restart penalties (seconds) the Sia artifact measured per application (``get_restart_penalty``).
RESTART_PENALTIES = {"deepspeech2": 25.0, "imagenet": 250.0, "cifar10": 30.0, "bert": 120.0, "yolov3": 45.0}
ARTIFACT_DEFAULT_PENALTY = 30.0
ZERO_ALLOC_GAIN = 1e-4
CLIP = 3000.0


class SiaParams(PlanAwareParams):
    """Every default is the Sia artifact's (``simulator_config.py``); ``restore_penalty``
    applies to applications it has no measured penalty for."""

    round: float = Field(60.0, gt=0)
    p: float = Field(-0.5, lt=0)
    lambda_n: float = Field(1.1, ge=0)
    explore: bool = True
    max_replicas: int = Field(64, ge=1)
    profiles: str | None = None
    time_limit: float = Field(10.0, gt=0)
    #: ``tune``: a Pollux job whose workload fixes its batch (NCF, by the Pollux
    #: simulator's rule in the ``pollux`` reader) has it chosen like any other's, as the
    #: artifact runs Sia (``cluster.py``, ``Cluster.__init__``: batch tuning on for every
    #: job, NCF's target batch 32,768; ``job.py``, ``Job.update_local_bsz``): the best
    #: batch for its goodput on its GPUs, from its initial batch up to the application's
    #: largest, re-chosen after every epoch; ``keep`` (ours): it runs at its own batch.
    fixed_batch: Literal["tune", "keep"] = "tune"
    #: A job Sia runs at a fixed batch (with ``fixed_batch=keep``, NCF) gets at most the
    #: GPUs it asked for, as the artifact means to for NCF (``cluster.py``,
    #: ``get_sia_multi_job_info`` treats NCF as rigid); its check (``'ncf' in
    #: job.applications``) tests GPU-type names and never fires, so there NCF scales like
    #: any job: ``pin_fixed_batch=false`` runs that. A tuned batch is not pinned.
    pin_fixed_batch: bool = True
    #: ``online``: each job's own model per GPU type, fitted on what it ran there (the
    #: artifact's ``Job.update_params``); ``offline`` (ours): one model per application and
    #: type, fitted on the type's whole profile before the run.
    goodput_model: Literal["online", "offline"] = "online"
    #: ``epoch``: a Pollux job with an adaptive batch re-chooses it after every epoch it
    #: completes, recording a row of its model for each batch it runs (the artifact's
    #: ``Job.step``; :mod:`.epochs`); ``round`` (ours): once per round.
    batch_retune: Literal["epoch", "round"] = "epoch"
    #: ``placement``: on typed profiles a job's own batch choice keeps each GPU's batch
    #: within what was measured on its placement (the artifact's ``get_max_local_bsz``);
    #: ``type`` (ours): within the type's limit, the one the goodputs of every
    #: configuration assume (DeepSpeech2 on ``rtx``: 57, where a 4-GPU placement measured 80).
    batch_cap: Literal["placement", "type"] = "placement"
    #: ``submitted``: the goodputs search batches up to the job's submitted batch (the
    #: artifact's ``Job.get_speedup_fn``: ``target_batch_size``), its own batch up to the
    #: application's largest (``Job.update_local_bsz``); ``application`` (ours): both.
    goodput_batch: Literal["submitted", "application"] = "submitted"
    #: ``true``: a goodput search's candidate batch may pass its largest batch once each
    #: GPU's share is rounded up, and past it the GPUs' smallest per-GPU batches count
    #: (AdaptDL's ``GoodputFunction.optimize``, the artifact's ``goodput.py``); ``false``
    #: (ours): candidates above the largest batch are dropped.
    batch_overshoot: bool = True
    #: ``artifact``: each round every chosen job of a type is placed anew, widest first,
    #: from a cursor over the type's nodes (the artifact's ``alloc_to_placement_fast``,
    #: :mod:`.sia_placement`); ``keep`` (ours): a job whose count did not change stays
    #: put, the others are packed on the fewest nodes (:func:`.common.keep_or_pack`).
    placement: Literal["artifact", "keep"] = "artifact"
    #: ``auto``: CBC on the artifact's own program (:func:`.sia_mip.solve_cbc`, the
    #: artifact's solver and layout, so equal optima are decided as there) when cylp is
    #: installed (``pip install 'shapeshift[cbc]'``), HiGHS otherwise, with a warning;
    #: ``cbc``: CBC or an error; ``highs`` (ours): HiGHS on the job's own options and, on
    #: one GPU type, the exact knapsack taking the optimum with the most GPUs.
    solver: Literal["auto", "cbc", "highs"] = "auto"
