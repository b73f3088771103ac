"""``shapeshift datasets``: the reference data bundled with Shapeshift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from shapeshift.cli.common import console, guarded, output_dir
from shapeshift.cli.options import JsonOption

app = typer.Typer(help="Reference data sets bundled with Shapeshift: list them, export one with its licence.")


@app.callback()
def _group() -> None:
    """Reference data sets bundled with Shapeshift."""


@app.command("list")
@guarded
def list_command(as_json: JsonOption = False) -> None:
    """Every bundled data set: name, kind, rows, licence, source; a name works wherever a path does."""
    from shapeshift import datasets

    rows = [
        {
            "name": d.name,
            "kind": d.kind,
            "rows": datasets.rows(d.name),
            "licence": d.licence,
            "source": d.source,
            "description": d.description,
            "setting": d.setting.source if d.setting else None,
        }
        for d in (datasets.get(n) for n in datasets.names())
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="bundled data sets")
    table.add_column("name", no_wrap=True)
    table.add_column("kind")
    table.add_column("rows", justify="right")
    table.add_column("licence")
    table.add_column("source (GitHub)", overflow="fold")
    for row in rows:
        count = f"{row['rows']:,}" if row["rows"] else "-"
        table.add_row(row["name"], row["kind"], count, row["licence"], row["source"])
    console.print(table)


@app.command("export")
@guarded
def export_command(
    name: Annotated[str, typer.Argument(help="Data set name (see `shapeshift datasets list`).")],
    out: Annotated[Path, typer.Argument(help="Directory to write the files, LICENSE, CITATION.txt and README.txt.")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    """Write a data set's files with its licence and citation into a directory."""
    from shapeshift import datasets

    datasets.get(name)  # an unknown name fails before anything is written
    output_dir(out, "DIR")
    written = datasets.export(name, out)
    if not quiet:
        console.print(f"wrote {len(written)} files of {name} to {out} (licence {datasets.get(name).licence})")
