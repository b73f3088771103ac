"""``shapeshift logs ID``: a job's output, every attempt, one rank.

Logs are files: with a live controller they come through the API (so a user token
works); when no controller answers, the operator's CLI reads them directly, finding
them through the state database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shapeshift.cli.common import guarded
from shapeshift.errors import InputError


@guarded
def command(
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    rank: Annotated[int, typer.Option(help="Which rank's output (an integer >= 0).")] = 0,
    state: Annotated[str | None, typer.Option(help="Controller state directory.")] = None,
) -> None:
    """Print a job's output (all attempts of one rank)."""
    from shapeshift.runtime.logs import job_dir_from_state, read_rank_logs
    from shapeshift.runtime.remote import ControllerClient, ControllerUnreachable, state_dir

    if rank < 0:
        raise InputError(f"a rank is an integer >= 0, not {rank}", field="--rank")
    try:
        text = ControllerClient.from_state(state).logs(job_id, rank)
    except ControllerUnreachable:
        job_dir = job_dir_from_state(Path(state_dir(state)), job_id)
        found, ranks = read_rank_logs(job_dir, rank)
        if found is None:
            have = f"ranks 0-{max(ranks)}" if ranks else "no log yet"
            raise InputError(f"job {job_id} has no rank {rank} ({have})", field="--rank") from None
        text = found
    typer.echo(text, nl=False)
