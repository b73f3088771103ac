"""``shapeshift submit job.yaml``: validate a job file locally, send it, print the job id."""

from __future__ import annotations

from typing import Annotated

import typer

from shapeshift.cli.common import console, guarded


@guarded
def command(
    job_file: Annotated[str, typer.Argument(help="Job file (YAML).")],
    state: Annotated[str | None, typer.Option(help="Controller state directory.")] = None,
) -> None:
    """Submit a job; prints its id. A malformed file is refused with the field and reason."""
    from shapeshift.runtime.jobfile import load_job_file
    from shapeshift.runtime.remote import ControllerClient

    job = load_job_file(job_file)
    console.print(ControllerClient.from_state(state).submit(job.to_json()), highlight=False)
