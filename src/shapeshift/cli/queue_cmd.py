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


def _reason(text: str, explain: bool) -> str:
    from shapeshift.predict.primo_duration import EXPLAIN_SEPARATOR

    return text if explain else text.split(EXPLAIN_SEPARATOR)[0]


@guarded
def command(
    state: Annotated[str | None, typer.Option(help="Controller state directory.")] = None,
    all_jobs: Annotated[bool, typer.Option("--all", help="Include finished jobs.")] = True,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="With estimator=primo: a waiting job's predicted duration and top 3 reasons."),
    ] = False,
) -> None:
    """List jobs: id, name, state, plan, placement, progress, and the reason a waiting job waits."""
    from shapeshift.runtime.remote import ControllerClient

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
            _reason(job["reason"], explain) if waiting or job["state"] in ("failed", "rejected") else "",
        )
    console.print(table)
