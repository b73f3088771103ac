"""Command-line options shared by the commands that run simulations, declared once so
``simulate``, ``compare`` and friends spell, document and validate them the same way."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.runs.defaults import DEMO_CLUSTER

if TYPE_CHECKING:
    from shapeshift.runs.spec import ThroughputSpec

WorkloadOption = Annotated[
    Path | None, typer.Option(help="Trace file (CSV/Parquet). Default: a seeded synthetic demo workload.")
]
FormatOption = Annotated[str | None, typer.Option("--format", help="Trace format (default: detected from the header).")]
ClusterOption = Annotated[
    str | None, typer.Option(help=f"NxG (N nodes of G GPUs) or a cluster YAML file. Default: {DEMO_CLUSTER}.")
]
SeedOption = Annotated[int, typer.Option(min=0, help="Seed for every random choice (an integer >= 0).")]
LaunchDelayOption = Annotated[float, typer.Option(help="Seconds from launch until a job makes progress.")]
RestorePenaltyOption = Annotated[
    str, typer.Option(help="Checkpoint-restore pause per preemption/reconfiguration: seconds or 'helios'.")
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")]


def parse_overheads(launch_delay: float, restore_penalty: str) -> Overheads:
    """``--launch-delay`` and ``--restore-penalty`` as ``Overheads``, or one clear error."""
    try:
        return Overheads(launch_delay, Overheads.parse_penalty(restore_penalty))
    except ValueError as exc:
        raise InputError(str(exc), field="--restore-penalty/--launch-delay") from None

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]
WindowOption = Annotated[
    str | None,
    typer.Option(help="Report metrics over jobs START:END only (submit order), as steady-state studies do."),
]


def parse_window(text: str | None, jobs: int) -> tuple[int, int] | None:
    """``--window 3000:4000`` -> ``(3000, 4000)``; malformed or out-of-range windows are errors."""
    if text is None:
        return None
    start, sep, end = text.partition(":")
    if not sep or not start.strip().isdigit() or not end.strip().isdigit():
        raise InputError(f"--window takes START:END job indexes, e.g. 3000:4000, got {text!r}", field="--window")
    window = (int(start), int(end))
    if window[0] >= window[1]:
        raise InputError(f"--window {text}: END must be greater than START", field="--window")
    if window[0] >= jobs:
        raise InputError(f"--window {text} starts after the last job (the workload has {jobs})", field="--window")
    return window
AllowUnfinishedOption = Annotated[
    bool,
    typer.Option(
        "--allow-unfinished", help="Exit 0 even when jobs never finished (by default such a run exits with status 3)."
    ),
]
ThroughputOption = Annotated[
    str,
    typer.Option(
        help="Speed model: trace (recorded durations), trace-placement (and placement-sensitive models run "
        "slower spread over more nodes than needed), synergy (and Synergy's CNN/RNN models run at their "
        "published speed for the CPUs and memory they get), ground-truth:DIR (the measured Rubick tables in DIR, "
        "e.g. ../shared/data/rubick/traces; jobs run their iterations) or pollux:DIR (the Pollux profiles, "
        "with statistical efficiency)."
    ),
]


def parse_throughput(text: str) -> ThroughputSpec:
    """``trace`` or ``KIND:PATH`` -> ``ThroughputSpec``."""
    from shapeshift.runs.spec import ThroughputSpec

    kind, sep, path = text.partition(":")
    try:
        spec = ThroughputSpec(kind.strip(), path.strip() if sep else None)
    except InputError as exc:
        raise InputError(exc.message, field="--throughput") from None
    if spec.path is not None and not Path(spec.path).exists():
        raise InputError(f"{spec.path}: not found", field="--throughput")
    return spec
