"""``shapeshift cancel ID``."""

from __future__ import annotations

from typing import Annotated

import typer

from shapeshift.cli.common import console, guarded


@guarded
def command(
    job_id: Annotated[str, typer.Argument(help="Job id (from submit or queue).")],
    state: Annotated[str | None, typer.Option(help="Controller state directory.")] = None,
) -> None:
    """Cancel a queued or running job (running ranks are killed)."""
    from shapeshift.runtime.remote import ControllerClient

    previous = ControllerClient.from_state(state).cancel(job_id)["previous"]
    if previous in ("completed", "failed", "cancelled", "rejected"):
        console.print(f"job {job_id} is already {previous}; nothing to cancel", highlight=False)
    else:
        console.print(f"job {job_id}: cancelled (was {previous})", highlight=False)
