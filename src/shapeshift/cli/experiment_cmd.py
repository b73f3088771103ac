"""``shapeshift experiment``: run and check declarative experiment files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from shapeshift.cli.common import console, err_console, guarded, progress_bar, show_progress

app = typer.Typer(
    help="Declarative experiments: sweeps over workloads, clusters, policies and parameters, cached and parallel.",
    no_args_is_help=True,
)


@app.command("run")
@guarded
def run_command(
    file: Annotated[Path, typer.Argument(help="Experiment YAML file.")],
    out: Annotated[Path | None, typer.Option(help="Output directory (default: results/<experiment name>).")] = None,
    workers: Annotated[int, typer.Option(help="Runs in parallel (processes). Default: CPU count.")] = 0,
    backend: Annotated[str, typer.Option(help="processes, or ray to spread runs over a Ray cluster.")] = "processes",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    """Run every run of FILE not already finished in OUT; write results.parquet, results.csv, results_mean.csv."""
    from shapeshift.experiments.runner import run_experiment
    from shapeshift.experiments.schema import load_experiment

    experiment = load_experiment(file)
    target = out or Path("results") / experiment.name
    count = workers or os.cpu_count() or 1
    try:
        with progress_bar(f"experiment {experiment.name}", show_progress(quiet)) as update:
            outcome = run_experiment(experiment, target, workers=count, backend=backend, progress=update)
    except KeyboardInterrupt:
        err_console.print("interrupted: finished runs are kept; run the same command again to resume")
        raise typer.Exit(130) from None
    if not quiet:
        console.print(
            f"{outcome.total} runs ({outcome.distinct} distinct): {outcome.executed} simulated, "
            f"{outcome.cached} reused from cache, {len(outcome.failed)} failed, in {outcome.wall_seconds:.1f} s",
            highlight=False,
        )
        console.print(
            f"wrote {target / 'results.parquet'}, {target / 'results.csv'} and {target / 'results_mean.csv'} "
            "(means over seeds with 95% intervals)",
            highlight=False,
        )
    if outcome.failed:
        for run, error in outcome.failed:
            err_console.print(f"[bold red]run failed:[/] {run}: {error}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)


@app.command("validate")
@guarded
def validate_command(file: Annotated[Path, typer.Argument(help="Experiment YAML file.")]) -> None:
    """Check FILE and list its runs without running anything."""
    from shapeshift.experiments.expand import expand
    from shapeshift.experiments.schema import load_experiment

    experiment = load_experiment(file)
    plans = expand(experiment)
    table = Table(title=f"{experiment.name}: {len(plans)} runs")
    columns = list(plans[0].labels()) if plans else []
    for column in columns:
        table.add_column(column)
    for plan in plans[:50]:
        table.add_row(*("-" if v is None else str(v) for v in plan.labels().values()))
    console.print(table)
    if len(plans) > 50:
        console.print(f"... and {len(plans) - 50} more", highlight=False)
