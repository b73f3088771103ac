"""Command-line options shared by the commands that run simulations, declared once so
``simulate``, ``compare`` and friends spell, document and validate them the same way."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from shapeshift.errors import InputError
from shapeshift.runs.defaults import DEMO_CLUSTER

if TYPE_CHECKING:
    from shapeshift.runs.setting import Settled
    from shapeshift.runs.spec import ThroughputSpec

WorkloadOption = Annotated[
    Path | None,
    typer.Option(
        help="Trace file (CSV/Parquet) or a bundled data set (philly, rubick-base, pollux-workload6, ...; "
        "see `shapeshift datasets list`). Default: a seeded synthetic demo workload."
    ),
]
FormatOption = Annotated[str | None, typer.Option("--format", help="Trace format (default: detected from the header).")]
ClusterOption = Annotated[
    str | None,
    typer.Option(
        help="NxG (N nodes of G GPUs), a cluster YAML file or a bundled cluster (philly-vcs, rubick-a800). "
        f"Default: the data set's cluster, else {DEMO_CLUSTER}."
    ),
]
SeedOption = Annotated[int, typer.Option(min=0, help="Seed for every random choice (an integer >= 0).")]
LaunchDelayOption = Annotated[
    float | None,
    typer.Option(help="Seconds from launch until a job makes progress. Default: the data set's, else 0."),
]
RestorePenaltyOption = Annotated[
    str | None,
    typer.Option(
        help="Checkpoint-restore pause per preemption/reconfiguration: seconds, 'helios', 'sia-artifact' "
        "(the Sia artifact's per-application delays, on every start) or 'sia-artifact-30' (30 s, on every start). "
        "Default: the data set's, else 30."
    ),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")]


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
    str | None,
    typer.Option(
        help="Speed model: trace (recorded durations), trace-placement (and catalogued models run "
        "slower spread over more nodes than needed, by Gavel's measured ratios), synergy (and Synergy's CNN/RNN "
        "models run at their published speed for the CPUs and memory they get), ground-truth:DIR (the measured "
        "Rubick tables in DIR, "
        "e.g. the bundled rubick-a800-tables; jobs run their iterations), pollux:DIR (the Pollux profiles, "
        "with statistical efficiency, e.g. pollux-profiles) or pollux-calibrated:DIR (as pollux, each application "
        "slowed by the Sia artifact's calibration factor). Default: the data set's, else trace."
    ),
]


def parse_throughput(text: str) -> ThroughputSpec:
    """``trace`` or ``KIND:PATH`` (a directory or a bundled data set) -> ``ThroughputSpec``."""
    from shapeshift.datasets import locate
    from shapeshift.runs.setting import parse_throughput_text

    try:
        spec = parse_throughput_text(text)
        if spec.path is not None and not locate(spec.path).exists():
            raise InputError(f"{spec.path}: not found")
    except InputError as exc:
        raise InputError(exc.message, field="--throughput") from None
    return spec


def settle_flags(
    workload: Path | None,
    fmt: str | None,
    cluster: str | None,
    seed: int,
    *,
    launch_delay: float | None,
    restore_penalty: str | None,
    throughput: str | None,
    round_seconds: float | None,
) -> Settled:
    """The workload and the run options the flags give, the rest from the data set's
    evaluation setting or the defaults (``shapeshift.runs.setting``)."""
    from shapeshift.runs.setting import Given, settle

    given = Given(
        cluster=cluster,
        throughput=parse_throughput(throughput) if throughput is not None else None,
        launch_delay=launch_delay,
        restore_penalty=restore_penalty,
        round_seconds=round_seconds,
    )
    return settle(workload, given, fmt=fmt, seed=seed)
