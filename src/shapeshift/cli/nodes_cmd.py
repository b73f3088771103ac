"""``shapeshift nodes``: GPU slots per node and who holds them (``--json`` for scripts)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from shapeshift.cli.common import console, guarded
from shapeshift.cli.options import JsonOption


@guarded
def command(
    state: Annotated[str | None, typer.Option(help="Controller state directory.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Show every node's GPU slots, how many are used, and by which jobs."""
    from shapeshift.runtime.remote import ControllerClient

    nodes = ControllerClient.from_state(state).nodes()
    if as_json:
        typer.echo(json.dumps(nodes, indent=2))
        return
    table = Table()
    for column in ("node", "gpu type", "gpus", "used", "free", "jobs"):
        table.add_column(column)
    for n in nodes:
        table.add_row(n["name"], n["gpu_type"], str(n["gpus"]), str(n["used"]), str(n["free"]), ",".join(n["jobs"]))
    console.print(table)
