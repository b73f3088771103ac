"""``shapeshift energy``: cluster energy saving (CES) studies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from shapeshift.cli.common import console, guarded, output_dir
from shapeshift.datasets import locate
from shapeshift.errors import InputError

app = typer.Typer(help="Cluster energy saving (CES, Helios): forecast node demand, power idle nodes down.")


@app.callback()
def _group() -> None:
    """Cluster energy saving (CES, Helios)."""


@app.command("replay")
@guarded
def replay_command(
    series: Annotated[
        Path, typer.Argument(help="Node-usage series CSV with columns time, active, total (or philly-node-sequence).")
    ],
    out: Annotated[Path, typer.Option(help="Directory for energy.json, ces_replay.png and ces_trajectory.csv.")],
    test_days: Annotated[
        float, typer.Option(help="Held-out days at the end: the forecast is scored and CES replayed there.")
    ] = 14.0,
    forecaster: Annotated[str, typer.Option(help="lightgbm, primo (PrAM) or seasonal-naive.")] = "lightgbm",
    buffer: Annotated[int, typer.Option(help="Spare powered nodes above demand (sigma).")] = 20,
    hold_bins: Annotated[int, typer.Option(help="Bins without power-down after a wake-up.")] = 10,
    history_bins: Annotated[int, typer.Option(help="Past window of the drop test (bins).")] = 6,
    history_drop: Annotated[float, typer.Option(help="Minimum past drop (nodes).")] = 0.1,
    lookahead_bins: Annotated[int, typer.Option(help="Forecast window of the drop test (bins, <= horizon).")] = 18,
    forecast_drop: Annotated[float, typer.Option(help="Minimum forecast drop (nodes).")] = 0.0,
    min_cut: Annotated[int, typer.Option(help="Smallest power-down (nodes).")] = 1,
    bin_seconds: Annotated[float, typer.Option(help="Control period and forecast bin (s).")] = 600.0,
    horizon_bins: Annotated[int, typer.Option(help="Minimum lag of every forecast feature (bins).")] = 18,
    trees: Annotated[int, typer.Option(help="LightGBM boosting rounds.")] = 200,
    seed: Annotated[int, typer.Option(help="LightGBM seed.")] = 0,
    idle_watts: Annotated[float, typer.Option(help="Power of an idle node (W).")] = 800.0,
    cooling_factor: Annotated[
        float, typer.Option(help="Facility watts per IT watt (3: cooling counts twice the servers, as Helios).")
    ] = 3.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    """Replay CES over a node-usage series and report sleeping nodes, wake-ups, utilization and energy saved."""
    from shapeshift.analysis.characterize import json_ready
    from shapeshift.energy.ces import CESConfig
    from shapeshift.energy.forecast import ForecastConfig
    from shapeshift.energy.replay import plot_replay, read_node_series, run_replay

    try:
        config = CESConfig(
            bin_seconds=bin_seconds,
            buffer=buffer,
            history_bins=history_bins,
            history_drop=history_drop,
            lookahead_bins=lookahead_bins,
            forecast_drop=forecast_drop,
            min_cut=min_cut,
            hold_bins=hold_bins,
            idle_node_watts=idle_watts,
            cooling_factor=cooling_factor,
        )
        fconfig = ForecastConfig(
            horizon_bins=horizon_bins, season_bins=round(86400 / bin_seconds), num_trees=trees, seed=seed
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    data = read_node_series(locate(series))
    output_dir(out)
    result = run_replay(data, config, fconfig, test_days=test_days, forecaster=forecaster)
    out.mkdir(parents=True, exist_ok=True)
    (out / "energy.json").write_text(json.dumps(json_ready(result.summary), indent=2) + "\n", encoding="utf-8")
    plot_replay(result, out / "ces_replay.png")
    trajectory = {
        "time": result.times.strftime("%Y-%m-%d %H:%M:%S"),
        "active": result.demand,
        "total": result.total,
        "powered": result.powered,
        "forecast": result.forecast.round(3),
    }
    import pandas as pd

    pd.DataFrame(trajectory).to_csv(out / "ces_trajectory.csv", index=False)
    if quiet:
        return
    s = result.summary
    table = Table(title=f"CES replay on {s['series']} ({s['window_start']} .. {s['window_end']}, {s['days']:.1f} days)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    f = s["forecast"]
    if f.get("smape_lightgbm_pct") is not None:
        table.add_row("forecast SMAPE, LightGBM", f"{f['smape_lightgbm_pct']:.2f} %")
    if f.get("smape_primo_pct") is not None:
        table.add_row("forecast SMAPE, Primo (PrAM)", f"{f['smape_primo_pct']:.2f} %")
    table.add_row("forecast SMAPE, seasonal naive", f"{f['smape_seasonal_naive_pct']:.2f} %")
    table.add_row(
        "average nodes (total / active / powered)",
        f"{s['avg_total_nodes']:.1f} / {s['avg_active_nodes']:.1f} / {s['avg_powered_nodes']:.1f}",
    )
    table.add_row("average sleeping nodes", f"{s['avg_sleeping_nodes']:.1f}")
    table.add_row("wake-ups per day", f"{s['wakeups_per_day']:.2f} ({s['nodes_woken_per_day']:.1f} nodes/day)")
    table.add_row(
        "node utilization before -> after",
        f"{100 * s['utilization_before']:.1f} % -> {100 * s['utilization_after']:.1f} %",
    )
    table.add_row(
        "bins short of powered nodes", f"{s['shortage_bins']} ({s['shortage_node_bins']} node-bins waited for a boot)"
    )
    table.add_row("energy saved", f"{s['energy_node_hours_saved']:,.0f} node-hours = {s['energy_kwh_saved']:,.0f} kWh")
    console.print(table)
    for note in s["notes"]:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    console.print(
        f"wrote {out / 'energy.json'}, {out / 'ces_replay.png'}, {out / 'ces_trajectory.csv'}", highlight=False
    )
