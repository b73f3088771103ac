"""CES replay mode: run the control loop over a recorded node-usage series.

Given a minute series of busy and existing nodes (``time, active, total``, as in the
Helios artifact's ``philly_node_sequence.csv``), this answers "what would CES have
saved on this cluster, and at what cost?" without a job trace:

1. the series is binned (default 10 minutes): demand = the *peak* active nodes of the
   bin, total = the peak node count; bins with no samples (gaps) are forward-filled and
   counted;
2. the last ``test_days`` days are held out: the forecaster is trained on the bins before
   them and CES is replayed on them, so the forecasts it acts on are out of sample;
3. each bin, ``CESController.step`` decides the powered count from the demand and the
   forecast of the next ``lookahead_bins`` bins.

A node series has no jobs, so the boot cost is counted in nodes: a bin where demand
exceeds the powered nodes has ``demand - powered`` node-bins that would have waited
for a boot (``shortage_node_bins``). Utilization is the mean over bins of demand/total
(before) and demand/powered (after).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shapeshift.energy.ces import CESConfig, CESController
from shapeshift.energy.forecast import ForecastConfig, NodeForecaster, evaluate, seasonal_naive, smape
from shapeshift.errors import InputError

SERIES_COLUMNS = ("time", "active", "total")
#: Fewer training days than this and the replay uses the seasonal-naive forecast.
MIN_TRAIN_DAYS = 3


@dataclass(frozen=True)
class NodeSeries:
    """A validated node-usage series: strictly increasing times, counts >= 0."""

    name: str
    times: pd.DatetimeIndex
    active: np.ndarray
    total: np.ndarray


def read_node_series(path: str | Path) -> NodeSeries:
    """Read ``time, active, total`` (CSV); any problem is an ``InputError`` naming file, line and column."""
    path = Path(path)
    where = str(path)
    if not path.exists():
        raise InputError("node series file not found", path=where)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise InputError("file is empty", path=where) from None
    except (pd.errors.ParserError, OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"not a readable CSV file: {exc}", path=where) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in SERIES_COLUMNS if c not in frame.columns]
    if missing:
        found = ", ".join(frame.columns) or "none"
        raise InputError(
            f"missing column(s) {', '.join(missing)}; a node series has {', '.join(SERIES_COLUMNS)} (found: {found})",
            path=where,
            line=1,
            field=missing[0],
        )
    if len(frame) < 2:
        raise InputError("a node series needs at least 2 rows", path=where)

    def fail(row: int, column: str, message: str) -> InputError:
        return InputError(message, path=where, line=row + 2, field=column)

    text = frame["time"].astype(str).str.strip()
    stamps = pd.to_datetime(text, errors="coerce", format="ISO8601")
    if stamps.isna().any():
        row = int(np.flatnonzero(stamps.isna().to_numpy())[0])
        raise fail(row, "time", f"cannot read time {text.iloc[row]!r}; expected an ISO timestamp")
    if getattr(stamps.dt, "tz", None) is not None:
        stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    steps = stamps.diff().dt.total_seconds().to_numpy()[1:]
    if (steps <= 0).any():
        row = int(np.flatnonzero(steps <= 0)[0]) + 1
        raise fail(row, "time", f"times must increase strictly; {text.iloc[row]!r} follows {text.iloc[row - 1]!r}")
    counts = {}
    for column in ("active", "total"):
        raw = frame[column].astype(str).str.strip()
        numbers = pd.to_numeric(raw, errors="coerce")
        bad = numbers.isna() | ~np.isfinite(numbers.fillna(0)) | (numbers < 0)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise fail(row, column, f"expected a node count >= 0, got {raw.iloc[row]!r}")
        counts[column] = numbers.to_numpy(dtype=float)
    if (counts["total"] <= 0).all():
        raise InputError("every 'total' is 0: the cluster has no nodes", path=where, field="total")
    return NodeSeries(path.stem, pd.DatetimeIndex(stamps), counts["active"], counts["total"])


@dataclass(frozen=True)
class BinnedSeries:
    times: pd.DatetimeIndex
    demand: np.ndarray
    total: np.ndarray
    #: Bins without samples, filled from the previous bin.
    filled: np.ndarray


def bin_series(series: NodeSeries, bin_seconds: float) -> BinnedSeries:
    """Peak active and total nodes per bin; empty bins forward-filled (and flagged)."""
    frame = pd.DataFrame({"active": series.active, "total": series.total}, index=series.times)
    binned = frame.resample(pd.Timedelta(seconds=bin_seconds)).max()
    filled = binned["active"].isna().to_numpy()
    binned = binned.ffill()
    demand = np.ceil(binned["active"].to_numpy(dtype=float)).astype(np.int64)
    total = np.ceil(binned["total"].to_numpy(dtype=float)).astype(np.int64)
    return BinnedSeries(pd.DatetimeIndex(binned.index), demand, total, filled)


@dataclass
class ReplayResult:
    """Per-bin trajectory of the replay window plus the reported figures."""

    summary: dict[str, Any]
    times: pd.DatetimeIndex
    demand: np.ndarray
    total: np.ndarray
    powered: np.ndarray
    forecast: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)


def replay_ces(demand: np.ndarray, total: np.ndarray, forecast: np.ndarray, config: CESConfig) -> dict[str, np.ndarray]:
    """Run the control loop over aligned per-bin arrays. ``forecast[i]`` is the forecast of
    bin ``i``; the decision at bin ``i`` sees ``forecast[i+1 : i+1+lookahead]``. The first
    bin starts with ``demand + buffer`` nodes powered."""
    n = demand.size
    powered = np.zeros(n, dtype=np.int64)
    woken = np.zeros(n, dtype=np.int64)
    cut = np.zeros(n, dtype=np.int64)
    shortage = np.zeros(n, dtype=np.int64)
    if n == 0:
        return {"powered": powered, "woken": woken, "cut": cut, "shortage": shortage}
    controller = CESController(config, powered=min(int(total[0]), int(demand[0]) + config.buffer))
    look = config.lookahead_bins
    for i in range(n):
        d = controller.step(int(demand[i]), int(total[i]), forecast[i + 1 : i + 1 + look])
        powered[i], woken[i], cut[i], shortage[i] = d.powered, d.woken, d.cut, d.shortage
    return {"powered": powered, "woken": woken, "cut": cut, "shortage": shortage}


def summarize_replay(
    demand: np.ndarray, total: np.ndarray, trajectory: dict[str, np.ndarray], config: CESConfig
) -> dict[str, Any]:
    """The replay figures (see the module docstring for definitions)."""
    powered = trajectory["powered"]
    n = demand.size
    bin_hours = config.bin_seconds / 3600.0
    days = n * config.bin_seconds / 86400.0
    demand_c = np.minimum(demand, total)
    sleeping = (total - powered).astype(float)
    node_hours = float(sleeping.sum()) * bin_hours
    has_nodes = total > 0
    before = demand_c[has_nodes] / total[has_nodes]
    after = np.divide(demand_c, powered, out=np.ones(n), where=powered > 0)[has_nodes]
    return {
        "bins": int(n),
        "days": days,
        "avg_total_nodes": float(total.mean()),
        "avg_active_nodes": float(demand_c.mean()),
        "avg_powered_nodes": float(powered.mean()),
        "avg_sleeping_nodes": float(sleeping.mean()),
        "wakeups": int((trajectory["woken"] > 0).sum()),
        "wakeups_per_day": float((trajectory["woken"] > 0).sum()) / days if days else 0.0,
        "nodes_woken_per_day": float(trajectory["woken"].sum()) / days if days else 0.0,
        "power_downs_per_day": float((trajectory["cut"] > 0).sum()) / days if days else 0.0,
        "utilization_before": float(before.mean()) if before.size else None,
        "utilization_after": float(after.mean()) if after.size else None,
        "shortage_bins": int((trajectory["shortage"] > 0).sum()),
        "shortage_node_bins": int(trajectory["shortage"].sum()),
        "jobs_waited_for_boot": None,
        "jobs_waited_for_boot_note": "a node series has no jobs: see shortage_bins / shortage_node_bins "
        "(bins and node-bins where demand exceeded the powered nodes and would have waited for a boot)",
        "bins_active_above_total": int((demand > total).sum()),
        "energy_node_hours_saved": node_hours,
        "energy_kwh_saved": config.kwh(node_hours),
        "energy_saved_fraction": node_hours / (float(total.sum()) * bin_hours) if total.sum() > 0 else 0.0,
    }


def run_replay(
    series: NodeSeries,
    config: CESConfig | None = None,
    forecast_config: ForecastConfig | None = None,
    *,
    test_days: float = 14.0,
    forecaster: str = "lightgbm",
) -> ReplayResult:
    """Bin, forecast, hold out the last ``test_days`` days and replay CES on them.

    When fewer than ``MIN_TRAIN_DAYS`` days precede the held-out window, or with
    ``forecaster="seasonal-naive"``, the forecast is the seasonal-naive one and (for too
    short a series) the whole series is replayed.
    """
    config = config or CESConfig()
    season = round(86400.0 / config.bin_seconds)
    forecast_config = forecast_config or ForecastConfig(season_bins=season)
    if forecaster not in ("lightgbm", "primo", "seasonal-naive"):
        raise InputError(f"unknown forecaster {forecaster!r}; known: lightgbm, primo, seasonal-naive")
    if config.lookahead_bins > forecast_config.horizon_bins:
        raise InputError(
            f"CES lookahead ({config.lookahead_bins} bins) exceeds the forecast horizon "
            f"({forecast_config.horizon_bins} bins): the loop would act on forecasts that saw the future"
        )
    if test_days <= 0:
        raise InputError("--test-days must be > 0")
    binned = bin_series(series, config.bin_seconds)
    n = binned.demand.size
    values = binned.demand.astype(float)
    test_bins = min(n, math.ceil(test_days * 86400.0 / config.bin_seconds))
    train_days = (n - test_bins) * config.bin_seconds / 86400.0
    notes: list[str] = []
    forecast_info: dict[str, Any] = {"config": forecast_config.as_dict()}
    if forecaster in ("lightgbm", "primo") and train_days >= MIN_TRAIN_DAYS:
        model_class = NodeForecaster
        if forecaster == "primo":
            from shapeshift.energy.primo_forecast import PrimoNodeForecaster

            model_class = PrimoNodeForecaster
        try:
            evaluation = evaluate(binned.times, values, test_bins, forecast_config, model_class)
        except ImportError:
            extra = "ml" if forecaster == "lightgbm" else "explain"
            raise InputError(
                f"the {forecaster} forecaster needs pip install 'shapeshift[{extra}]'; "
                "or pass --forecaster seasonal-naive"
            ) from None
        forecast = evaluation.prediction
        forecast_info.update({"model": forecaster, **evaluation.summary()})
    else:
        if forecaster != "seasonal-naive":
            notes.append(
                f"only {train_days:.1f} days before the held-out window (< {MIN_TRAIN_DAYS}): "
                "seasonal-naive forecast, whole series replayed"
            )
            test_bins = n
        naive = seasonal_naive(values, forecast_config.season_bins)
        # Before a full season of history, fall back to the newest value old enough to be known.
        lag = forecast_config.horizon_bins
        persistence = np.concatenate([np.full(min(lag, n), np.nan), values[: max(n - lag, 0)]])
        forecast = np.where(np.isfinite(naive), naive, persistence)
        start = n - test_bins
        forecast_info.update(
            {
                "model": "seasonal-naive",
                "test_bins": int(test_bins),
                "smape_seasonal_naive_pct": smape(naive[start:], values[start:]),
            }
        )
    start = n - test_bins
    sl = slice(start, n)
    demand, total = binned.demand[sl], binned.total[sl]
    trajectory = replay_ces(demand, total, forecast[sl], config)
    summary: dict[str, Any] = {
        "series": series.name,
        "window_start": binned.times[start].isoformat(),
        "window_end": (binned.times[-1] + pd.Timedelta(seconds=config.bin_seconds)).isoformat(),
        **summarize_replay(demand, total, trajectory, config),
        "gap_bins_filled": int(binned.filled[sl].sum()),
        "forecast": forecast_info,
        "config": config.as_dict(),
        "notes": notes,
    }
    return ReplayResult(
        summary=summary,
        times=binned.times[sl],
        demand=demand,
        total=total,
        powered=trajectory["powered"],
        forecast=forecast[sl],
    )


def plot_replay(result: ReplayResult, path: str | Path) -> Path:
    """Active (requested), powered and total nodes over the replay window (PNG)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    days = (result.times - result.times[0]).total_seconds() / 86400.0
    ax.step(days, result.total, where="post", color="black", linewidth=1, label="total nodes")
    ax.step(days, result.powered, where="post", color="tab:green", linewidth=1.2, label="powered nodes (CES)")
    ax.step(days, result.demand, where="post", color="tab:blue", linewidth=0.8, label="active nodes (peak per bin)")
    ax.plot(days, result.forecast, color="tab:orange", linewidth=0.6, alpha=0.8, label="forecast")
    ax.set_xlabel(f"days since {result.times[0]:%Y-%m-%d %H:%M}")
    ax.set_ylabel("nodes")
    s = result.summary
    ax.set_title(
        f"CES replay on {s['series']}: {s['avg_sleeping_nodes']:.1f} nodes asleep on average, "
        f"{s['wakeups_per_day']:.2f} wake-ups/day",
        fontsize=10,
    )
    ax.set_ylim(bottom=0)
    ax.grid(True, linestyle=":")
    ax.legend(loc="lower left", fontsize=8, ncol=4)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, format="png")
    return path
