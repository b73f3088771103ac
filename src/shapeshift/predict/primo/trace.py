"""Fit, choose and score a Primo duration model on a whole trace, with a time-ordered split.

What ``shapeshift explain --trace`` and ``benchmarks/bench_primo.py`` run:

1. ``duration_table``: one row per job with the features the ``gbdt`` / ``primo``
   estimators use (user, VC and name-bucket codes in first-seen order; GPUs, CPUs; month,
   weekday, hour, minute of ``epoch + submit_time``, UTC) and the target
   ``log1p(duration)``. Features with a single value in the trace (Philly has no users
   or names) are dropped, and the drop is reported.
2. ``time_split``: jobs submitted in the last ``test_fraction`` of the submissions are the
   test set; the training set is the earlier jobs that had *finished* (submit + duration,
   queueing ignored) before the first test submission, so no training label comes from the
   test period.
3. ``fit_trace``: ``select_model`` on the training set (its own validation part is the
   latest 20% of it), then MAE and R^2 on the test set, in log space (what the model fits)
   and MAE in hours.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from shapeshift.errors import InputError
from shapeshift.predict.primo.select import Budget, Selection, select_model
from shapeshift.predict.similarity import name_stem
from shapeshift.workloads.workload import Workload

TARGETS = ("duration",)
NOMINAL = ("user", "vc", "name_bucket")


@dataclass(frozen=True)
class TraceTable:
    """Feature table, log target and timing of every job with a recorded duration."""

    x: pd.DataFrame
    y: np.ndarray
    submit: np.ndarray
    end: np.ndarray
    dropped: tuple[str, ...]
    #: Per nominal feature, code -> original value (to print explanations in words).
    values: dict[str, list[str]]

    def feature_types(self) -> list[str]:
        return ["nominal" if c in NOMINAL else "continuous" for c in self.x.columns]


def _codes(column: pd.Series) -> tuple[np.ndarray, list[str]]:
    codes, uniques = pd.factorize(column, sort=False)
    return codes.astype(np.float64), [str(u) for u in uniques]


def duration_table(workload: Workload, epoch: float = 0.0) -> TraceTable:
    """The feature table of ``workload`` (see the module docstring)."""
    frame = workload.frame
    frame = frame[frame["duration"].notna() & ~frame["cpu_only"]]
    if len(frame) < 20:
        raise InputError(f"the trace has {len(frame)} GPU jobs with a duration; need at least 20", field="--trace")
    when = pd.to_datetime(epoch + frame["submit_time"].to_numpy(), unit="s", utc=True)
    columns: dict[str, np.ndarray] = {}
    values: dict[str, list[str]] = {}
    for name, source in (("user", frame["user"]), ("vc", frame["vc"]), ("name_bucket", frame["name"].map(name_stem))):
        columns[name], values[name] = _codes(source.astype(str))
    columns.update(
        {
            "gpus": frame["num_gpus"].to_numpy(np.float64),
            "cpus": frame["num_cpus"].to_numpy(np.float64),
            "month": when.month.to_numpy(np.float64),
            "weekday": when.day_of_week.to_numpy(np.float64),
            "hour": when.hour.to_numpy(np.float64),
            "minute": when.minute.to_numpy(np.float64),
        }
    )
    dropped = tuple(n for n, c in columns.items() if np.unique(c).size < 2)
    x = pd.DataFrame({n: c for n, c in columns.items() if n not in dropped})
    if x.shape[1] == 0:
        raise InputError("every feature has a single value in this trace: nothing to learn from", field="--trace")
    duration = frame["duration"].to_numpy(np.float64)
    if not np.isfinite(duration).all() or (duration < 0).any():
        raise InputError("durations must be finite and >= 0", field="duration")
    submit = frame["submit_time"].to_numpy(np.float64)
    return TraceTable(x, np.log1p(duration), submit, submit + duration, dropped, values)


def time_split(table: TraceTable, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, test rows): see the module docstring."""
    if not 0 < test_fraction < 1:
        raise InputError(f"the test fraction must be in (0, 1), got {test_fraction}", field="--test-fraction")
    order = np.argsort(table.submit, kind="stable")
    first_test = order[int(len(order) * (1 - test_fraction))]
    cut = table.submit[first_test]
    test = np.flatnonzero(table.submit >= cut)
    train = np.flatnonzero((table.submit < cut) & (table.end <= cut))
    train = train[np.argsort(table.end[train], kind="stable")]  # end-time order: validation = newest
    if len(train) < 20 or len(test) < 1:
        raise InputError(
            f"the time-ordered split leaves {len(train)} finished training jobs and {len(test)} test jobs",
            field="--test-fraction",
        )
    return train, test


def regression_metrics(predicted_log: np.ndarray, actual_log: np.ndarray) -> dict[str, float]:
    """MAE and R^2 in log1p-seconds, and MAE in hours."""
    err = predicted_log - actual_log
    total = float(np.sum((actual_log - actual_log.mean()) ** 2))
    hours = np.abs(np.expm1(predicted_log) - np.expm1(actual_log)) / 3600.0
    return {
        "mae_log": float(np.mean(np.abs(err))),
        "r2_log": 1.0 - float(np.sum(err**2)) / total if total > 0 else float("nan"),
        "mae_hours": float(np.mean(hours)),
    }


@dataclass(frozen=True)
class TraceFit:
    table: TraceTable
    train: np.ndarray
    test: np.ndarray
    selection: Selection
    metrics: dict[str, Any]


def fit_trace(
    workload: Workload,
    *,
    target: str = "duration",
    test_fraction: float = 0.2,
    n_trials: int = 20,
    seed: int = 0,
    kinds: tuple[str, ...] = ("pram", "prdt"),
    epoch: float = 0.0,
    budget: Budget | None = None,
    outer_bags: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> TraceFit:
    """Choose a model on the earlier jobs and score it on the later ones."""
    if target not in TARGETS:
        raise InputError(f"unknown target {target!r}; known: {', '.join(TARGETS)}", field="--target")
    table = duration_table(workload, epoch)
    train, test = time_split(table, test_fraction)
    try:
        selection = select_model(
            table.x.iloc[train],
            table.y[train],
            n_trials=n_trials,
            seed=seed,
            kinds=kinds,
            budget=budget,
            pram_params={"outer_bags": outer_bags},
            feature_types=table.feature_types(),
            progress=progress,
        )
    except ValueError as exc:
        raise InputError(str(exc), field="--budget") from None
    predicted = selection.model.predict(table.x.iloc[test])
    metrics = {
        "train_jobs": len(train),
        "test_jobs": len(test),
        "features": list(table.x.columns),
        "dropped_features": list(table.dropped),
        "test": regression_metrics(predicted, table.y[test]),
        "selection": selection.summary(),
    }
    return TraceFit(table, train, test, selection, metrics)
