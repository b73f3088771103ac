"""The ``shapeshift`` command. Thin: parse, validate, call library functions."""

from __future__ import annotations

import typer
from rich.table import Table

from shapeshift.cli.common import console
from shapeshift.cli.simulate import simulate_command

app = typer.Typer(
    name="shapeshift",
    help="Schedule deep-learning training jobs on shared GPU clusters: simulate and compare policies.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("simulate")(simulate_command)


@app.command("policies")
def policies_command() -> None:
    """List every registered policy with its parameters and a one-line description."""
    from shapeshift.policies.registry import registry

    table = Table(title="Policies")
    table.add_column("name", style="bold")
    table.add_column("parameters")
    table.add_column("description")
    for info in registry().values():
        params = ", ".join(f"{n}: {t} = {d!r}" for n, t, d in info.parameters()) or "-"
        table.add_row(info.name, params, info.description)
    console.print(table)


def _mount_optional() -> None:
    """Sub-command groups living in their own modules."""
    try:
        from shapeshift.cli.perf_cmd import app as perf_app
    except ImportError:
        return
    app.add_typer(perf_app, name="perf")


_mount_optional()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
