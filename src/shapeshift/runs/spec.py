"""``RunSpec``: everything that determines one simulation, as one frozen value.

Every front door (the ``simulate`` and ``compare`` commands, experiment files, the Rubick
reproduction, the live fidelity check, ``import shapeshift``) describes its run with a
``RunSpec`` and hands it to :func:`shapeshift.runs.run`. A capability added to the run
(energy management, a ground-truth speed model, a recording) therefore exists on every
path at once, and two front doors given the same description produce the same result.

A ``RunSpec`` holds plain values only (the workload table, the cluster, names and
numbers), so it pickles: it is what worker processes receive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec
from shapeshift.runs.models import THROUGHPUT_KINDS
from shapeshift.workloads.workload import Workload

#: Recordings a run can keep besides the summary and per-job rows.
#: ``intervals``: the exact GPU-holding intervals of every job (preemptions included).
RECORDINGS = frozenset({"intervals", "explanations"})


def check_seed(seed: object) -> None:
    """Seeds are integers >= 0 (what numpy's generators accept)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"the seed must be an integer >= 0, got {seed!r}", field="--seed")


def _frozen_items(values: Mapping[str, Any] | tuple[tuple[str, Any], ...] | None) -> tuple[tuple[str, Any], ...]:
    items = values.items() if isinstance(values, Mapping) else (values or ())
    return tuple(sorted((str(k), v) for k, v in items))


@dataclass(frozen=True)
class ThroughputSpec:
    """How fast jobs run in the simulation (the executor's speed model).

    * ``trace``: replay each job's recorded duration, scaled by GPU count and GPU type
      (``shapeshift.perf.throughput.TraceSpeedModel``);
    * ``trace-placement``: as ``trace``, and a catalogued model whose GPUs span more nodes
      than needed runs slower by Gavel's measured consolidated / unconsolidated ratio
      (or a stated proxy; ``shapeshift.workloads.placement_figures``);
    * ``synergy``: as ``trace``, and a job of one of Synergy's models runs at its published
      CPU/memory profile's speed (``shapeshift.perf.synergy_speed``);
    * ``ground-truth``: the measured Rubick speed tables under ``path`` (a
      ``traces/`` directory), with a fitted fallback for unmeasured configurations
      (``shapeshift.perf.ground_truth.GroundTruthModel``). Jobs then run their
      ``iterations``.
    """

    kind: str = "trace"
    path: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in THROUGHPUT_KINDS:
            raise InputError(
                f"unknown throughput model {self.kind!r}; known: {', '.join(THROUGHPUT_KINDS)}", field="throughput"
            )
        if THROUGHPUT_KINDS[self.kind].needs_path and not self.path:
            raise InputError(f"throughput model {self.kind!r} needs a data path", field="throughput.path")


@dataclass(frozen=True)
class EnergySpec:
    """Cluster energy management during the run.

    ``mode="ces"`` powers idle nodes down as Helios CES does (``shapeshift.energy``);
    ``params`` are ``CESConfig`` fields (e.g. ``buffer``, ``boot_delay``). With
    ``baseline`` the run is repeated without energy management to report the JCT impact.
    """

    mode: str = "ces"
    params: tuple[tuple[str, Any], ...] = ()
    baseline: bool = True

    def __post_init__(self) -> None:
        if self.mode != "ces":
            raise InputError(f"unknown energy mode {self.mode!r}; known: none, ces", field="energy")
        object.__setattr__(self, "params", _frozen_items(self.params))


@dataclass(frozen=True)
class RunSpec:
    """One simulation: workload, cluster, policy and every option that changes the result.

    ``params`` are the policy's parameters (validated by the policy registry when the run
    starts; values may be strings as typed on the command line). ``window`` restricts
    the reported metrics to jobs ``[start, end)`` in submit order (steady-state
    measurement, as Blox and Tiresias report); it implies recording intervals.
    ``record`` names extra recordings (see ``RECORDINGS``).
    """

    workload: Workload
    cluster: ClusterSpec
    policy: str = "fifo"
    params: tuple[tuple[str, Any], ...] = ()
    round_seconds: float | None = None
    overheads: Overheads = field(default_factory=Overheads)
    seed: int = 0
    throughput: ThroughputSpec = field(default_factory=ThroughputSpec)
    energy: EnergySpec | None = None
    window: tuple[int, int] | None = None
    record: frozenset[str] = frozenset()
    #: A measured pairwise interference table (CSV ``model_a,model_b,speed_a,speed_b``)
    #: for jobs sharing GPUs; ``None`` = the default model (``shapeshift.perf.colocation``).
    interference: str | None = None
    #: Where each option came from: ``(option, value, source)`` with source ``flag``,
    #: ``dataset`` or ``default`` (``shapeshift.runs.setting``); written to
    #: ``summary.json`` as ``setting``. Provenance only: it never changes the result.
    setting: tuple[tuple[str, Any, str], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _frozen_items(self.params))
        object.__setattr__(self, "record", frozenset(self.record))
        unknown = sorted(self.record - RECORDINGS)
        if unknown:
            raise InputError(f"unknown recording {unknown[0]!r}; known: {', '.join(sorted(RECORDINGS))}")
        if self.round_seconds is not None and not (math.isfinite(self.round_seconds) and self.round_seconds > 0):
            raise InputError("the round must be a finite number of seconds > 0", field="--round")
        check_seed(self.seed)
        if self.window is not None:
            window = self.window
            if (
                not isinstance(window, tuple | list)
                or len(window) != 2
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in window)
            ):
                raise InputError(f"the window must be (start, end) job indexes, got {window!r}", field="window")
            start, end = window
            if not (0 <= start < end):
                raise InputError("the window must be start:end job indexes with 0 <= start < end", field="--window")
            if start >= len(self.workload):
                raise InputError(
                    f"the window starts at job {start} but workload {self.workload.name!r} has "
                    f"{len(self.workload)} jobs",
                    field="--window",
                )

    @property
    def policy_params(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def records_intervals(self) -> bool:
        return "intervals" in self.record or self.window is not None
