"""Transformations of a workload: cut, filter, speed up, shrink, make feasible.

Each takes a ``Workload`` and returns a new one (nothing is modified in place); the
random one (down-sampling) takes a seed. They are what turns a public trace into the
load an experiment needs, the way the Rubick and Pollux evaluations built theirs from
Philly (the busiest 12 hours, down-sampled to a 64-GPU cluster).

* ``time_window``: jobs submitted in ``[start, end)`` seconds, times shifted to start at 0.
* ``filter_vc``: jobs of the named virtual clusters.
* ``scale_load``: arrivals compressed (factor > 1, more load) or stretched (< 1):
  submit times divided by the factor; durations unchanged.
* ``downsample``: Rubick's recipe: optionally keep only the busiest window of ``hours``
  hours, then keep each job with probability ``target_gpus / source_gpus``. Busiest =
  the most GPUs requested by the jobs submitted in the window (windows start at a
  submission). Submitted GPU-hours would be the other candidate, but durations are so
  heavy-tailed that one multi-week job decides it (on Philly the GPU-hour-busiest 12 h
  hold 16 jobs; the GPU-busiest hold 3,232).
* ``replace_infeasible_gpus``: a job whose model cannot run on its GPU count gets the
  nearest feasible count (ties: the smaller), its duration scaled to keep its GPU-hours
  (``duration x old / new``); iterations are kept; a requested data-parallel plan is
  resized, any other plan is dropped (it cannot run on the new count).
* ``cpu_jobs``: keep, drop, or include (unflag, so they are simulated) CPU-only jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from shapeshift.errors import InputError
from shapeshift.model import ExecutionPlan
from shapeshift.workloads.workload import Workload

_TIME_COLUMNS = ("submit_time", "start_time", "end_time")


def _rebuild(workload: Workload, frame: pd.DataFrame) -> Workload:
    return Workload.from_frame(workload.name, frame.reset_index(drop=True))


def _shift(frame: pd.DataFrame, offset: float) -> pd.DataFrame:
    frame = frame.copy()
    for column in _TIME_COLUMNS:
        if column in frame.columns:
            frame[column] = frame[column] - offset
    return frame


def time_window(workload: Workload, start: float | None = None, end: float | None = None) -> Workload:
    """Jobs submitted in ``[start, end)`` (seconds; ``None`` = open); times then count from
    ``start`` (from the first kept submission when ``start`` is None)."""
    if start is not None and end is not None and end <= start:
        raise InputError(f"window end ({end:g} s) must be after its start ({start:g} s)", field="window")
    submit = workload.frame["submit_time"]
    keep = pd.Series(True, index=submit.index)
    if start is not None:
        keep &= submit >= start
    if end is not None:
        keep &= submit < end
    frame = workload.frame[keep]
    origin = start if start is not None else (float(frame["submit_time"].min()) if len(frame) else 0.0)
    return _rebuild(workload, _shift(frame, origin))


def filter_vc(workload: Workload, names: Iterable[str]) -> Workload:
    """Jobs of the named virtual clusters; an unknown name is an error listing the known ones."""
    wanted = list(dict.fromkeys(names))
    known = set(workload.frame["vc"].unique())
    unknown = [n for n in wanted if n not in known]
    if unknown:
        shown = ", ".join(sorted(repr(k) for k in known)[:20])
        raise InputError(f"unknown virtual cluster(s) {', '.join(unknown)}; the workload has: {shown}", field="vc")
    return _rebuild(workload, workload.frame[workload.frame["vc"].isin(wanted)])


def scale_load(workload: Workload, factor: float) -> Workload:
    """Divide submit times by ``factor``: 2 doubles the arrival rate, 0.5 halves it. Start and
    end times of a log no longer describe the scaled load and are dropped."""
    if not (np.isfinite(factor) and factor > 0):
        raise InputError(f"load scale must be a positive number, got {factor}", field="scale")
    frame = workload.frame.drop(columns=[c for c in ("start_time", "end_time", "queue") if c in workload.frame])
    frame = frame.assign(submit_time=frame["submit_time"] / factor)
    return _rebuild(workload, frame)


def busiest_window(workload: Workload, hours: float) -> tuple[float, float]:
    """``(start, end)`` seconds of the ``hours``-long window whose submitted jobs request the
    most GPUs; windows start at a submission; the earliest wins a tie."""
    if not hours > 0:
        raise InputError(f"window length must be > 0 hours, got {hours}", field="downsample")
    frame = workload.frame
    if frame.empty:
        return 0.0, hours * 3600.0
    submit = frame["submit_time"].to_numpy(dtype=float)
    total = np.concatenate(([0.0], np.cumsum(frame["num_gpus"].to_numpy(dtype=float))))
    length = hours * 3600.0
    ends = np.searchsorted(submit, submit + length, side="left")
    best = int(np.argmax(total[ends] - total[np.arange(len(submit))]))
    return float(submit[best]), float(submit[best] + length)


def downsample(
    workload: Workload, target_gpus: int, source_gpus: int, hours: float | None = None, seed: int = 0
) -> Workload:
    """Shrink a trace to a ``target_gpus`` cluster: busiest ``hours`` (optional), then keep
    each job with probability ``target_gpus / source_gpus`` (one seeded draw per job)."""
    if not (target_gpus > 0 and source_gpus > 0):
        raise InputError("down-sampling needs target and source GPU counts > 0", field="downsample")
    if target_gpus > source_gpus:
        raise InputError(
            f"cannot down-sample to more GPUs ({target_gpus}) than the source has ({source_gpus})", field="downsample"
        )
    if hours is not None:
        start, end = busiest_window(workload, hours)
        workload = time_window(workload, start, end)
    rng = np.random.default_rng(seed)
    keep = rng.random(len(workload)) < target_gpus / source_gpus
    return _rebuild(workload, workload.frame[keep])


Feasible = Mapping[str, Sequence[int]] | Callable[[str], Sequence[int] | None]


def _nearest(count: int, options: Sequence[int]) -> int:
    return min(options, key=lambda g: (abs(g - count), g))


def replace_infeasible_gpus(workload: Workload, feasible: Feasible) -> Workload:
    """Move every job whose model cannot run on its GPU count to the nearest feasible count,
    keeping its GPU-hours. ``feasible`` maps a model name to its feasible GPU counts (a
    mapping, or a callable returning ``None`` for models it does not know); jobs of
    unknown models, without a model, or CPU-only are left as they are."""
    lookup = feasible.get if isinstance(feasible, Mapping) else feasible
    frame = workload.frame.copy()
    options: dict[str, tuple[int, ...] | None] = {}
    for model in frame["model"].unique().tolist():
        found = lookup(model) if model else None
        if found is not None:
            counts = tuple(sorted({int(g) for g in found}))
            if not counts or counts[0] < 1:
                raise InputError(f"feasible GPU counts of model {model!r} must be >= 1, got {list(found)}")
            options[model] = counts
    if not options:
        return workload
    new = frame["num_gpus"].to_numpy().copy()
    for i, (model, gpus) in enumerate(zip(frame["model"].tolist(), frame["num_gpus"].tolist(), strict=True)):
        counts = options.get(model)
        if counts and gpus > 0 and gpus not in counts:
            new[i] = _nearest(gpus, counts)
    changed = new != frame["num_gpus"].to_numpy()
    if not changed.any():
        return workload
    old = frame["num_gpus"].to_numpy()
    frame["duration"] = np.where(changed, frame["duration"].to_numpy() * old / np.maximum(new, 1), frame["duration"])
    plans = frame["plan"].tolist()
    for i in np.flatnonzero(changed):
        if plans[i]:
            plan = ExecutionPlan.parse(plans[i])
            plans[i] = str(replace(plan, dp=int(new[i]))) if plan.tp == 1 and plan.pp == 1 else ""
    frame["plan"] = plans
    frame["num_gpus"] = new
    return _rebuild(workload, frame)


CPU_JOB_MODES = ("keep", "drop", "include")


def cpu_jobs(workload: Workload, mode: str) -> Workload:
    """``keep`` CPU-only jobs flagged (left out of GPU simulation), ``drop`` them, or
    ``include`` them (clear the flag: simulated as 0-GPU jobs)."""
    if mode not in CPU_JOB_MODES:
        raise InputError(f"unknown CPU-job mode {mode!r}; expected {', '.join(CPU_JOB_MODES)}")
    frame = workload.frame
    if mode == "keep" or not frame["cpu_only"].any():
        return workload
    if mode == "drop":
        return _rebuild(workload, frame[~frame["cpu_only"]])
    return _rebuild(workload, frame.assign(cpu_only=False))
