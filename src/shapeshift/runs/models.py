"""The speed models a run can simulate with, by name.

A run names its throughput model (``ThroughputSpec.kind``); this table turns the name
into the model for a cluster. Adding a measured model (another paper's profiles) is one
entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shapeshift.datasets import locate
from shapeshift.model import ClusterSpec
from shapeshift.perf.colocation import InterferenceModel
from shapeshift.perf.throughput import ThroughputModel


@dataclass(frozen=True)
class ThroughputKind:
    description: str
    needs_path: bool
    build: Callable[[ClusterSpec, str | None], ThroughputModel]


def _trace(cluster: ClusterSpec, _path: str | None) -> ThroughputModel:
    from shapeshift.perf.throughput import TraceSpeedModel

    return TraceSpeedModel(cluster)


def _trace_placement(cluster: ClusterSpec, _path: str | None) -> ThroughputModel:
    from shapeshift.perf.throughput import TraceSpeedModel

    return TraceSpeedModel(cluster, placement_slowdown=True)


def _synergy(cluster: ClusterSpec, _path: str | None) -> ThroughputModel:
    from shapeshift.perf.synergy_speed import SynergySpeedModel

    return SynergySpeedModel(cluster)


def _ground_truth(_cluster: ClusterSpec, path: str | None) -> ThroughputModel:
    from shapeshift.perf.ground_truth import GroundTruthModel

    assert path is not None
    return GroundTruthModel.from_dir(locate(path))


def _pollux(cluster: ClusterSpec, path: str | None, calibrate: bool = False) -> ThroughputModel:
    from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth

    assert path is not None
    return PolluxGroundTruth(locate(path), tuple(n.gpu_type for n in cluster.nodes), calibrate=calibrate)


def _pollux_calibrated(cluster: ClusterSpec, path: str | None) -> ThroughputModel:
    return _pollux(cluster, path, calibrate=True)


THROUGHPUT_KINDS: dict[str, ThroughputKind] = {
    "trace": ThroughputKind("recorded durations, scaled by GPU count and type", False, _trace),
    "trace-placement": ThroughputKind(
        "as trace, and catalogued models run slower spread over more nodes than needed (Gavel's ratios)",
        False,
        _trace_placement,
    ),
    "synergy": ThroughputKind(
        "as trace, and Synergy's models run at their published CPU/memory profile's speed", False, _synergy
    ),
    "ground-truth": ThroughputKind(
        "measured Rubick speed tables (a traces/ directory, e.g. the bundled rubick-a800-tables)", True, _ground_truth
    ),
    "pollux": ThroughputKind(
        "measured Pollux profiles with statistical efficiency (a profiles/ directory, e.g. pollux-profiles)",
        True,
        _pollux,
    ),
    "pollux-calibrated": ThroughputKind(
        "as pollux, every application slowed by the Sia artifact's calibration factor (simulator_config.SLOWDOWNS)",
        True,
        _pollux_calibrated,
    ),
}


def build_throughput(kind: str, path: str | None, cluster: ClusterSpec) -> ThroughputModel:
    """The speed model named ``kind`` (reading ``path`` if it needs data) for ``cluster``."""
    return THROUGHPUT_KINDS[kind].build(cluster, path)


def build_interference(table: str | None, seed: int) -> InterferenceModel:
    """The speed of jobs sharing a GPU: the measured ``table`` (CSV) over the default model."""
    from shapeshift.perf.colocation import PairTable, UtilisationInterference

    default = UtilisationInterference(seed=seed)
    return PairTable.from_csv(table, default) if table else default
