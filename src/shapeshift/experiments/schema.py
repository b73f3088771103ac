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
    # optional: throughput: {kind: ground-truth, path: ../shared/data/rubick/traces}
    # optional: energy: ces   (or {mode: ces, params: {buffer: 4}, baseline: true})

The file's shape lives in ``file_model``, the checks of each entry in ``entries``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.experiments.entries import (
    AXIS_FORMS,
    Axis,
    Experiment,
    PolicyEntry,
    WorkloadEntry,
    axis_entry,
    cluster_entry,
    energy_entry,
    generator_accepts,
    policy_accepts,
    policy_args,
    policy_entry,
    throughput_entry,
    unique,
    workload_entry,
)
from shapeshift.experiments.file_model import ExperimentFile, SchemaError, dotted, pydantic_problem
from shapeshift.yaml_lines import line_of, safe_load

__all__ = [
    "AXIS_FORMS",
    "Axis",
    "Experiment",
    "PolicyEntry",
    "WorkloadEntry",
    "generator_accepts",
    "load_experiment",
    "policy_accepts",
    "policy_args",
]


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
        raw = safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(
            f"not valid YAML: {getattr(exc, 'problem', exc)}", path=str(path), line=mark.line + 1 if mark else None
        ) from None
    if not isinstance(raw, dict):
        raise InputError("an experiment file must be a mapping with workloads, clusters and policies", path=str(path))
    try:
        return _build(path, text, raw)
    except SchemaError as exc:
        raise InputError(exc.message, path=str(path), line=line_of(text, exc.loc), field=dotted(exc.loc)) from None


def _build(path: Path, text: str, raw: dict[str, Any]) -> Experiment:
    try:
        parsed = ExperimentFile.model_validate(raw)
    except ValidationError as exc:
        raise pydantic_problem(exc) from None
    base = path.resolve().parent
    workloads = tuple(workload_entry(base, i, entry) for i, entry in enumerate(parsed.workloads))
    unique([w.name for w in workloads], "workloads")
    clusters = tuple(cluster_entry(base, i, entry) for i, entry in enumerate(parsed.clusters))
    unique([c[0] for c in clusters], "clusters")
    policies = tuple(policy_entry(i, entry) for i, entry in enumerate(parsed.policies))
    unique([p.name for p in policies], "policies")
    unique([str(s) for s in parsed.seeds], "seeds")
    overheads = Overheads(parsed.overheads.launch_delay, parsed.overheads.restore_penalty)
    axes = tuple(axis_entry(key, values, workloads, policies) for key, values in parsed.sweep.items())
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
        throughput=throughput_entry(base, parsed.throughput),
        energy=energy_entry(parsed.energy),
        unset=frozenset(
            {key for key in ("throughput", "round") if key not in parsed.model_fields_set}
            | {
                key
                for key in ("launch_delay", "restore_penalty")
                if "overheads" not in parsed.model_fields_set or key not in parsed.overheads.model_fields_set
            }
        ),
    )


