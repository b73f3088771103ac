"""A seeded Helios-schema workload: jobs with users, names, VCs and models.

The Philly trace has no users or job names, but Lucid's duration model and QSSF's
history predictors learn from them. Helios (Hu et al., SC 2021) reports the structure
they exploit: a few users submit most jobs, users resubmit the same jobs, and a job's
duration is predictable from its user's and name's history. The trace also has a
diurnal submission cycle. This generator produces that structure with Philly-fitted
sizes and durations (``shapeshift.workloads.generators.philly_fit``):

* users get Zipf weights (exponent ``zipf``). Each user belongs to one VC (``vcs``
  named ``vc0``..., or ``vc_names`` drawn with ``vc_weights``) and owns
  ``names_per_user`` job names;
* each name has one GPU count and one characteristic duration, both drawn from the
  Philly fit, and one model drawn from the catalog models with sharing profiles;
* a job picks a user by weight and one of the user's names uniformly. Its duration is
  the name's characteristic duration times a log-normal factor (sigma
  ``duration_sigma``), kept within [10 s, 7 days];
* arrivals follow a Poisson process whose rate follows ``rate x (1 + amplitude x
  sin(2 pi (hour - 8) / 24))``, sampled by thinning: busiest around 14:00, quietest
  around 02:00.

Everything follows ``seed``. The parameters are ours (the Helios traces are not
redistributable), so figures from this workload say so.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from shapeshift.errors import InputError
from shapeshift.workloads.workload import MAX_JOBS, Workload

#: Catalog models with sharing profiles, for the generated job names.
MODELS = ("resnet18", "resnet50", "vgg16", "inception3", "transformer", "bert-base", "lstm", "ncf", "a3c", "cyclegan")


def helios_synthetic(
    jobs: int,
    rate: float,
    *,
    seed: int = 0,
    users: int = 60,
    vcs: int = 4,
    names_per_user: int = 4,
    zipf: float = 1.1,
    duration_sigma: float = 0.6,
    amplitude: float = 0.5,
    vc_names: list[str] | None = None,
    vc_weights: list[float] | None = None,
    name: str | None = None,
) -> Workload:
    """``jobs`` jobs at ``rate`` jobs/hour on average; see the module docstring."""
    from shapeshift.workloads.generators import philly_fit

    if jobs > MAX_JOBS:
        raise InputError(f"helios-synthetic: jobs must be at most {MAX_JOBS:,}, got {jobs}", field="jobs")
    if jobs < 0 or not rate > 0 or users < 1 or vcs < 1 or names_per_user < 1:
        raise InputError("helios-synthetic needs jobs >= 0, rate > 0, users, vcs and names_per_user >= 1")
    if not (0 <= amplitude < 1 and duration_sigma >= 0 and zipf > 0):
        raise InputError("helios-synthetic needs 0 <= amplitude < 1, duration_sigma >= 0 and zipf > 0")
    rng = np.random.default_rng(seed)
    dist = philly_fit()
    weights = 1.0 / np.arange(1, users + 1) ** zipf
    weights /= weights.sum()
    labels = list(vc_names) if vc_names else [f"vc{i}" for i in range(vcs)]
    if vc_weights is not None and (len(vc_weights) != len(labels) or min(vc_weights) < 0 or sum(vc_weights) <= 0):
        raise InputError("helios-synthetic: vc_weights needs one weight >= 0 per VC, not all 0")
    share = None if vc_weights is None else np.asarray(vc_weights, dtype=float) / float(sum(vc_weights))
    user_vc = rng.choice(len(labels), size=users, p=share)
    n_names = users * names_per_user
    name_sizes = dist.sample_sizes(rng, n_names)
    name_durations = dist.durations(name_sizes, rng.random(n_names))
    name_models = np.asarray(MODELS, dtype=object)[rng.integers(0, len(MODELS), size=n_names)]

    submit = _diurnal_arrivals(rng, jobs, rate, amplitude)
    user = rng.choice(users, size=jobs, p=weights)
    which = user * names_per_user + rng.integers(0, names_per_user, size=jobs)
    factor = np.exp(rng.normal(0.0, duration_sigma, size=jobs))
    durations = np.clip(name_durations[which] * factor, 10.0, 7 * 86400.0)
    frame = pd.DataFrame(
        {
            "job_id": [f"h{i:06d}" for i in range(jobs)],
            "submit_time": np.round(submit, 3),
            "num_gpus": name_sizes[which],
            "duration": np.round(durations, 1),
            "user": [f"u{u:03d}" for u in user],
            "name": [f"{name_models[w]}_{w:04d}" for w in which],
            "vc": [labels[user_vc[u]] for u in user],
            "model": name_models[which],
        }
    )
    return Workload.from_frame(name or f"helios-synthetic-{rate:g}ph-seed{seed}", frame)


def _diurnal_arrivals(rng: np.random.Generator, jobs: int, rate: float, amplitude: float) -> np.ndarray:
    """Thinning: candidates at the peak rate, each kept with probability rate(t) / peak."""
    peak = rate * (1 + amplitude) / 3600.0
    out: list[float] = []
    t = 0.0
    while len(out) < jobs:
        t += float(rng.exponential(1.0 / peak))
        hour = (t / 3600.0) % 24
        if rng.random() * (1 + amplitude) <= 1 + amplitude * math.sin(2 * math.pi * (hour - 8) / 24):
            out.append(t)
    arr = np.array(out)
    return arr - arr[0] if jobs else arr
