"""``shapeshift analyze``: characterize a job trace (figures, ``report.html``, ``stats.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from shapeshift.cli.common import console, guarded, output_dir
from shapeshift.errors import InputError

app = typer.Typer(help="Characterize workloads: job traces in, figures and statistics out.", no_args_is_help=True)


@app.command("trace")
@guarded
def trace_command(
    path: Annotated[Path, typer.Argument(help="Trace file (CSV/Parquet).")],
    out: Annotated[Path, typer.Option(help="Directory for the PNG figures, report.html and stats.json.")],
    fmt: Annotated[
        str | None, typer.Option("--format", help="Trace format (default: detected from the header).")
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            help="NxG or cluster YAML: replay the trace under FIFO on it when the trace has no start/end times "
            "(gives queueing delays and utilization; otherwise the ideal demand curve is plotted)."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    """Durations, job sizes, diurnal pattern, utilization, per-VC, status and user statistics of a trace."""
    from shapeshift.analysis.characterize import characterize, json_ready, trace_origin
    from shapeshift.analysis.figures import write_figures
    from shapeshift.analysis.html_report import write_report
    from shapeshift.cluster import load_cluster
    from shapeshift.workloads.readers import read_workload

    workload = read_workload(path, fmt)
    if len(workload) == 0:
        raise InputError("the trace has a header but no jobs: nothing to characterize", path=str(path))
    spec = load_cluster(cluster) if cluster else None
    output_dir(out)
    ch = characterize(workload, origin=trace_origin(path, fmt), cluster=spec, cluster_label=cluster or "")
    out.mkdir(parents=True, exist_ok=True)
    figures = write_figures(ch, out)
    report = write_report(ch, figures, out / "report.html")
    (out / "stats.json").write_text(json.dumps(json_ready(ch.stats), indent=2) + "\n", encoding="utf-8")
    if quiet:
        return
    stats = ch.stats
    console.print(f"{stats['jobs']:,} jobs ({stats['gpu_jobs']:,} GPU, {stats['cpu_jobs']:,} CPU) in {workload.name}")
    if "durations" in stats:
        console.print(f"median GPU job duration: {stats['durations']['gpu']['median_s']:,.0f} s")
    if "job_size" in stats:
        size = stats["job_size"]
        console.print(
            f"GPU time: 1-GPU jobs {100 * size['single_gpu_time_share']:.1f} %, "
            f">=8-GPU jobs {100 * size['ge8_gpu_time_share']:.1f} %"
        )
    if "utilization" in stats:
        console.print(f"utilization: {stats['utilization']['method']}", highlight=False)
    for section, reason in sorted(stats["omitted"].items()):
        console.print(f"[yellow]omitted[/] {section}: {reason}", highlight=False)
    console.print(f"wrote {len(figures)} figures, {report} and {out / 'stats.json'}", highlight=False)
