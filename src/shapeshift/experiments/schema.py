"""The experiment file: parsed, checked key by key, and turned into an ``Experiment``.

Everything a run needs is validated here, before any simulation starts, because a typo
found after two hours of sweeping is a wasted afternoon: unknown keys, unknown
policies, generators, transformations and parameters, bad values and sweep axes that
apply to nothing. Each problem is one ``InputError`` naming the file, the line and the
key path (``policies[1].params.threshold``).

Example::

    name: tiny
    workloads:
      - {name: poisson, generator: poisson, jobs: 40, rate: 6}
    clusters: [2x4]
    policies:
      - fifo
      - {name: fifo-backfill, policy: fifo, params: {backfill: true}}
    seeds: [0, 1]
    sweep:
      workload.rate: [4, 8]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shapeshift.cluster import load_cluster
from shapeshift.engine.overheads import NAMED_PENALTIES, Overheads
from shapeshift.errors import InputError
from shapeshift.experiments.workloads import GENERATORS, TRANSFORMS, transform_params
from shapeshift.policies.registry import make_policy, registry
from shapeshift.workloads.readers import READERS
from shapeshift.yaml_lines import line_of

Loc = tuple[str | int, ...]


class _SchemaError(Exception):
    def __init__(self, loc: Loc, message: str):
        super().__init__(message)
        self.loc = loc
        self.message = message


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _PolicyEntry(_Strict):
    policy: str
    name: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class _ClusterEntry(_Strict):
    spec: str
    name: str | None = None


class _OverheadsEntry(_Strict):
    launch_delay: float = Field(0.0, ge=0)
    restore_penalty: float | str = 30.0

    @field_validator("restore_penalty")
    @classmethod
    def _penalty(cls, value: float | str) -> float | str:
        if isinstance(value, str) and value not in NAMED_PENALTIES:
            raise ValueError(f"restore_penalty must be seconds or one of {', '.join(sorted(NAMED_PENALTIES))}")
        if isinstance(value, float) and value < 0:
            raise ValueError("restore_penalty must be >= 0")
        return value


class _WindowEntry(_Strict):
    start: int = Field(..., ge=0)
    end: int = Field(..., gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> _WindowEntry:
        if self.end <= self.start:
            raise ValueError("window end must be greater than start")
        return self


class _ExperimentFile(_Strict):
    name: str | None = None
    description: str = ""
    workloads: list[dict[str, Any]] = Field(..., min_length=1)
    clusters: list[_ClusterEntry] = Field(..., min_length=1)
    policies: list[_PolicyEntry] = Field(..., min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    round: float | None = Field(None, gt=0)
    overheads: _OverheadsEntry = Field(default_factory=_OverheadsEntry)
    window: _WindowEntry | None = None
    sweep: dict[str, list[Any]] = Field(default_factory=dict)

    @field_validator("clusters", mode="before")
    @classmethod
    def _cluster_shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"spec": str(v)} if isinstance(v, str | int) else v for v in value]
        return value

    @field_validator("policies", mode="before")
    @classmethod
    def _policy_shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"policy": v} if isinstance(v, str) else v for v in value]
        return value


@dataclass(frozen=True)
class WorkloadEntry:
    """A workload as the file names it (before sweep overrides and seeds)."""

    name: str
    file: str | None
    format: str | None
    generator: str | None
    params: Mapping[str, Any]
    transforms: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class PolicyEntry:
    name: str
    policy: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Axis:
    """One sweep axis: ``key`` (e.g. ``workload.rate``) and the values it takes."""

    key: str
    values: tuple[Any, ...]

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def param(self) -> str:
        return self.key.split(".", 1)[1] if "." in self.key else self.key


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    path: str
    text: str
    workloads: tuple[WorkloadEntry, ...]
    clusters: tuple[tuple[str, str], ...]
    policies: tuple[PolicyEntry, ...]
    seeds: tuple[int, ...]
    round: float | None
    overheads: Overheads
    window: tuple[int, int] | None
    axes: tuple[Axis, ...]


AXIS_FORMS = "workload.<parameter or transformation>, policy.<parameter>, round, overheads.launch_delay, " + (
    "overheads.restore_penalty"
)


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _pydantic_problem(exc: ValidationError, prefix: Loc = ()) -> _SchemaError:
    err = exc.errors()[0]
    loc = prefix + tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        parent = loc[:-1]
        return _SchemaError(loc, f"unknown key {loc[-1]!r}" + (f" in {_dotted(parent)}" if parent else ""))
    if err["type"] == "missing":
        return _SchemaError(loc, "required key is missing")
    return _SchemaError(loc, err["msg"].removeprefix("Value error, "))


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file; every problem becomes one ``InputError``."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError("experiment file not found", path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read experiment file: {exc.strerror}", path=str(path)) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(
            f"not valid YAML: {getattr(exc, 'problem', exc)}", path=str(path), line=mark.line + 1 if mark else None
        ) from None
    if not isinstance(raw, dict):
        raise InputError("an experiment file must be a mapping with workloads, clusters and policies", path=str(path))
    try:
        return _build(path, text, raw)
    except _SchemaError as exc:
        raise InputError(exc.message, path=str(path), line=line_of(text, exc.loc), field=_dotted(exc.loc)) from None


def _build(path: Path, text: str, raw: dict[str, Any]) -> Experiment:
    try:
        parsed = _ExperimentFile.model_validate(raw)
    except ValidationError as exc:
        raise _pydantic_problem(exc) from None
    base = path.resolve().parent
    workloads = tuple(_workload(base, i, entry) for i, entry in enumerate(parsed.workloads))
    _unique([w.name for w in workloads], "workloads")
    clusters = tuple(_cluster(base, i, entry) for i, entry in enumerate(parsed.clusters))
    _unique([c[0] for c in clusters], "clusters")
    policies = tuple(_policy(i, entry) for i, entry in enumerate(parsed.policies))
    _unique([p.name for p in policies], "policies")
    _unique([str(s) for s in parsed.seeds], "seeds")
    overheads = Overheads(parsed.overheads.launch_delay, parsed.overheads.restore_penalty)
    axes = tuple(_axis(key, values, workloads, policies) for key, values in parsed.sweep.items())
    window = (parsed.window.start, parsed.window.end) if parsed.window else None
    return Experiment(
        name=parsed.name or path.stem,
        description=parsed.description,
        path=str(path),
        text=text,
        workloads=workloads,
        clusters=clusters,
        policies=policies,
        seeds=tuple(parsed.seeds),
        round=parsed.round,
        overheads=overheads,
        window=window,
        axes=axes,
    )


def _unique(names: Sequence[str], section: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise _SchemaError((section, i), f"duplicate name {name!r} in {section}; give each entry a distinct name")
        seen.add(name)


_WORKLOAD_KEYS = ("name", "file", "format", "generator", "transforms")


def _workload(base: Path, i: int, entry: Mapping[str, Any]) -> WorkloadEntry:
    loc: Loc = ("workloads", i)
    if not isinstance(entry, Mapping):
        raise _SchemaError(loc, "a workload must be a mapping with 'file' or 'generator'")
    has_file, has_gen = "file" in entry, "generator" in entry
    if has_file == has_gen:
        raise _SchemaError(loc, "a workload needs exactly one of 'file' (a trace) or 'generator'")
    transforms = _transforms(loc, entry.get("transforms") or [])
    params = {k: v for k, v in entry.items() if k not in _WORKLOAD_KEYS}
    if has_file:
        if params:
            key = next(iter(params))
            raise _SchemaError(
                (*loc, key), f"unknown key {key!r} for a trace workload; allowed: {', '.join(_WORKLOAD_KEYS)}"
            )
        fmt = entry.get("format")
        if fmt is not None and fmt not in READERS:
            raise _SchemaError(
                (*loc, "format"), f"unknown workload format {fmt!r}; known: {', '.join(sorted(READERS))}"
            )
        file = Path(str(entry["file"]))
        file = file if file.is_absolute() else base / file
        if not file.exists():
            raise _SchemaError((*loc, "file"), f"trace file {file} not found")
        name = str(entry.get("name") or file.stem)
        return WorkloadEntry(name, str(file), fmt, None, {}, transforms)
    if "format" in entry:
        raise _SchemaError((*loc, "format"), "'format' applies to trace files, not generators")
    generator = str(entry["generator"])
    if generator not in GENERATORS:
        raise _SchemaError((*loc, "generator"), f"unknown generator {generator!r}; known: {', '.join(GENERATORS)}")
    try:
        GENERATORS[generator].params.model_validate(params)
    except ValidationError as exc:
        raise _pydantic_problem(exc, loc) from None
    return WorkloadEntry(str(entry.get("name") or generator), None, None, generator, params, transforms)


def _transforms(loc: Loc, items: Any) -> tuple[tuple[str, Any], ...]:
    if not isinstance(items, list):
        raise _SchemaError((*loc, "transforms"), "transforms must be a list like [{load_scale: 2}, {head: 100}]")
    result = []
    for j, item in enumerate(items):
        where: Loc = (*loc, "transforms", j)
        if not isinstance(item, Mapping) or len(item) != 1:
            raise _SchemaError(where, "each transformation is a one-key mapping, e.g. {load_scale: 2}")
        name, args = next(iter(item.items()))
        if name not in TRANSFORMS:
            raise _SchemaError(where, f"unknown transformation {name!r}; known: {', '.join(TRANSFORMS)}")
        try:
            transform_params(name, args)
        except ValidationError as exc:
            raise _pydantic_problem(exc, (*where, name)) from None
        result.append((str(name), args))
    return tuple(result)


def _cluster(base: Path, i: int, entry: _ClusterEntry) -> tuple[str, str]:
    spec = entry.spec
    candidate = Path(spec)
    if not candidate.is_absolute() and (base / candidate).exists():
        spec = str(base / candidate)
    try:
        load_cluster(spec)
    except InputError as exc:
        raise _SchemaError(("clusters", i), str(exc)) from None
    return entry.name or entry.spec, spec


def _policy(i: int, entry: _PolicyEntry) -> PolicyEntry:
    _check_policy(("policies", i), entry.policy, entry.params)
    return PolicyEntry(entry.name or entry.policy, entry.policy, dict(entry.params))


def _check_policy(loc: Loc, policy: str, params: Mapping[str, Any]) -> None:
    if policy not in registry():
        raise _SchemaError((*loc, "policy"), f"unknown policy {policy!r}; known: {', '.join(registry())}")
    try:
        make_policy(policy, _policy_args(params))
    except InputError as exc:
        raise _SchemaError((*loc, "params", *([exc.field] if exc.field else [])), exc.message) from None


def _policy_args(params: Mapping[str, Any]) -> dict[str, Any]:
    """YAML lists become comma-separated strings, the form policy parameters take on the CLI."""
    return {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in params.items()}


def policy_accepts(policy: str, param: str) -> bool:
    return param in registry()[policy].params.model_fields


def generator_accepts(entry: WorkloadEntry, param: str) -> bool:
    if param in TRANSFORMS:
        return True
    return entry.generator is not None and param in GENERATORS[entry.generator].params.model_fields


def _axis(key: str, values: list[Any], workloads: Sequence[WorkloadEntry], policies: Sequence[PolicyEntry]) -> Axis:
    loc: Loc = ("sweep", key)
    if not values:
        raise _SchemaError(loc, "a sweep axis needs at least one value")
    if len({repr(v) for v in values}) != len(values):
        raise _SchemaError(loc, "a sweep axis lists the same value twice")
    section, _, param = key.partition(".")
    if key == "round":
        for v in values:
            if not isinstance(v, int | float) or isinstance(v, bool) or not (math.isfinite(v) and v > 0):
                raise _SchemaError(loc, f"round values must be seconds > 0, got {v!r}")
    elif key in ("overheads.launch_delay", "overheads.restore_penalty"):
        for v in values:
            try:
                _OverheadsEntry.model_validate({param: v})
            except ValidationError as exc:
                raise _SchemaError(loc, _pydantic_problem(exc).message) from None
    elif section == "workload" and param:
        targets = [w for w in workloads if generator_accepts(w, param)]
        if not targets:
            raise _SchemaError(loc, f"no workload has a parameter or transformation {param!r}")
        for v in values:
            for w in targets:
                _check_workload_value(loc, w, param, v)
    elif section == "policy" and param:
        targets = [p for p in policies if policy_accepts(p.policy, param)]
        if not targets:
            names = ", ".join(sorted({p.policy for p in policies}))
            raise _SchemaError(loc, f"no policy of this experiment ({names}) has a parameter {param!r}")
        for v in values:
            for p in targets:
                _check_policy(loc, p.policy, {**p.params, param: v})
    else:
        hint = " (list seeds in the top-level 'seeds')" if key == "seed" else ""
        hint = " (list clusters in the top-level 'clusters')" if key == "cluster" else hint
        raise _SchemaError(loc, f"unknown sweep axis {key!r}{hint}; axes look like {AXIS_FORMS}")
    return Axis(key, tuple(values))


def _check_workload_value(loc: Loc, entry: WorkloadEntry, param: str, value: Any) -> None:
    try:
        if param in TRANSFORMS:
            transform_params(param, value)
        else:
            assert entry.generator is not None
            GENERATORS[entry.generator].params.model_validate({**entry.params, param: value})
    except ValidationError as exc:
        raise _SchemaError(loc, f"value {value!r}: {_pydantic_problem(exc).message}") from None
