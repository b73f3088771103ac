"""``shapeshift submit job.yaml``: validate a job file locally, send it, print the job id."""

from __future__ import annotations

from typing import Annotated

import typer

from shapeshift.cli.common import console, guarded


@guarded
def command(
    job_file: Annotated[str, typer.Argument(help="Job file (YAML).")],
    state: Annotated[str | None, typer.Option(help="Controller state directory.")] = None,
    submission_id: Annotated[
        str | None,
        typer.Option(help="Idempotency key: resubmitting with the same id returns the first job (default: random)."),
    ] = None,
) -> None:
    """Submit a job; prints its id. A malformed file is refused with the field and reason.

    Every submit carries a submission id (a fresh random one unless given), so the CLI
    retries a submit whose answer was lost without ever creating a second job."""
    import uuid

    from shapeshift.runtime.jobfile import load_job_file
    from shapeshift.runtime.remote import ControllerClient

    job = load_job_file(job_file)
    key = submission_id or f"cli-{uuid.uuid4()}"
    console.print(ControllerClient.from_state(state).submit(job.to_json(), key, retry=True), highlight=False)
