"""Workloads of an experiment: a trace file or a seeded generator, then transformations.

Generators and transformations are small registries of pydantic parameter models, so an
experiment file is checked key by key before anything runs and a sweep axis such as
``workload.rate`` is just a parameter override. Adding a generator means one entry in
``GENERATORS``; the schema needs no change.

Generators:

* ``philly-poisson`` and ``philly-bursty``: ``shapeshift.workloads.generators`` (job sizes
  and durations fitted to the Philly trace; bursts of short jobs every ``period`` hours);
* ``poisson``: Poisson arrivals at ``rate`` jobs/hour with the Philly-shaped size mix and
  log-normal durations of ``shapeshift.workloads.synthetic``; with ``daily_spike`` the
  arrival rate is multiplied by ``factor`` for ``hours`` hours every day from
  ``start_hour`` (a non-homogeneous Poisson process, sampled by time rescaling). Job
  sizes and durations do not depend on the spike, so runs with and without it are paired.

* ``helios-synthetic``: jobs with users, names, VCs and models in the Helios schema
  (``shapeshift.workloads.helios_synth``: Zipf users, recurring names with a
  characteristic duration, diurnal arrivals; Philly-fitted sizes and durations).

Transformations (applied in order): ``head`` (first N jobs), ``load_scale`` (divide
submit times by a factor: 2 = twice the load), ``duration_scale`` (multiply durations),
``window`` (jobs submitted in ``[start, end)`` seconds), ``vc`` (jobs of the named
virtual clusters), ``downsample`` (busiest ``hours``, then keep each job with
probability ``target_gpus / source_gpus``, seeded).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shapeshift.workloads import transforms
from shapeshift.workloads.readers import read_workload
from shapeshift.workloads.synthetic import DEFAULT_SIZE_MIX, PoissonSpec, poisson_workload
from shapeshift.workloads.workload import MAX_JOBS, Workload


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DailySpike(_Params):
    start_hour: float = Field(10.0, ge=0, lt=24)
    hours: float = Field(2.0, gt=0, le=24)
    factor: float = Field(3.0, ge=1)

    @model_validator(mode="after")
    def _within_day(self) -> DailySpike:
        if self.start_hour + self.hours > 24:
            raise ValueError("daily_spike: start_hour + hours must be <= 24")
        return self


class PoissonParams(_Params):
    jobs: int = Field(300, ge=0, le=MAX_JOBS)
    #: Arrivals per hour.
    rate: float = Field(12.0, gt=0)
    median_duration: float = Field(1800.0, gt=0)
    duration_sigma: float = Field(1.5, gt=0)
    max_duration: float = Field(7 * 24 * 3600.0, gt=0)
    size_mix: list[tuple[int, float]] | None = None
    #: Generator seed; by default the run's seed.
    seed: int | None = None
    daily_spike: DailySpike | None = None


def _spike_arrivals(jobs: int, rate: float, spike: DailySpike, seed: int) -> np.ndarray:
    """Arrival times of a Poisson process whose rate is ``rate * factor`` in the daily spike.

    Time rescaling: unit-rate exponential gaps are cumulated and mapped through the
    inverse of the (piecewise-linear) cumulative intensity.
    """
    if jobs == 0:
        return np.zeros(0)
    rng = np.random.default_rng([seed, 1])
    gaps = rng.exponential(1.0, size=jobs)
    cumulative = np.cumsum(gaps) - gaps[0]  # the first job arrives at t = 0, in phase with the day
    per_second = rate / 3600.0
    s, e = spike.start_hour * 3600.0, (spike.start_hour + spike.hours) * 3600.0
    per_day = per_second * (86400.0 + (spike.factor - 1.0) * (e - s))
    days = math.ceil(cumulative[-1] / per_day) + 1
    knots_t = [0.0]
    knots_l = [0.0]
    for d in range(days):
        base_t, base_l = d * 86400.0, d * per_day
        knots_t += [base_t + s, base_t + e, base_t + 86400.0]
        knots_l += [
            base_l + per_second * s,
            base_l + per_second * s + per_second * spike.factor * (e - s),
            base_l + per_day,
        ]
    times = np.interp(cumulative, np.asarray(knots_l), np.asarray(knots_t))
    return np.round(times, 3)


def _poisson(params: PoissonParams, seed: int, name: str) -> Workload:
    seed = params.seed if params.seed is not None else seed
    spec = PoissonSpec(
        jobs=params.jobs,
        rate_per_hour=params.rate,
        median_duration=params.median_duration,
        duration_sigma=params.duration_sigma,
        max_duration=params.max_duration,
        size_mix=tuple(params.size_mix) if params.size_mix else DEFAULT_SIZE_MIX,
        seed=seed,
    )
    data = poisson_workload(spec, name=name)
    if params.daily_spike is None:
        return data
    frame = data.frame.copy()
    frame["submit_time"] = _spike_arrivals(params.jobs, params.rate, params.daily_spike, seed)
    return Workload.from_frame(name, frame)


@dataclass(frozen=True)
class Generator:
    params: type[BaseModel]
    build: Callable[[Any, int, str], Workload]


GENERATORS: dict[str, Generator] = {"poisson": Generator(PoissonParams, _poisson)}


class PhillyPoissonParams(_Params):
    jobs: int = Field(300, ge=0, le=MAX_JOBS)
    #: Arrivals per hour.
    rate: float = Field(12.0, gt=0)
    seed: int | None = None
    #: Condition job sizes on at most this many GPUs.
    max_gpus: int | None = Field(None, ge=1)
    models: list[str] = Field(default_factory=list)
    assignment: Literal["uniform", "size-aware"] = "uniform"


class PhillyBurstyParams(PhillyPoissonParams):
    #: Every ``period`` hours, ``length`` hours at ``factor`` x the rate, of short jobs.
    period: float = Field(24.0, gt=0)
    length: float = Field(2.0, gt=0)
    factor: float = Field(4.0, ge=1)
    short_quantile: float = Field(0.5, gt=0, le=1)


def _register_philly() -> None:
    """The Philly-fitted generators of ``shapeshift.workloads.generators``, when installed."""
    try:
        from shapeshift.workloads import generators
    except ImportError:  # pragma: no cover - older checkouts
        return

    def common(p: PhillyPoissonParams, seed: int, name: str) -> dict[str, Any]:
        return {
            "seed": p.seed if p.seed is not None else seed,
            "models": tuple(p.models),
            "assignment": p.assignment,
            "max_gpus": p.max_gpus,
            "name": name,
        }

    def poisson(p: PhillyPoissonParams, seed: int, name: str) -> Workload:
        return generators.poisson(p.jobs, p.rate, **common(p, seed, name))

    def bursty(p: PhillyBurstyParams, seed: int, name: str) -> Workload:
        bursts = generators.Bursts(p.period, p.length, p.factor, p.short_quantile)
        return generators.bursty(p.jobs, p.rate, bursts, **common(p, seed, name))

    GENERATORS["philly-poisson"] = Generator(PhillyPoissonParams, poisson)
    GENERATORS["philly-bursty"] = Generator(PhillyBurstyParams, bursty)


_register_philly()


class HeliosSyntheticParams(_Params):
    jobs: int = Field(2000, ge=0, le=MAX_JOBS)
    #: Mean arrivals per hour.
    rate: float = Field(12.0, gt=0)
    seed: int | None = None
    users: int = Field(60, ge=1)
    vcs: int = Field(4, ge=1)
    names_per_user: int = Field(4, ge=1)
    zipf: float = Field(1.1, gt=0)
    duration_sigma: float = Field(0.6, ge=0)
    amplitude: float = Field(0.5, ge=0, lt=1)
    #: VC labels (e.g. a cluster file's partitions) and the share of users in each.
    vc_names: list[str] | None = None
    vc_weights: list[float] | None = None


def _helios_synthetic(p: HeliosSyntheticParams, seed: int, name: str) -> Workload:
    from shapeshift.workloads.helios_synth import helios_synthetic

    fields = p.model_dump(exclude={"jobs", "rate", "seed"})
    return helios_synthetic(p.jobs, p.rate, seed=p.seed if p.seed is not None else seed, name=name, **fields)


GENERATORS["helios-synthetic"] = Generator(HeliosSyntheticParams, _helios_synthetic)


class HeadParams(_Params):
    jobs: int = Field(..., ge=0)


class FactorParams(_Params):
    factor: float = Field(..., gt=0)


def _head(frame: pd.DataFrame, p: HeadParams) -> pd.DataFrame:
    return frame.iloc[: p.jobs]


def _load_scale(frame: pd.DataFrame, p: FactorParams) -> pd.DataFrame:
    frame = frame.copy()
    frame["submit_time"] = np.round(frame["submit_time"] / p.factor, 3)
    return frame


def _duration_scale(frame: pd.DataFrame, p: FactorParams) -> pd.DataFrame:
    frame = frame.copy()
    frame["duration"] = np.round(frame["duration"] * p.factor, 3)
    return frame


class WindowParams(_Params):
    start: float | None = Field(None, ge=0)
    end: float | None = Field(None, gt=0)


class VcParams(_Params):
    names: list[str] = Field(..., min_length=1)


class DownsampleParams(_Params):
    target_gpus: int = Field(..., gt=0)
    source_gpus: int = Field(..., gt=0)
    hours: float | None = Field(None, gt=0)
    seed: int = 0


def _on_workload(fn: Callable[..., Workload]) -> Callable[[pd.DataFrame, Any], pd.DataFrame]:
    """Adapt a ``shapeshift.workloads.transforms`` function (Workload in, Workload out)."""

    def apply(frame: pd.DataFrame, p: Any) -> pd.DataFrame:
        return fn(Workload("transform", frame), **p.model_dump()).frame

    return apply


@dataclass(frozen=True)
class Transform:
    params: type[BaseModel]
    #: The single positional value a transformation may be written with (``head: 100``).
    shorthand: str
    apply: Callable[[pd.DataFrame, Any], pd.DataFrame]


TRANSFORMS: dict[str, Transform] = {
    "head": Transform(HeadParams, "jobs", _head),
    "load_scale": Transform(FactorParams, "factor", _load_scale),
    "duration_scale": Transform(FactorParams, "factor", _duration_scale),
    "window": Transform(WindowParams, "end", _on_workload(transforms.time_window)),
    "vc": Transform(VcParams, "names", _on_workload(transforms.filter_vc)),
    "downsample": Transform(DownsampleParams, "target_gpus", _on_workload(transforms.downsample)),
}


def transform_params(name: str, value: Any) -> BaseModel:
    """Validate one transformation's arguments (a mapping, or its shorthand value)."""
    spec = TRANSFORMS[name]
    args = value if isinstance(value, Mapping) else {spec.shorthand: value}
    return spec.params.model_validate(dict(args))


@dataclass(frozen=True)
class WorkloadSpec:
    """One resolved workload of one run: everything that determines its jobs."""

    name: str
    file: str | None = None
    format: str | None = None
    generator: str | None = None
    #: Generator parameters as sorted (key, value) pairs (values JSON-compatible).
    params: tuple[tuple[str, Any], ...] = ()
    #: Transformations as (name, arguments) pairs, in order.
    transforms: tuple[tuple[str, Any], ...] = ()
    seed: int = 0

    def key(self) -> str:
        """Canonical JSON of the spec (what identifies it before its content is known)."""
        return json.dumps(
            {
                "file": self.file,
                "format": self.format,
                "generator": self.generator,
                "params": [list(p) for p in self.params],
                "transforms": [list(t) for t in self.transforms],
                "seed": self.seed if self.generator else None,
            },
            sort_keys=True,
            default=str,
        )


def build_workload(spec: WorkloadSpec) -> Workload:
    """Read or generate the jobs, then apply the transformations in order."""
    if spec.generator is not None:
        gen = GENERATORS[spec.generator]
        data = gen.build(gen.params.model_validate(dict(spec.params)), spec.seed, spec.name)
    else:
        assert spec.file is not None
        data = read_workload(Path(spec.file), spec.format)
        data = Workload(spec.name, data.frame)
    frame = data.frame
    for name, args in spec.transforms:
        frame = TRANSFORMS[name].apply(frame, transform_params(name, args))
    if spec.transforms:
        data = Workload.from_frame(spec.name, frame.reset_index(drop=True))
    return data


def content_hash(workload: Workload) -> str:
    """SHA-256 of the job table's content (column names and every value), not its name."""
    frame = workload.frame
    digest = hashlib.sha256(",".join(map(str, frame.columns)).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return digest.hexdigest()
