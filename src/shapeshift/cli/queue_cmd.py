"""``shapeshift queue``: every job with state, plan, placement, progress, and why it waits."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from shapeshift.cli.common import console, guarded


def progress_text(job: dict[str, Any]) -> str:
    total = job.get("iterations")
    done = job.get("progress") or 0
    if total:
        return f"{int(done)}/{total} ({100 * done / total:.0f}%)"
    return f"{done:.0f}s"


def _seconds(value: float | None) -> str:
    return f"{value:.3f}" if value else "-"


def perf_table(jobs: list[dict[str, Any]]) -> Table:
    """Per running job: the policy model's predicted seconds per iteration, the measured
    ones (the workers' reports) and the relative error, which drives the online refit."""
    table = Table()
    for column in ("id", "name", "plan", "placement", "predicted s/iter", "observed s/iter", "error"):
        table.add_column(column, overflow="fold")
    for job in jobs:
        if job["state"] != "running":
            continue
        predicted, observed = job.get("predicted_iter_time"), job.get("iter_time")
        error = f"{100 * (predicted - observed) / observed:+.0f}%" if predicted and observed else "-"
        table.add_row(
            job["id"], job["name"], job["plan"], job["placement"], _seconds(predicted), _seconds(observed), error
        )
    return table


@guarded
def command(
    state: Annotated[str | None, typer.Option(help="Controller state directory.")] = None,
    all_jobs: Annotated[bool, typer.Option("--all", help="Include finished jobs.")] = True,
    perf: Annotated[
        bool, typer.Option("--perf", help="Running jobs: predicted vs observed iteration time (plan-aware policies).")
    ] = False,
) -> None:
    """List jobs: id, name, state, plan, placement, progress, and the reason a waiting job waits."""
    from shapeshift.runtime.remote import ControllerClient

    if perf:
        console.print(perf_table(ControllerClient.from_state(state).jobs()))
        return

    table = Table()
    for column in ("id", "name", "state", "plan", "placement", "progress", "reason"):
        table.add_column(column, overflow="fold")
    for job in ControllerClient.from_state(state).jobs():
        if not all_jobs and job["state"] in ("completed", "failed", "cancelled", "rejected"):
            continue
        waiting = job["state"] == "queued"
        table.add_row(
            job["id"],
            job["name"],
            job["state"],
            job["plan"] if not waiting else "",
            job["placement"] if not waiting else "",
            progress_text(job),
            job["reason"] if waiting or job["state"] in ("failed", "rejected") else "",
        )
    console.print(table)
