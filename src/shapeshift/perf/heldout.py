"""Held-out evaluation of the profiling planner and the model's additions.

The planner's hyper-parameters and the model's additions were designed on the same rows
that the few-shot figures in the docs are measured on, so those
figures are *tuned*. Here a setting (planner hyper-parameters x model options) is chosen
by leave-one-model-out: for each model, the setting with the lowest mean few-shot error
over the *other* models, and that model's error under it is the held-out figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from shapeshift.perf.fitting import fit
from shapeshift.perf.measurements import Measurement
from shapeshift.perf.planner import COVERAGE_BONUS, OFFLOAD_RUNS
from shapeshift.perf.rubick import DEFAULT_OPTIONS, ModelOptions
from shapeshift.perf.validate import ErrorStats, _split, error_stats, planner_sample

PAPER_OPTIONS = ModelOptions(spread=False, split_forward=False, stage_overhead=False, host_contention=False)


@dataclass(frozen=True)
class Setting:
    """One candidate: the planner's hyper-parameters and the model's options."""

    name: str
    options: ModelOptions = DEFAULT_OPTIONS
    offload_runs: int = OFFLOAD_RUNS
    coverage_bonus: float = COVERAGE_BONUS
    planner: dict[str, float] = field(default_factory=dict)


def candidate_settings(offload_runs: tuple[int, ...] = (1, 3), bonuses: tuple[float, ...] = (1.0,)) -> list[Setting]:
    """Model options (the paper's, or all four additions) x the planner's Offload quota x
    its coverage bonus. The shipped defaults are ``all/offload3/cover1``. (The default grid
    is small because each setting costs a planner run and a fit per model.)"""
    out = []
    for opt_name, options in (("paper", PAPER_OPTIONS), ("all", DEFAULT_OPTIONS)):
        for runs in offload_runs:
            for bonus in bonuses:
                out.append(Setting(f"{opt_name}/offload{runs}/cover{bonus:g}", options, runs, bonus))
    return out


def few_shot_error(rows: Sequence[Measurement], setting: Setting, sample: int = 7) -> ErrorStats:
    """Error on every other row of a fit on the planner's ``sample`` rows under ``setting``."""
    pick = planner_sample(rows, sample, offload_runs=setting.offload_runs, coverage_bonus=setting.coverage_bonus)
    train, test = _split(rows, pick)
    return error_stats(fit(train, options=setting.options), test)


def leave_one_model_out(errors: Mapping[str, Mapping[str, float]]) -> dict[str, str]:
    """For each model, the setting whose mean error over the *other* models is lowest
    (ties: the first in ``errors``' order). ``errors[setting][model]``."""
    settings = list(errors)
    models = sorted({m for e in errors.values() for m in e})
    choice = {}
    for held in models:
        others = [m for m in models if m != held]
        scores = [float(np.mean([errors[s][m] for m in others])) for s in settings]
        choice[held] = settings[int(np.argmin(scores))]
    return choice
