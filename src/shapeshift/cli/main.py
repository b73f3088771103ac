"""The ``shapeshift`` command. Thin: parse, validate, call library functions."""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Annotated, Any

import typer
import typer.rich_utils
from rich.table import Table
from typer.core import TyperOption

from shapeshift.cli.common import console, usage_error_line
from shapeshift.cli.options import JsonOption
from shapeshift.cli.simulate import simulate_command


def _flags_without_type(option: TyperOption, ctx: Any) -> str | None:
    """Help shows ``--quiet`` and ``--help`` as flags, not as options taking a ``<bool>``
    (newer typer versions print a type for every option, flags included)."""
    if option.is_flag:
        return None
    return _typer_display_type(option, ctx)


_typer_display_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _flags_without_type  # type: ignore[method-assign]
typer.rich_utils.rich_format_error = usage_error_line  # one line, not a panel

app = typer.Typer(
    name="shapeshift",
    help="Schedule deep-learning training jobs on shared GPU clusters: simulate and compare policies.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("simulate")(simulate_command)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"shapeshift {version('shapeshift')}")
        except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
            typer.echo("shapeshift (not installed)")
        raise typer.Exit()


@app.callback()
def _main(
    show_version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """Schedule deep-learning training jobs on shared GPU clusters: simulate and compare policies."""


def _default(value: Any) -> Any:
    """A parameter default as users read it: required parameters have none."""
    from pydantic_core import PydanticUndefined

    return "(required)" if value is PydanticUndefined else value


@app.command("policies")
def policies_command(as_json: JsonOption = False) -> None:
    """List every registered policy with its parameters and a one-line description."""
    from shapeshift.policies.framework.registry import registry

    if as_json:
        rows = [
            {
                "name": info.name,
                "description": info.description,
                "parameters": [{"name": n, "type": t, "default": _default(d)} for n, t, d in info.parameters()],
            }
            for info in registry().values()
        ]
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    table = Table(title="Policies")
    table.add_column("name", style="bold")
    table.add_column("parameters")
    table.add_column("description")
    for info in registry().values():
        params = ", ".join(f"{n}: {t} = {_default(d)!r}" for n, t, d in info.parameters()) or "-"
        table.add_row(info.name, params, info.description)
    console.print(table)


#: Sub-command groups, each a module exposing ``app`` (a ``typer.Typer``), and single
#: commands, each a module exposing ``command``. A module that is not there yet is skipped;
#: any other import error surfaces.
SUBCOMMAND_GROUPS = {
    "perf": "shapeshift.cli.perf_cmd",
    "datasets": "shapeshift.cli.datasets_cmd",
    "workload": "shapeshift.cli.workload_cmd",
    "analyze": "shapeshift.cli.analyze_cmd",
    "energy": "shapeshift.cli.energy_cmd",
    "experiment": "shapeshift.cli.experiment_cmd",
    "token": "shapeshift.cli.token_cmd",
    "tune": "shapeshift.cli.tune_cmd",
}
SINGLE_COMMANDS = {
    "compare": "shapeshift.cli.compare_cmd",
    "serve": "shapeshift.cli.serve_cmd",
    "submit": "shapeshift.cli.submit_cmd",
    "queue": "shapeshift.cli.queue_cmd",
    "cancel": "shapeshift.cli.cancel_cmd",
    "nodes": "shapeshift.cli.nodes_cmd",
    "logs": "shapeshift.cli.logs_cmd",
    "reproduce": "shapeshift.cli.reproduce_cmd",
    "report": "shapeshift.cli.report_cmd",
    "explain": "shapeshift.cli.explain_cmd",
    "fill": "shapeshift.cli.fill_cmd",
    "whatif": "shapeshift.cli.whatif_cmd",
}


def _import_optional(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise


def _mount_subcommands() -> None:
    for name, module_name in SUBCOMMAND_GROUPS.items():
        module = _import_optional(module_name)
        if module is not None:
            app.add_typer(module.app, name=name)
    for name, module_name in SINGLE_COMMANDS.items():
        module = _import_optional(module_name)
        if module is not None:
            app.command(name)(module.command)


_mount_subcommands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
