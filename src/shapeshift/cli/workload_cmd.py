"""``shapeshift workload``: describe a trace, generate synthetic load, transform a trace."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from shapeshift.cli.common import console, err_console, guarded
from shapeshift.errors import InputError
from shapeshift.workloads.workload import MAX_JOBS

if TYPE_CHECKING:  # pandas and the readers load when a command runs, not for --help
    from shapeshift.workloads.workload import Workload

app = typer.Typer(
    help="Workload traces: describe them, generate synthetic load, transform (window, VC, scale, down-sample).",
    no_args_is_help=True,
)

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([smhd]?)\s*$")
#: The trace formats the readers know (``shapeshift.workloads.readers.READERS``; a test
#: keeps the two equal), spelled out so --help needs no reader.
FORMATS = "generic, philly, helios, rubick, pollux, synergy, sacct, kubectl"


def parse_seconds(text: str, option: str) -> float:
    """``90``, ``90s``, ``30m``, ``2h``, ``1.5d`` -> seconds."""
    match = _DURATION.match(text)
    if not match:
        raise InputError(f"cannot read time {text!r}; expected a number with optional unit s, m, h or d", field=option)
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_window(text: str) -> tuple[float | None, float | None]:
    """``START:END`` (either side may be empty) -> seconds."""
    if text.count(":") != 1:
        raise InputError(f"expected START:END (e.g. 2h:14h or 7200:50400), got {text!r}", field="--window")
    start, end = (p.strip() for p in text.split(":"))
    return (
        parse_seconds(start, "--window") if start else None,
        parse_seconds(end, "--window") if end else None,
    )


def parse_downsample(text: str) -> tuple[int, int, float | None]:
    """``TARGET_GPUS:SOURCE_GPUS[:HOURS]``."""
    parts = [p.strip() for p in text.split(":")]
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        target, source = int(parts[0]), int(parts[1])
        hours = float(parts[2]) if len(parts) == 3 else None
    except ValueError:
        raise InputError(
            f"expected TARGET_GPUS:SOURCE_GPUS[:HOURS] (e.g. 64:2490:12), got {text!r}", field="--downsample"
        ) from None
    return target, source, hours


def parse_feasible(items: list[str]) -> dict[str, tuple[int, ...]]:
    """``MODEL=1,2,4,8`` (repeatable) -> mapping."""
    result: dict[str, tuple[int, ...]] = {}
    for item in items:
        model, sep, counts = item.partition("=")
        try:
            if not sep or not model.strip():
                raise ValueError
            values = tuple(int(c) for c in counts.split(",") if c.strip())
            if not values or any(v < 1 for v in values):
                raise ValueError
            result[model.strip()] = values
        except ValueError:
            raise InputError(
                f"expected MODEL=1,2,4,8 with GPU counts >= 1, got {item!r}", field="--feasible"
            ) from None
    return result


def _write(workload: Workload, out: Path) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        workload.write(out)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot write the workload: {exc}", path=str(out)) from None


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 3600:
        return f"{seconds:,.0f} s ({seconds / 3600:.2f} h)"
    return f"{seconds:,.1f} s"


def _group_table(title: str, rows: list[dict[str, Any]], total_jobs: int, top: int) -> Table:
    table = Table(title=title)
    table.add_column("name")
    table.add_column("jobs", justify="right")
    table.add_column("% jobs", justify="right")
    table.add_column("GPU-hours", justify="right")
    for row in rows[:top]:
        share = 100.0 * row["jobs"] / max(total_jobs, 1)
        table.add_row(row["name"] or "(none)", f"{row['jobs']:,}", f"{share:.1f}", f"{row['gpu_hours']:,.1f}")
    if len(rows) > top:
        rest = rows[top:]
        table.add_row(
            f"... {len(rest)} more",
            f"{sum(r['jobs'] for r in rest):,}",
            f"{100.0 * sum(r['jobs'] for r in rest) / max(total_jobs, 1):.1f}",
            f"{sum(r['gpu_hours'] for r in rest):,.1f}",
        )
    return table


def render(stats: dict[str, Any], top: int = 15) -> list[Table]:
    """Rich tables for the statistics of ``describe``."""
    overview = Table(title=f"Workload {stats['workload']}")
    overview.add_column("statistic")
    overview.add_column("value", justify="right")
    span = stats["time_span"]
    rate = stats["arrival_rate_per_hour"]
    overview.add_row("jobs", f"{stats['jobs']:,}")
    overview.add_row("time span", _hours(span["span_s"]))
    overview.add_row("arrival rate", "-" if rate is None else f"{rate:,.2f} jobs/h")
    overview.add_row("total GPU-hours", f"{stats['total_gpu_hours']:,.1f}")
    for key, label in (
        ("guaranteed_jobs", "guaranteed jobs"),
        ("cpu_only_jobs", "CPU-only jobs (not simulated)"),
        ("jobs_without_duration", "jobs without duration"),
    ):
        if stats[key]:
            overview.add_row(label, f"{stats[key]:,}")
    tables = [overview]

    sizes = Table(title="GPU demand and GPU-hours by job size")
    sizes.add_column("GPUs")
    sizes.add_column("jobs", justify="right")
    sizes.add_column("% jobs", justify="right")
    sizes.add_column("GPU-hours", justify="right")
    sizes.add_column("% GPU-hours", justify="right")
    for row in stats["gpu_demand"]:
        sizes.add_row(
            row["bucket"],
            f"{row['jobs']:,}",
            f"{100 * row['job_share']:.1f}",
            f"{row['gpu_hours']:,.1f}",
            f"{100 * row['gpu_hour_share']:.1f}",
        )
    tables.append(sizes)

    if stats["duration_s"]:
        durations = Table(title="Job duration")
        durations.add_column("percentile")
        durations.add_column("duration", justify="right")
        for key, value in stats["duration_s"].items():
            durations.add_row(key, _hours(value))
        tables.append(durations)

    for key, title in (("per_vc", "Jobs per VC"), ("per_tenant", "Jobs per tenant"), ("models", "Jobs per model")):
        if stats[key]:
            tables.append(_group_table(title, stats[key], stats["jobs"], top))
    if stats["states"]:
        tables.append(_group_table("Jobs per final state", stats["states"], stats["jobs"], top))
    return tables


FormatOption = Annotated[
    str | None, typer.Option("--format", help=f"Trace format: {FORMATS} (default: detected from the header).")
]


@app.command("describe")
@guarded
def describe_command(
    path: Annotated[Path, typer.Argument(help="Trace file (CSV or Parquet).")],
    fmt: FormatOption = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the statistics as JSON here.")] = None,
    top: Annotated[int, typer.Option(help="Rows shown per VC/tenant/model table.")] = 15,
) -> None:
    """Statistics of a trace: jobs, span, arrival rate, sizes, durations, GPU-hours, VCs, tenants."""
    from shapeshift.workloads.describe import describe
    from shapeshift.workloads.readers import read_workload

    stats = describe(read_workload(path, fmt))
    for table in render(stats, top):
        console.print(table)
    if json_out is not None:
        try:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(stats, indent=2) + "\n")
        except OSError as exc:
            raise InputError(f"cannot write JSON: {exc}", path=str(json_out)) from None
        console.print(f"wrote {json_out}", highlight=False)


#: Largest generated trace (see ``shapeshift.workloads.workload.MAX_JOBS``).
MAX_GENERATED_JOBS = MAX_JOBS


@app.command("generate")
@guarded
def generate_command(
    out: Annotated[Path, typer.Option(help="Output file (.csv or .parquet).")],
    kind: Annotated[str, typer.Option(help="poisson or bursty.")] = "poisson",
    jobs: Annotated[int, typer.Option(min=1, max=MAX_GENERATED_JOBS, help="Number of jobs.")] = 1000,
    rate: Annotated[float, typer.Option(help="(Base) arrival rate, jobs per hour.")] = 10.0,
    seed: Annotated[int, typer.Option(min=0, help="Seed for every random choice.")] = 0,
    period: Annotated[float, typer.Option(help="bursty: hours from one burst start to the next.")] = 24.0,
    burst_length: Annotated[float, typer.Option(help="bursty: hours a burst lasts.")] = 2.0,
    burst_factor: Annotated[float, typer.Option(help="bursty: arrival rate during a burst, x the base rate.")] = 4.0,
    short_quantile: Annotated[
        float, typer.Option(help="bursty: burst jobs draw durations below this quantile of their size.")
    ] = 0.5,
    models: Annotated[str, typer.Option(help="Comma-separated models to assign (smallest first).")] = "",
    model_assignment: Annotated[str, typer.Option(help="uniform or size-aware.")] = "uniform",
    max_gpus: Annotated[int | None, typer.Option(help="Only job sizes up to this many GPUs.")] = None,
) -> None:
    """Generate a seeded synthetic workload with Philly-fitted job sizes and durations."""
    import math

    from shapeshift.workloads import generators
    from shapeshift.workloads.catalog import known_models, lookup
    from shapeshift.workloads.describe import describe

    for value, flag in ((rate, "--rate"), (period, "--period"), (burst_length, "--burst-length")):
        if not (math.isfinite(value) and value > 0):
            raise InputError(f"{flag} must be a finite number > 0, got {value}", field=flag)
    if not (math.isfinite(burst_factor) and burst_factor >= 1):
        raise InputError(f"--burst-factor must be a finite number >= 1, got {burst_factor}", field="--burst-factor")
    names = tuple(m.strip() for m in models.split(",") if m.strip())
    unknown = [m for m in names if lookup(m) is None]
    if unknown:
        raise InputError(
            f"unknown model(s) {', '.join(unknown)}; the catalog has {', '.join(known_models())}", field="--models"
        )
    common: dict[str, Any] = {
        "seed": seed,
        "models": names,
        "assignment": model_assignment,
        "max_gpus": max_gpus,
        "name": out.stem,
    }
    if kind == "poisson":
        workload = generators.poisson(jobs, rate, **common)
    elif kind == "bursty":
        bursts = generators.Bursts(period, burst_length, burst_factor, short_quantile)
        workload = generators.bursty(jobs, rate, bursts, **common)
    else:
        raise InputError(f"unknown kind {kind!r}; expected poisson or bursty", field="--kind")
    _write(workload, out)
    stats = describe(workload)
    console.print(
        f"wrote {out}: {len(workload):,} jobs over {stats['time_span']['span_h']:.1f} h, "
        f"{stats['total_gpu_hours']:,.0f} GPU-hours",
        highlight=False,
    )


@app.command("transform")
@guarded
def transform_command(
    path: Annotated[Path, typer.Argument(help="Trace file (CSV or Parquet).")],
    out: Annotated[Path, typer.Option(help="Output file (.csv or .parquet).")],
    fmt: FormatOption = None,
    vc: Annotated[list[str] | None, typer.Option("--vc", help="Keep these virtual clusters (repeatable).")] = None,
    window: Annotated[
        str | None,
        typer.Option(help="START:END submit-time window, seconds or with unit (2h:14h); times restart at 0."),
    ] = None,
    downsample: Annotated[
        str | None,
        typer.Option(help="TARGET_GPUS:SOURCE_GPUS[:HOURS]: busiest HOURS, then keep jobs w.p. target/source."),
    ] = None,
    scale: Annotated[float | None, typer.Option(help="Load factor: 2 = arrivals twice as fast.")] = None,
    feasible: Annotated[
        list[str] | None,
        typer.Option("--feasible", help="MODEL=1,2,4,8: move other GPU counts to the nearest (repeatable)."),
    ] = None,
    cpu_jobs: Annotated[
        str, typer.Option(help="CPU-only jobs: keep (flagged, not simulated), drop, or include (simulated).")
    ] = "keep",
    seed: Annotated[int, typer.Option(help="Seed for down-sampling.")] = 0,
) -> None:
    """Filter, cut, down-sample, rescale a trace; write it in the generic format.

    Applied in this order: VC filter, window, down-sampling, load scaling, feasible GPU
    counts, CPU-job handling."""
    from shapeshift.workloads import transforms
    from shapeshift.workloads.readers import read_workload
    from shapeshift.workloads.workload import Workload

    workload = read_workload(path, fmt)
    before = len(workload)
    if vc:
        workload = transforms.filter_vc(workload, vc)
    if window:
        workload = transforms.time_window(workload, *parse_window(window))
    if downsample:
        target, source, hours = parse_downsample(downsample)
        workload = transforms.downsample(workload, target, source, hours, seed=seed)
    if scale is not None:
        workload = transforms.scale_load(workload, scale)
    if feasible:
        workload = transforms.replace_infeasible_gpus(workload, parse_feasible(feasible))
    workload = transforms.cpu_jobs(workload, cpu_jobs)
    workload = Workload(out.stem, workload.frame)
    _write(workload, out)
    console.print(f"wrote {out}: {len(workload):,} of {before:,} jobs", highlight=False)
    if before and not len(workload):
        err_console.print(
            f"warning: no job of {path} is left after the transformations"
            + (f" (the window {window} is in seconds from the trace's first submission)" if window else ""),
            highlight=False,
            markup=False,
        )
