"""The notebook-facing functions ``import shapeshift`` offers: ``simulate``, ``compare``
and ``policies``.

They accept the friendly forms (a trace path or a DataFrame, ``"4x8"``, policy parameters
as keyword arguments), build a :class:`~shapeshift.runs.spec.RunSpec` and call
:func:`~shapeshift.runs.execute.run`, exactly as the command line does, so a notebook and
``shapeshift simulate`` given the same inputs get the same numbers. Bad arguments raise
``shapeshift.InputError`` with the command line's messages.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from typing import Any

from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.policies.framework.registry import PolicyInfo, make_policy, registry
from shapeshift.runs.execute import run
from shapeshift.runs.inputs import resolve_cluster, resolve_workload
from shapeshift.runs.result import Comparison, RunResult
from shapeshift.runs.spec import EnergySpec, RunSpec, ThroughputSpec


def policies() -> dict[str, PolicyInfo]:
    """Every registered policy by name: ``info.description`` and ``info.parameters()``
    (name, type, default)."""
    return dict(registry())


def _spec(
    workload: Any,
    cluster: Any,
    policy: str,
    params: Mapping[str, Any],
    *,
    fmt: str | None,
    round: float | None,
    seed: int,
    launch_delay: float,
    restore_penalty: float | str,
    throughput: ThroughputSpec | str | None,
    energy: EnergySpec | str | None,
    window: tuple[int, int] | None,
    record: Sequence[str],
) -> RunSpec:
    try:
        overheads = Overheads(launch_delay, restore_penalty)
    except ValueError as exc:
        raise InputError(str(exc), field="launch_delay/restore_penalty") from None
    if isinstance(throughput, str):
        throughput = ThroughputSpec(throughput)
    if isinstance(energy, str):
        energy = None if energy == "none" else EnergySpec(energy)
    return RunSpec(
        workload=resolve_workload(workload, fmt, seed),
        cluster=resolve_cluster(cluster),
        policy=policy,
        params=tuple(params.items()),
        round_seconds=round,
        overheads=overheads,
        seed=seed,
        throughput=throughput or ThroughputSpec(),
        energy=energy,
        window=window,
        record=frozenset(record),
    )


def simulate(
    workload: Any = None,
    cluster: Any = None,
    policy: str = "fifo",
    *,
    params: Mapping[str, Any] | None = None,
    format: str | None = None,
    round: float | None = None,
    seed: int = 0,
    launch_delay: float = 0.0,
    restore_penalty: float | str = 30.0,
    throughput: ThroughputSpec | str | None = None,
    energy: EnergySpec | str | None = None,
    window: tuple[int, int] | None = None,
    record: Sequence[str] = (),
    workers: int = 1,
    backend: str = "processes",
    **policy_params: Any,
) -> RunResult:
    """Simulate one policy and return its :class:`RunResult`.

    ``workload``: a trace path, a ``Workload``, a pandas ``DataFrame`` (generic format:
    ``job_id, submit_time, num_gpus, duration`` plus optional columns) or ``None`` for the
    seeded demo. ``cluster``: ``"NxG"``, a cluster YAML path, a ``ClusterSpec`` or
    ``None`` (4x8). Policy parameters go as keyword arguments
    (``ss.simulate(policy="tiresias", starvation=2)``) or, for names that clash with the
    options here or with Python keywords (qssf's ``seed`` and ``lambda``), in ``params``.
    ``workers`` above 1 simulates the partitions in parallel processes where the run
    allows it (``shapeshift.runs.parallel``), or as Ray tasks with ``backend="ray"``;
    the result is the same.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be an integer >= 1, got {workers!r}", field="workers")
    merged = {**(params or {}), **policy_params}
    spec = _spec(
        workload,
        cluster,
        policy,
        merged,
        fmt=format,
        round=round,
        seed=seed,
        launch_delay=launch_delay,
        restore_penalty=restore_penalty,
        throughput=throughput,
        energy=energy,
        window=window,
        record=record,
    )
    return run(spec, workers=workers, backend=backend)


def _entries(policies: Sequence[str] | Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(label, policy, params) per entry of ``compare``'s ``policies`` argument."""
    if isinstance(policies, str):
        raise InputError("policies must be a list of names or a mapping of label -> policy", field="policies")
    if isinstance(policies, Mapping):
        entries = []
        for label, value in policies.items():
            if isinstance(value, str):
                entries.append((str(label), value, {}))
            elif isinstance(value, Sequence) and len(value) == 2 and isinstance(value[1], Mapping):
                entries.append((str(label), str(value[0]), dict(value[1])))
            else:
                raise InputError(
                    f"policies[{label!r}] must be a policy name or (name, params), got {value!r}", field="policies"
                )
        return entries
    return [(str(name), str(name), {}) for name in policies]


def compare(
    policies: Sequence[str] | Mapping[str, Any],
    workload: Any = None,
    cluster: Any = None,
    *,
    workers: int = 1,
    **options: Any,
) -> Comparison:
    """Run several policies on the same inputs; ``options`` are ``simulate``'s.

    ``policies`` is a list of names, or a mapping of label -> name or
    ``(name, params)`` to compare one policy with itself under other parameters.
    With ``workers > 1`` the runs go to that many processes; the results do not depend
    on it.
    """
    entries = _entries(policies)
    if not entries:
        raise InputError("compare needs at least one policy", field="policies")
    labels = [label for label, _, _ in entries]
    if len(set(labels)) != len(labels):
        raise InputError("compare lists a label twice; give each entry a distinct label", field="policies")
    if workers < 1:
        raise InputError("workers must be >= 1", field="workers")
    base = _spec(
        workload,
        cluster,
        "fifo",
        {},
        fmt=options.pop("format", None),
        round=options.pop("round", None),
        seed=options.pop("seed", 0),
        launch_delay=options.pop("launch_delay", 0.0),
        restore_penalty=options.pop("restore_penalty", 30.0),
        throughput=options.pop("throughput", None),
        energy=options.pop("energy", None),
        window=options.pop("window", None),
        record=options.pop("record", ()),
    )
    if options:
        raise InputError(f"unknown compare option {next(iter(options))!r}", field=next(iter(options)))
    specs = []
    for _, policy, params in entries:
        make_policy(policy, params)  # fail fast, here, on unknown policies and bad parameters
        specs.append(replace(base, policy=policy, params=tuple(params.items())))
    workers = min(workers, len(specs), os.cpu_count() or 1)
    if workers <= 1:
        results = [run(spec) for spec in specs]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(run, specs))
    return Comparison.of(results, labels)
