"""``shapeshift reproduce``: the Rubick paper's cluster experiment (Table 4) and sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shapeshift.cli.common import console, guarded, output_dir
from shapeshift.cli.options import QuietOption
from shapeshift.errors import InputError


@guarded
def command(
    data: Annotated[
        Path | None, typer.Option(
            help="A Rubick artifact data directory with traces/ and workloads/ (default: the bundled data sets)."
        )
    ] = None,
    cluster: Annotated[
        Path | None, typer.Option(help="Cluster YAML (default: the bundled rubick-a800).")
    ] = None,
    out: Annotated[
        Path, typer.Option(help="Output directory: results.csv and results.md (sweeps: sweep-KIND.csv and .md).")
    ] = Path("results/rubick"),
    workloads: Annotated[str, typer.Option(help="Comma-separated subset of base, bp, mt.")] = "base,bp,mt",
    sweep: Annotated[
        str, typer.Option(help="none, load (rates 0.5,1,1.5,2) or llm (LLaMA shares 0,0.25,0.5).")
    ] = "none",
    points: Annotated[str | None, typer.Option(help="Comma-separated sweep points (overrides the defaults).")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N jobs of each trace (smoke runs).")] = None,
    quiet: QuietOption = False,
) -> None:
    """Run the paper's cluster experiment (or a sweep) in simulation and write results.csv."""
    from shapeshift.reproduce.experiment import (
        EXPERIMENTS,
        Paths,
        markdown_table,
        run_sweep,
        run_table4,
        write_results,
    )

    paths = Paths.default(data, cluster)
    output_dir(out)

    def progress(message: str) -> None:
        if not quiet:
            console.print(f"running {message}")

    if sweep == "none":
        names = [w.strip() for w in workloads.split(",") if w.strip()]
        bad = [w for w in names if w not in EXPERIMENTS]
        if bad:
            raise InputError(f"unknown workload(s) {', '.join(bad)}; expected {', '.join(EXPERIMENTS)}")
        rows = run_table4(paths, names, limit=limit, progress=progress)
        name = "results.csv"
    elif sweep in ("load", "llm"):
        default = "0.5,1,1.5,2" if sweep == "load" else "0,0.25,0.5"
        try:
            xs = [float(x) for x in (points or default).split(",") if x.strip()]
        except ValueError:
            raise InputError(f"--points must be comma-separated numbers, got {points!r}") from None
        rows = run_sweep(paths, sweep, xs, limit=limit, progress=progress)
        name = f"sweep-{sweep}.csv"
    else:
        raise InputError(f"unknown sweep {sweep!r}; expected none, load or llm")
    out.mkdir(parents=True, exist_ok=True)
    write_results(rows, out / name)
    table = markdown_table(rows)
    (out / name.replace(".csv", ".md")).write_text(table, encoding="utf-8")
    if not quiet:
        console.print(table)
        console.print(f"wrote {out / name}")
