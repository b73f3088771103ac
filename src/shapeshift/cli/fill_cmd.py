"""``shapeshift fill``: the FGD paper's fill experiment on an openb node and pod list.

Pods only arrive (a seeded shuffle of the trace, then resampled copies until ``--inflate``
x the GPU capacity has arrived); each is placed by ``--placement`` or dropped. Writes
curve.csv (allocation and fragmentation per integer percent of arrived GPU demand),
summary.json and fill.png. The library side is ``shapeshift.gpushare``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shapeshift.cli.common import console, guarded, output_dir
from shapeshift.errors import InputError


@guarded
def command(
    workload: Annotated[Path, typer.Option(help="openb pod list (openb_pod_list_*.csv).")],
    cluster: Annotated[Path, typer.Option(help="openb node list (openb_node_list_*.csv).")],
    out: Annotated[Path, typer.Option(help="Directory for curve.csv, summary.json and fill.png.")],
    placement: Annotated[
        list[str],
        typer.Option(
            metavar="NAME", help="fgd, random, best-fit, dot-product, gpu-packing or gpu-clustering; repeat to compare."
        ),
    ] = ["fgd"],  # noqa: B006 - typer reads the default list, never mutates it
    inflate: Annotated[float, typer.Option(help="Arrived GPU demand to reach, as a multiple of capacity.")] = 1.3,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the arrival order, resampling and ties.")] = 42,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    """Fill a cluster with a GPU-sharing trace under one or more placements (Weng et al., ATC'23)."""
    from shapeshift.gpushare.api import fill, placement_names
    from shapeshift.gpushare.fill import check_inflate

    names = placement_names(placement)
    check_inflate(inflate)
    for flag, path in (("--workload", workload), ("--cluster", cluster)):
        if not path.is_file():
            raise InputError(f"{path}: no such file", field=flag)
    output_dir(out)
    result = fill(workload, cluster, names, inflate=inflate, seed=seed, out=out)
    if not quiet:
        console.print(result.table().to_string())
        console.print(f"wrote {out}/")
