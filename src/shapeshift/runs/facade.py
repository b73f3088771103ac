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
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from shapeshift.errors import InputError
from shapeshift.policies.framework.registry import PolicyInfo, make_policy, registry
from shapeshift.runs.execute import run
from shapeshift.runs.pairing import PairingWarning, pairing_notes
from shapeshift.runs.result import Comparison, RunResult
from shapeshift.runs.setting import Given, Settled, settle
from shapeshift.runs.spec import EnergySpec, ThroughputSpec


def policies() -> dict[str, PolicyInfo]:
    """Every registered policy by name: ``info.description`` and ``info.parameters()``
    (name, type, default)."""
    return dict(registry())


def _settled(
    workload: Any,
    cluster: Any,
    *,
    fmt: str | None,
    round: float | None,
    seed: int,
    launch_delay: float | None,
    restore_penalty: float | str | None,
    throughput: ThroughputSpec | str | None,
) -> Settled:
    """The workload and its options: the arguments given, else the bundled data set's
    evaluation setting, else the defaults (``shapeshift.runs.setting``)."""
    given = Given(cluster, throughput, launch_delay, restore_penalty, round)
    return settle(workload, given, fmt=fmt, seed=seed)


def _energy(energy: EnergySpec | str | None) -> EnergySpec | None:
    if isinstance(energy, str):
        return None if energy == "none" else EnergySpec(energy)
    return energy


def _warn(notes: list[str]) -> None:
    for note in notes:
        warnings.warn(note, PairingWarning, stacklevel=3)


def simulate(
    workload: Any = None,
    cluster: Any = None,
    policy: str = "fifo",
    *,
    params: Mapping[str, Any] | None = None,
    format: str | None = None,
    round: float | None = None,
    seed: int = 0,
    launch_delay: float | None = None,
    restore_penalty: float | str | None = None,
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
    settled = _settled(
        workload,
        cluster,
        fmt=format,
        round=round,
        seed=seed,
        launch_delay=launch_delay,
        restore_penalty=restore_penalty,
        throughput=throughput,
    )
    spec = settled.spec(policy, merged, seed=seed, energy=_energy(energy), window=window, record=frozenset(record))
    _warn(pairing_notes(spec))
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
    seed = options.pop("seed", 0)
    settled = _settled(
        workload,
        cluster,
        fmt=options.pop("format", None),
        round=options.pop("round", None),
        seed=seed,
        launch_delay=options.pop("launch_delay", None),
        restore_penalty=options.pop("restore_penalty", None),
        throughput=options.pop("throughput", None),
    )
    rest = {
        "seed": seed,
        "energy": _energy(options.pop("energy", None)),
        "window": options.pop("window", None),
        "record": frozenset(options.pop("record", ())),
    }
    if options:
        raise InputError(f"unknown compare option {next(iter(options))!r}", field=next(iter(options)))
    specs = []
    for _, policy, params in entries:
        make_policy(policy, params)  # fail fast, here, on unknown policies and bad parameters
        specs.append(settled.spec(policy, params, **rest))
    _warn([note for spec in specs for note in pairing_notes(spec)])
    workers = min(workers, len(specs), os.cpu_count() or 1)
    if workers <= 1:
        results = [run(spec) for spec in specs]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(run, specs))
    return Comparison.of(results, labels)
