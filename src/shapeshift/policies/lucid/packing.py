"""Lucid's packing analysis model and affine-pair binder.

**Packing analysis model** (Hu's thesis chapter 4; Lucid, ASPLOS 2023; artifact
``simulation/analyzer/analyzer.py``): a Primo PrDT classifier labels each job Tiny (0),
Medium (1) or Jumbo (2), its *sharing score*, from its profiled GPU utilisation,
memory-bandwidth use and GPU memory. The artifact labels its training jobs by their mean
measured speed beside every partner: below 0.85 Jumbo, below 0.95 Medium, else Tiny,
and fits the tree with ``prune_factor`` 0.0001. We label the same way, with the mean
speed our interference model gives each profiled model beside every profiled model, on
20 noisy profiler readings per model. The tree thus learns the simulator's own
interference, as the artifact's learns the measured one.

**Affine-pair binder** ("indolent packing"; artifact ``simulation/policy/lucid.py``,
``job_pair_picker_time_aware``): a waiting job may join a running job's GPUs when

* the partner runs alone (at most two jobs per GPU);
* both use the same number of GPUs, on one node (never a distributed job);
* their GPU memory together fits the GPU (the artifact: 24 GB of an RTX 3090; here the
  node's ``gpu_mem_gb``);
* their sharing scores sum to at most ``threshold`` (default 2);
* the newcomer's priority (GPUs x predicted duration) is at most ``ratio`` (default 2)
  times the partner's, so a long job never parks on a short one's GPUs.

The first running job, in start order, that qualifies is the partner (the artifact takes
``affinity_jobs[0]``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from shapeshift.engine.sharing import GpuLedger
from shapeshift.model import JobSpec
from shapeshift.perf.colocation import PROFILED, SharingProfile, UtilisationInterference, noisy

PACKING_FEATURES = ("gpu_util", "mem_bw", "gpu_mem")
LABELS = ("Tiny", "Medium", "Jumbo")
#: analyzer.py: mean co-located speed below these makes a job Jumbo / Medium.
JUMBO_BELOW = 0.85
MEDIUM_BELOW = 0.95
PRUNE = 1e-4
READINGS = 20


def label_of(mean_speed: float) -> int:
    return 2 if mean_speed < JUMBO_BELOW else 1 if mean_speed < MEDIUM_BELOW else 0


def _as_spec(name: str) -> JobSpec:
    return JobSpec(name, 0.0, 1, duration=1.0, model=name)


def training_set(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Noisy profiles of every profiled model, labelled by their mean pair speed."""
    model = UtilisationInterference(seed=seed)
    names = sorted(PROFILED)
    rows, labels = [], []
    for name in names:
        speeds = [model.pair_speed(_as_spec(name), _as_spec(other)) for other in names]
        label = label_of(float(np.mean(speeds)))
        for i in range(READINGS):
            p = noisy(PROFILED[name], f"{name}#{i}", seed)
            rows.append([p.gpu_util, p.mem_bw, p.gpu_mem_gb])
            labels.append(label)
    return np.array(rows), np.array(labels)


def fit_packing_model(seed: int = 0):  # type: ignore[no-untyped-def]
    """The PrDT that scores jobs (fitted once; deterministic for a seed). Features in the
    order of ``PACKING_FEATURES``."""
    from shapeshift.predict.primo import PrDTClassifier

    x, y = training_set(seed)
    return PrDTClassifier(ccp_alpha=PRUNE, random_state=seed).fit(x, y)


def sharing_score(model, profile: SharingProfile) -> int:  # type: ignore[no-untyped-def]
    """The PrDT's label for one profile, read from its fitted tree (``predict`` re-validates
    its input with scikit-learn on every call; ``test_lucid`` checks both agree)."""
    x = np.array([[profile.gpu_util, profile.mem_bw, profile.gpu_mem_gb]])
    values = model.form_.value[model.form_.leaves(x)]
    return int(model.classes_[int(np.argmax(values[0]))])


@dataclass(frozen=True)
class Candidate:
    """What the binder knows of a running job."""

    job_id: str
    gpus: int
    score: int
    priority: float
    gpu_mem: float


@dataclass(frozen=True)
class BinderRules:
    threshold: int = 2
    ratio: float = 2.0

    def why_not(self, ledger: GpuLedger, job: Candidate, partner: Candidate) -> str:
        """Why ``job`` may not join ``partner`` ("" = it may)."""
        reason = self.why_not_jobs(job, partner)
        if reason:
            return reason
        devices = ledger.devices.get(partner.job_id, ())
        if len({node for node, _ in devices}) != 1:
            return "partner spans nodes"
        for node, gpu in devices:
            if len(ledger.holders[node][gpu]) != 1:
                return "partner already shares"
            if job.gpu_mem > ledger.free_memory(node, gpu) + 1e-9:
                return "not enough GPU memory"
        return ""

    def why_not_jobs(self, job: Candidate, partner: Candidate) -> str:
        """The binder's rules on the two jobs alone (GPU counts, scores, priorities)."""
        if job.gpus != partner.gpus:
            return "different GPU counts"
        if job.score + partner.score > self.threshold:
            return f"sharing scores {job.score}+{partner.score} over {self.threshold}"
        if job.priority > self.ratio * partner.priority:
            return "priority over twice the partner's"
        return ""

    def partner(self, ledger: GpuLedger, job: Candidate, running: Iterable[Candidate]) -> Candidate | None:
        """The first running job ``job`` may join, or ``None``."""
        if job.gpus == 0:
            return None
        for candidate in running:
            if not self.why_not(ledger, job, candidate):
                return candidate
        return None


class PartnerIndex:
    """Running jobs that could take a partner, by (GPU count, sharing score), in start
    order. ``pick`` gives the same partner as scanning them all in start order
    (``BinderRules.partner``), but looks only at counts and scores that can qualify, so a
    decision over thousands of waiting jobs stays cheap.

    ``add`` appends a job placed alone earlier in the same decision: the artifact's
    allocation pass appends each job it starts to its ``run_list`` at once, so a later job
    of the same pass may join it. Such a job holds no GPU in the ledger yet; it is alone
    on empty GPUs of one node, so only its own memory counts against the GPU's."""

    def __init__(self, rules: BinderRules, candidates: Iterable[Candidate]):
        self.rules = rules
        self.buckets: dict[tuple[int, int], list[tuple[int, Candidate]]] = {}
        #: Jobs placed in this decision: their node and its GPUs' memory.
        self.fresh: dict[str, tuple[int, float]] = {}
        self._rank = 0
        for candidate in candidates:
            self._append(candidate)

    def _append(self, candidate: Candidate) -> None:
        self.buckets.setdefault((candidate.gpus, candidate.score), []).append((self._rank, candidate))
        self._rank += 1

    def add(self, candidate: Candidate, node: int, gpu_mem: float) -> None:
        """``candidate`` was placed alone on ``node`` (GPUs of ``gpu_mem`` GB) in this decision."""
        self.fresh[candidate.job_id] = (node, gpu_mem)
        self._append(candidate)

    def _why_not(self, ledger: GpuLedger, job: Candidate, partner: Candidate) -> str:
        placed = self.fresh.get(partner.job_id)
        if placed is None:
            return self.rules.why_not(ledger, job, partner)
        reason = self.rules.why_not_jobs(job, partner)
        if reason:
            return reason
        return "not enough GPU memory" if job.gpu_mem > placed[1] - partner.gpu_mem + 1e-9 else ""

    def pick(self, ledger: GpuLedger, job: Candidate) -> Candidate | None:
        """The partner ``job`` joins (removed from the index), or ``None``."""
        best: tuple[int, Candidate, list[tuple[int, Candidate]]] | None = None
        for score in range(self.rules.threshold - job.score + 1):
            bucket = self.buckets.get((job.gpus, score))
            for entry in bucket or ():
                if best is not None and entry[0] >= best[0]:
                    break
                if not self._why_not(ledger, job, entry[1]):
                    best = (entry[0], entry[1], bucket)  # type: ignore[assignment]
                    break
        if best is None:
            return None
        best[2].remove((best[0], best[1]))
        return best[1]
