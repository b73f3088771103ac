"""The run set of an experiment: the cross product of its workloads, clusters, policies,
sweep axes and seeds, in a fixed order.

An axis applies only where it means something: ``policy.threshold`` multiplies the runs
of policies that have a ``threshold`` and leaves the others alone (their row shows no
value), so a sweep never runs the same FIFO simulation five times.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shapeshift.datasets import lookup
from shapeshift.engine.overheads import Overheads
from shapeshift.experiments.schema import (
    Axis,
    Experiment,
    PolicyEntry,
    WorkloadEntry,
    generator_accepts,
    policy_accepts,
)
from shapeshift.experiments.workloads import TRANSFORMS, WorkloadSpec
from shapeshift.runs.setting import parse_throughput_text
from shapeshift.runs.spec import EnergySpec, ThroughputSpec


@dataclass(frozen=True)
class RunPlan:
    """Everything one simulation needs, plus the labels its results row carries."""

    index: int
    workload: WorkloadSpec
    cluster_label: str
    cluster: str
    policy_label: str
    policy: str
    #: Policy parameters as sorted (key, value) pairs.
    params: tuple[tuple[str, Any], ...]
    seed: int
    round: float | None
    overheads: Overheads
    window: tuple[int, int] | None
    throughput: ThroughputSpec
    energy: EnergySpec | None
    #: Every sweep axis of the experiment with this run's value (``None`` where it does not apply).
    axes: tuple[tuple[str, Any], ...]

    def labels(self) -> dict[str, Any]:
        return {
            "workload": self.workload.name,
            "cluster": self.cluster_label,
            "policy": self.policy_label,
            "policy_name": self.policy,
            "seed": self.seed,
            **dict(self.axes),
        }


def _applies(axis: Axis, workload: WorkloadEntry, policy: PolicyEntry) -> bool:
    if axis.section == "workload":
        return generator_accepts(workload, axis.param)
    if axis.section == "policy":
        return policy_accepts(policy.policy, axis.param)
    return True


def _workload_spec(entry: WorkloadEntry, overrides: Mapping[str, Any], seed: int) -> WorkloadSpec:
    params = dict(entry.params)
    transforms = list(entry.transforms)
    for key, value in overrides.items():
        if key in TRANSFORMS:
            transforms = [t for t in transforms if t[0] != key] + [(key, value)]
        else:
            params[key] = value
    return WorkloadSpec(
        name=entry.name,
        file=entry.file,
        format=entry.format,
        generator=entry.generator,
        params=tuple(sorted(params.items())),
        transforms=tuple(transforms),
        seed=seed,
    )


def _settled(experiment: Experiment, workload: WorkloadEntry) -> tuple[Experiment, tuple[tuple[str, str], ...]]:
    """The experiment as it applies to ``workload``: where the workload is a bundled data set
    with an evaluation setting, its throughput model, overheads and round fill what the file
    leaves unset, as ``simulate`` does (``shapeshift.runs.setting``); and the policy
    parameters the setting gives (for policies that declare them)."""
    found = lookup(workload.file) if workload.file and not Path(workload.file).exists() else None
    setting = found[0].setting if found is not None else None
    if setting is None:
        return experiment, ()
    unset = experiment.unset
    changes: dict[str, Any] = {}
    if "throughput" in unset and setting.throughput:
        changes["throughput"] = parse_throughput_text(setting.throughput)
    if "round" in unset and setting.round_seconds is not None:
        changes["round"] = setting.round_seconds
    overheads = experiment.overheads
    if "launch_delay" in unset and setting.launch_delay is not None:
        overheads = replace(overheads, launch_delay=setting.launch_delay)
    if "restore_penalty" in unset and setting.restore_penalty is not None:
        overheads = replace(overheads, restore_penalty=setting.restore_penalty)
    return replace(experiment, overheads=overheads, **changes), setting.policy_params


def expand(experiment: Experiment) -> list[RunPlan]:
    """All runs, ordered workload, cluster, policy, sweep axes (file order), seed."""
    from shapeshift.policies.framework.registry import registry

    plans: list[RunPlan] = []
    whole = experiment
    for workload in whole.workloads:
        experiment, setting_params = _settled(whole, workload)
        for cluster_label, cluster in experiment.clusters:
            for policy in experiment.policies:
                active = [a for a in experiment.axes if _applies(a, workload, policy)]
                for values in itertools.product(*(a.values for a in active)):
                    chosen = dict(zip((a.key for a in active), values, strict=True))
                    wl_over = {a.param: chosen[a.key] for a in active if a.section == "workload"}
                    declared = registry()[policy.policy].params.model_fields
                    params = {k: v for k, v in setting_params if k in declared} | dict(policy.params)
                    params.update({a.param: chosen[a.key] for a in active if a.section == "policy"})
                    overheads = experiment.overheads
                    for a in active:
                        if a.section == "overheads":
                            overheads = replace(overheads, **{a.param: chosen[a.key]})
                    round_seconds = chosen.get("round", experiment.round)
                    for seed in experiment.seeds:
                        run_params = dict(params)
                        if "seed" in registry()[policy.policy].params.model_fields and "seed" not in run_params:
                            run_params["seed"] = seed
                        plans.append(
                            RunPlan(
                                index=len(plans),
                                workload=_workload_spec(workload, wl_over, seed),
                                cluster_label=cluster_label,
                                cluster=cluster,
                                policy_label=policy.name,
                                policy=policy.policy,
                                params=tuple(sorted(run_params.items())),
                                seed=seed,
                                round=round_seconds,
                                overheads=overheads,
                                window=experiment.window,
                                throughput=experiment.throughput,
                                energy=experiment.energy,
                                axes=tuple((a.key, chosen.get(a.key)) for a in experiment.axes),
                            )
                        )
    return plans
