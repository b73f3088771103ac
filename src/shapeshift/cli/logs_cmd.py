"""``shapeshift logs ID``: a job's output, every attempt, one rank."""

from __future__ import annotations

from typing import Annotated

import typer

from shapeshift.cli.common import guarded


@guarded
def command(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    rank: Annotated[int, typer.Option(help="Which rank's output.")] = 0,
    state: Annotated[str | None, typer.Option(help="Controller state directory.")] = None,
) -> None:
    """Print a job's output (all attempts of one rank)."""
    from shapeshift.runtime.remote import ControllerClient

    typer.echo(ControllerClient.from_state(state).logs(job_id, rank), nl=False)
