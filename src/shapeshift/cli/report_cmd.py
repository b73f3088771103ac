"""``shapeshift report``: an HTML report (and PNGs) from an experiment directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shapeshift.cli.common import console, guarded


@guarded
def command(
    directory: Annotated[Path, typer.Argument(help="Experiment output directory (holds results.parquet).")],
    out: Annotated[Path, typer.Option(help="HTML file to write; PNGs go to <name>_figures/ beside it.")] = Path(
        "report.html"
    ),
    runs: Annotated[
        list[str] | None, typer.Option("--run", help="Run id (or prefix) for per-run figures (repeatable).")
    ] = None,
    x: Annotated[str | None, typer.Option("--x", help="Sweep axis for load plots (default: detected).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    """Self-contained HTML report: metric tables, JCT CDFs, load sweeps, queue/utilization over time."""
    from shapeshift.experiments.report import build_report

    outcome = build_report(directory, out, runs=runs, x_axis=x)
    if not quiet:
        console.print(f"wrote {outcome.html} and {len(outcome.figures)} figures in {outcome.figures[0].parent}")
