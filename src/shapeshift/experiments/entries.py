"""The entries of an experiment file, each checked against the rest of Shapeshift: traces
exist, generators and transformations take the given parameters, policies exist and
accept theirs, sweep axes apply to something, speed models and energy settings are known.
Every problem is a ``SchemaError`` at the key path where it was found."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from shapeshift.cluster import load_cluster
from shapeshift.datasets import lookup
from shapeshift.energy.sim_component import ces_config
from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.experiments.file_model import (
    ClusterItem,
    EnergyItem,
    Loc,
    OverheadsItem,
    PolicyItem,
    SchemaError,
    ThroughputItem,
    pydantic_problem,
)
from shapeshift.experiments.workloads import GENERATORS, TRANSFORMS, transform_params
from shapeshift.policies.framework.registry import make_policy, registry
from shapeshift.runs.spec import EnergySpec, ThroughputSpec
from shapeshift.workloads.readers import READERS


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
    throughput: ThroughputSpec = field(default_factory=ThroughputSpec)
    energy: EnergySpec | None = None
    #: Options the file leaves unset (``throughput``, ``round``, ``launch_delay``,
    #: ``restore_penalty``): a bundled workload's evaluation setting fills them.
    unset: frozenset[str] = frozenset()


AXIS_FORMS = "workload.<parameter or transformation>, policy.<parameter>, round, overheads.launch_delay, " + (
    "overheads.restore_penalty"
)




def unique(names: Sequence[str], section: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise SchemaError((section, i), f"duplicate name {name!r} in {section}; give each entry a distinct name")
        seen.add(name)


_WORKLOAD_KEYS = ("name", "file", "format", "generator", "transforms")


def workload_entry(base: Path, i: int, entry: Mapping[str, Any]) -> WorkloadEntry:
    loc: Loc = ("workloads", i)
    if not isinstance(entry, Mapping):
        raise SchemaError(loc, "a workload must be a mapping with 'file' or 'generator'")
    has_file, has_gen = "file" in entry, "generator" in entry
    if has_file == has_gen:
        raise SchemaError(loc, "a workload needs exactly one of 'file' (a trace) or 'generator'")
    transforms = transform_entries(loc, entry.get("transforms") or [])
    params = {k: v for k, v in entry.items() if k not in _WORKLOAD_KEYS}
    if has_file:
        if params:
            key = next(iter(params))
            raise SchemaError(
                (*loc, key), f"unknown key {key!r} for a trace workload; allowed: {', '.join(_WORKLOAD_KEYS)}"
            )
        fmt = entry.get("format")
        if fmt is not None and fmt not in READERS:
            raise SchemaError(
                (*loc, "format"), f"unknown workload format {fmt!r}; known: {', '.join(sorted(READERS))}"
            )
        text = str(entry["file"])
        file = Path(text) if Path(text).is_absolute() else base / text
        if not file.exists():
            try:
                found = lookup(text)
            except InputError as exc:
                raise SchemaError((*loc, "file"), exc.message) from None
            if found is None or found[0].kind != "workload":
                raise SchemaError((*loc, "file"), f"trace file {file} not found, and {text!r} is no bundled workload")
            return WorkloadEntry(str(entry.get("name") or text), text, fmt, None, {}, transforms)
        name = str(entry.get("name") or file.stem)
        return WorkloadEntry(name, str(file), fmt, None, {}, transforms)
    if "format" in entry:
        raise SchemaError((*loc, "format"), "'format' applies to trace files, not generators")
    generator = str(entry["generator"])
    if generator not in GENERATORS:
        raise SchemaError((*loc, "generator"), f"unknown generator {generator!r}; known: {', '.join(GENERATORS)}")
    try:
        GENERATORS[generator].params.model_validate(params)
    except ValidationError as exc:
        raise pydantic_problem(exc, loc) from None
    return WorkloadEntry(str(entry.get("name") or generator), None, None, generator, params, transforms)


def transform_entries(loc: Loc, items: Any) -> tuple[tuple[str, Any], ...]:
    if not isinstance(items, list):
        raise SchemaError((*loc, "transforms"), "transforms must be a list like [{load_scale: 2}, {head: 100}]")
    result = []
    for j, item in enumerate(items):
        where: Loc = (*loc, "transforms", j)
        if not isinstance(item, Mapping) or len(item) != 1:
            raise SchemaError(where, "each transformation is a one-key mapping, e.g. {load_scale: 2}")
        name, args = next(iter(item.items()))
        if name not in TRANSFORMS:
            raise SchemaError(where, f"unknown transformation {name!r}; known: {', '.join(TRANSFORMS)}")
        try:
            transform_params(name, args)
        except ValidationError as exc:
            raise pydantic_problem(exc, (*where, name)) from None
        result.append((str(name), args))
    return tuple(result)


def cluster_entry(base: Path, i: int, entry: ClusterItem) -> tuple[str, str]:
    spec = entry.spec
    candidate = Path(spec)
    if not candidate.is_absolute() and (base / candidate).exists():
        spec = str(base / candidate)
    try:
        load_cluster(spec)
    except InputError as exc:
        raise SchemaError(("clusters", i), str(exc)) from None
    return entry.name or entry.spec, spec


def policy_entry(i: int, entry: PolicyItem) -> PolicyEntry:
    check_policy(("policies", i), entry.policy, entry.params)
    return PolicyEntry(entry.name or entry.policy, entry.policy, dict(entry.params))


def check_policy(loc: Loc, policy: str, params: Mapping[str, Any]) -> None:
    if policy not in registry():
        raise SchemaError((*loc, "policy"), f"unknown policy {policy!r}; known: {', '.join(registry())}")
    try:
        make_policy(policy, policy_args(params))
    except InputError as exc:
        raise SchemaError((*loc, "params", *([exc.field] if exc.field else [])), exc.message) from None


def policy_args(params: Mapping[str, Any]) -> dict[str, Any]:
    """YAML lists become comma-separated strings, the form policy parameters take on the CLI."""
    return {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in params.items()}


def policy_accepts(policy: str, param: str) -> bool:
    return param in registry()[policy].params.model_fields


def generator_accepts(entry: WorkloadEntry, param: str) -> bool:
    if param in TRANSFORMS:
        return True
    return entry.generator is not None and param in GENERATORS[entry.generator].params.model_fields


def axis_entry(
    key: str, values: list[Any], workloads: Sequence[WorkloadEntry], policies: Sequence[PolicyEntry]
) -> Axis:
    loc: Loc = ("sweep", key)
    if not values:
        raise SchemaError(loc, "a sweep axis needs at least one value")
    if len({repr(v) for v in values}) != len(values):
        raise SchemaError(loc, "a sweep axis lists the same value twice")
    section, _, param = key.partition(".")
    if key == "round":
        for v in values:
            if not isinstance(v, int | float) or isinstance(v, bool) or not (math.isfinite(v) and v > 0):
                raise SchemaError(loc, f"round values must be seconds > 0, got {v!r}")
    elif key in ("overheads.launch_delay", "overheads.restore_penalty"):
        for v in values:
            try:
                OverheadsItem.model_validate({param: v})
            except ValidationError as exc:
                raise SchemaError(loc, pydantic_problem(exc).message) from None
    elif section == "workload" and param:
        targets = [w for w in workloads if generator_accepts(w, param)]
        if not targets:
            raise SchemaError(loc, f"no workload has a parameter or transformation {param!r}")
        for v in values:
            for w in targets:
                check_workload_value(loc, w, param, v)
    elif section == "policy" and param:
        targets = [p for p in policies if policy_accepts(p.policy, param)]
        if not targets:
            names = ", ".join(sorted({p.policy for p in policies}))
            raise SchemaError(loc, f"no policy of this experiment ({names}) has a parameter {param!r}")
        for v in values:
            for p in targets:
                check_policy(loc, p.policy, {**p.params, param: v})
    else:
        hint = " (list seeds in the top-level 'seeds')" if key == "seed" else ""
        hint = " (list clusters in the top-level 'clusters')" if key == "cluster" else hint
        raise SchemaError(loc, f"unknown sweep axis {key!r}{hint}; axes look like {AXIS_FORMS}")
    return Axis(key, tuple(values))


def check_workload_value(loc: Loc, entry: WorkloadEntry, param: str, value: Any) -> None:
    try:
        if param in TRANSFORMS:
            transform_params(param, value)
        else:
            assert entry.generator is not None
            GENERATORS[entry.generator].params.model_validate({**entry.params, param: value})
    except ValidationError as exc:
        raise SchemaError(loc, f"value {value!r}: {pydantic_problem(exc).message}") from None

def throughput_entry(base: Path, item: ThroughputItem) -> ThroughputSpec:
    path = item.path
    if path is not None and not Path(path).is_absolute() and (base / path).exists():
        path = str(base / path)
    if path is not None and not Path(path).exists() and lookup(path) is None:
        raise SchemaError(("throughput", "path"), f"{base / path} not found, and {path!r} is no bundled data set")
    try:
        return ThroughputSpec(item.kind, path)
    except InputError as exc:
        key = "path" if exc.field == "throughput.path" else "kind"
        raise SchemaError(("throughput", key), exc.message) from None


def energy_entry(item: EnergyItem | None) -> EnergySpec | None:
    if item is None:
        return None
    try:
        spec = EnergySpec(item.mode, tuple(item.params.items()), item.baseline)
        ces_config(spec.params)
    except InputError as exc:
        key = "mode" if exc.field == "energy" else "params"
        raise SchemaError(("energy", key), exc.message) from None
    return spec
