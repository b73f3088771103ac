"""Which cluster, speed model and overheads a run uses, and where each came from.

A value the user gives (a command-line flag, a keyword argument, an experiment-file key)
always wins. Where the user gave none and the workload is a bundled data set with an
evaluation setting (``shapeshift.datasets.catalog.Setting``), the data set's value is
used: ``simulate --workload rubick-base --policy sia`` then runs on the 8 x 8 A800
cluster with the measured tables and the 78 s restore pause, as ``reproduce`` does.
Otherwise the run's defaults apply. Every run that goes through here records, in
``summary.json`` under ``setting``, each value and its source: ``flag``, ``dataset`` or
``default``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from shapeshift.datasets import Dataset, lookup
from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec
from shapeshift.runs.defaults import DEMO_CLUSTER
from shapeshift.runs.inputs import resolve_cluster, resolve_workload
from shapeshift.runs.spec import RunSpec, ThroughputSpec
from shapeshift.workloads.workload import Workload

#: Defaults when neither the user nor a data set sets a value.
DEFAULT_LAUNCH_DELAY = 0.0
DEFAULT_RESTORE_PENALTY = 30.0


@dataclass(frozen=True)
class Given:
    """What the user set explicitly; ``None`` means "not given"."""

    cluster: Any = None
    throughput: ThroughputSpec | str | None = None
    launch_delay: float | None = None
    restore_penalty: float | str | None = None
    round_seconds: float | None = None


def parse_throughput_text(text: str) -> ThroughputSpec:
    """``trace`` or ``KIND:PATH`` (a path or a data set name) -> ``ThroughputSpec``."""
    kind, sep, path = text.partition(":")
    return ThroughputSpec(kind.strip(), path.strip() if sep else None)


def throughput_label(spec: ThroughputSpec) -> str:
    return f"{spec.kind}:{spec.path}" if spec.path else spec.kind


def _cluster_label(cluster: Any) -> str:
    if cluster is None:
        return DEMO_CLUSTER
    if isinstance(cluster, ClusterSpec):
        return f"ClusterSpec ({cluster.total_gpus} GPUs)"
    return str(cluster)


@dataclass(frozen=True)
class Settled:
    """A workload with the options settled for it; ``spec(policy, params)`` makes runs."""

    workload: Workload
    dataset: Dataset | None
    cluster: ClusterSpec
    throughput: ThroughputSpec
    overheads: Overheads
    round_seconds: float | None
    origins: tuple[tuple[str, Any, str], ...]
    #: Whether the cluster came from the data set (its per-policy share limits then apply).
    dataset_cluster: bool

    def params_for(self, policy: str, params: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, Any, str]]]:
        """``params`` plus the data set's policy parameters the policy declares and the user
        did not give, with their origins."""
        from shapeshift.policies.framework.registry import policy_info

        merged = dict(params)
        origins = []
        setting = self.dataset.setting if self.dataset is not None else None
        declared = policy_info(policy).params.model_fields
        for key, value in setting.policy_params if setting is not None else ():
            if key not in declared:
                continue
            if key in merged:
                origins.append((f"{policy}.{key}", merged[key], "flag"))
            else:
                merged[key] = value
                origins.append((f"{policy}.{key}", value, "dataset"))
        return merged, origins

    def cluster_for(self, policy: str, params: Mapping[str, Any]) -> ClusterSpec:
        """The cluster, with the data set's jobs-per-GPU limit for ``policy`` (AntMan packs
        two jobs per GPU in the Rubick study) unless the policy's sharing is turned off."""
        setting = self.dataset.setting if self.dataset is not None else None
        limit = dict(setting.share_limits).get(policy) if setting is not None and self.dataset_cluster else None
        if limit is None or str(params.get("sharing", True)).strip().lower() in ("false", "0", "no", "off"):
            return self.cluster
        return replace(self.cluster, gpu_share_limit=limit)

    def spec(self, policy: str, params: Mapping[str, Any], **options: Any) -> RunSpec:
        """The ``RunSpec`` of ``policy`` on this settled input; ``options`` are further
        ``RunSpec`` fields (seed, energy, window, record, interference)."""
        merged, origins = self.params_for(policy, params)
        return RunSpec(
            workload=self.workload,
            cluster=self.cluster_for(policy, merged),
            policy=policy,
            params=tuple(merged.items()),
            round_seconds=self.round_seconds,
            overheads=self.overheads,
            throughput=self.throughput,
            setting=self.origins + tuple(origins),
            **options,
        )

    def line(self) -> str:
        """The setting in one line, for the printed summary."""
        by_source: dict[str, list[str]] = {}
        for key, value, source in self.origins:
            if key == "dataset":
                continue
            shown = "-" if value is None else (f"{value:g} s" if isinstance(value, float) else str(value))
            by_source.setdefault(source, []).append(f"{key.replace('_', ' ')} {shown}")
        parts = []
        for source in ("dataset", "flag", "default"):
            if by_source.get(source):
                where = f"data set {self.dataset.name}" if source == "dataset" and self.dataset else source
                parts.append(f"{', '.join(by_source[source])} ({where})")
        return "setting: " + "; ".join(parts)


def settle(workload: Any, given: Given, *, fmt: str | None = None, seed: int = 0) -> Settled:
    """Read ``workload`` and settle each option: the user's value, else the data set's,
    else the default. The overheads are checked before the workload is read, so a bad
    flag fails at once."""
    found = lookup(workload) if isinstance(workload, str) or hasattr(workload, "__fspath__") else None
    dataset = found[0] if found is not None else None
    setting = dataset.setting if dataset is not None else None
    origins: list[tuple[str, Any, str]] = [("dataset", dataset.name, "dataset")] if dataset is not None else []

    def pick(key: str, value: Any, from_setting: Any, default: Any, shown: Any = None) -> Any:
        """The value and its source, recorded as ``key`` (``shown`` labels it)."""
        chosen, source = (value, "flag") if value is not None else (
            (from_setting, "dataset") if from_setting is not None else (default, "default")
        )
        origins.append((key, shown(chosen) if shown else chosen, source))
        return chosen

    launch = pick("launch_delay", given.launch_delay, setting.launch_delay if setting else None, DEFAULT_LAUNCH_DELAY)
    try:
        given_restore = given.restore_penalty
        if isinstance(given_restore, str):
            given_restore = Overheads.parse_penalty(given_restore)
        restore = pick(
            "restore_penalty", given_restore, setting.restore_penalty if setting else None, DEFAULT_RESTORE_PENALTY
        )
        overheads = Overheads(launch, restore)
    except ValueError as exc:
        raise InputError(str(exc), field="--restore-penalty/--launch-delay") from None
    data = resolve_workload(workload, fmt, seed)

    cluster_arg = pick("cluster", given.cluster, setting.cluster if setting else None, None, _cluster_label)
    dataset_cluster = given.cluster is None and setting is not None and setting.cluster is not None
    cluster = resolve_cluster(cluster_arg)
    if dataset_cluster and setting is not None and not setting.tenants:
        cluster = replace(cluster, tenants={})

    given_throughput = given.throughput
    if isinstance(given_throughput, str):
        given_throughput = parse_throughput_text(given_throughput)
    throughput = pick(
        "throughput",
        given_throughput,
        parse_throughput_text(setting.throughput) if setting and setting.throughput else None,
        ThroughputSpec(),
        throughput_label,
    )
    round_seconds = pick("round", given.round_seconds, setting.round_seconds if setting else None, None)
    return Settled(
        workload=data,
        dataset=dataset,
        cluster=cluster,
        throughput=throughput,
        overheads=overheads,
        round_seconds=round_seconds,
        origins=tuple(origins),
        dataset_cluster=dataset_cluster,
    )


def setting_summary(origins: tuple[tuple[str, Any, str], ...]) -> dict[str, Any]:
    """``summary.json``'s ``setting``: each option's value and source."""
    out: dict[str, Any] = {}
    for key, value, source in origins:
        out[key] = value if key == "dataset" else {"value": value, "source": source}
    return out
