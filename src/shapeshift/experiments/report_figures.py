"""The report's figures, drawn with matplotlib's object API (no pyplot global state), so
building a report inside another program changes nothing there.

Each builder returns a ``ReportFigure`` (PNG bytes, title, caption). Per-run figures read
the run's own files through ``ResultsSource.run_dir``; seeds are aggregated as the mean
with a 95% confidence band (Student's t).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from shapeshift.analysis.aggregate import mean_ci95
from shapeshift.errors import InputError
from shapeshift.experiments.timeseries import run_series

LABELS = ("workload", "cluster", "policy")


@dataclass(frozen=True)
class ReportFigure:
    slug: str
    title: str
    caption: str
    png: bytes


def axis_columns(frame: pd.DataFrame) -> list[str]:
    """Sweep-axis columns (``workload.rate``, ``policy.x``, ``round`` ...)."""
    return [c for c in frame.columns if "." in c or c == "round"]


def varying(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    return [c for c in columns if c in frame.columns and frame[c].nunique(dropna=True) > 1]


def _canvas(width: float = 7.0, height: float = 4.2) -> Figure:
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _line_label(row: pd.Series, columns: Sequence[str]) -> str:
    return ", ".join(str(row[c]) if c == "policy" else f"{c}={row[c]}" for c in columns)


def load_sweep(frame: pd.DataFrame, x: str) -> list[ReportFigure]:
    """Average JCT and responsiveness against the load axis: the mean over seeds per point,
    with a 95% confidence band where a point has several seeds."""
    groups = ["policy", *[c for c in varying(frame, [*LABELS, *axis_columns(frame)]) if c not in (x, "policy")]]
    data = frame.dropna(subset=[x])
    figures = []
    seeds = frame["seed"].nunique()
    for metric, name, slug in (
        ("avg_jct", "Average JCT", "load-avg-jct"),
        ("avg_responsiveness", "Average responsiveness (time to first start)", "load-responsiveness"),
    ):
        fig = _canvas()
        ax = fig.add_subplot()
        positives: list[float] = []
        for _, part in data.groupby(groups, dropna=False, sort=False):
            points = []
            for value, at in part.groupby(x, sort=True):
                mean, ci = mean_ci95(at[metric].tolist())
                if mean is not None:
                    points.append((value, mean / 3600.0, (ci or 0.0) / 3600.0))
            if not points:
                continue
            xs, ys, cis = (np.array(v, dtype=float) for v in zip(*points, strict=True))
            line = ax.plot(xs, ys, marker="o", label=_line_label(part.iloc[0], groups))[0]
            if cis.any():
                ax.fill_between(xs, ys - cis, ys + cis, color=line.get_color(), alpha=0.2, linewidth=0)
            positives += [float(y) for y in ys if y > 0]
        log = bool(positives) and max(positives) / min(positives) > 50
        if log:  # symlog: zero (an idle cluster's responsiveness) stays on the plot
            ax.set_yscale("symlog", linthresh=max(min(positives), 1e-3))
        ax.set_title(f"{name} against {x}")
        ax.set_xlabel(x + (" (jobs/hour)" if x.endswith(".rate") else ""))
        ax.set_ylabel(f"{name.split(' (')[0]} (hours{', log scale' if log else ''})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        band = " Shaded: 95% confidence interval over seeds." if seeds > 1 else ""
        figures.append(ReportFigure(slug, f"{name} vs load", f"Mean over {seeds} seed(s) per point.{band}", _png(fig)))
    return figures


def choose_runs(frame: pd.DataFrame, requested: Sequence[str] | None) -> list[str]:
    """Run ids for the per-run figures: the requested ones (id prefixes), else one per policy."""
    ids = frame["run_id"].astype(str).tolist()
    if requested:
        chosen = []
        for prefix in requested:
            matches = [i for i in ids if i.startswith(prefix)]
            if len(matches) != 1:
                raise InputError(
                    f"run {prefix!r} matches {len(matches)} runs of this experiment; give a longer id prefix",
                    field="--run",
                )
            chosen.append(matches[0])
        return chosen
    columns = [c for c in varying(frame, [*LABELS, *axis_columns(frame)]) if c != "policy"]
    chosen = []
    for _, part in frame.groupby("policy", sort=False):
        for column in columns:
            values = part[column].dropna()
            if not values.empty:
                part = part[part[column] == values.iloc[-1]]
        chosen.append(str(part.sort_values("seed", kind="stable").iloc[0]["run_id"]))
    return chosen


def run_dir(out: Path, frame: pd.DataFrame, run_id: str) -> Path:
    """A run's directory: ``runs/<id>`` in an experiment, the recorded folder otherwise."""
    if "run_dir" in frame.columns:
        return out / str(frame.loc[frame["run_id"] == run_id, "run_dir"].iloc[0])
    return out / "runs" / run_id


def _jobs(out: Path, frame: pd.DataFrame, run_id: str) -> pd.DataFrame:
    return pd.read_csv(run_dir(out, frame, run_id) / "jobs.csv")


def _describe(frame: pd.DataFrame, run_id: str) -> str:
    row = frame[frame["run_id"] == run_id].iloc[0]
    parts = [str(row["policy"])]
    for column in [c for c in varying(frame, [*LABELS, *axis_columns(frame), "seed"]) if c != "policy"]:
        if not pd.isna(row[column]):
            parts.append(f"{column}={row[column]}")
    return ", ".join(parts)


def jct_cdf(out: Path, frame: pd.DataFrame, chosen: Sequence[str]) -> ReportFigure:
    fig = _canvas()
    ax = fig.add_subplot()
    for run_id in chosen:
        jct = np.sort(_jobs(out, frame, run_id)["jct"].dropna().to_numpy(dtype=float)) / 3600.0
        if jct.size:
            ax.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=_describe(frame, run_id))
    ax.set_xscale("log")
    ax.set_title("JCT distribution per policy")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of completed jobs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ReportFigure(
        "jct-cdf", "JCT CDF per policy", "Completed jobs of the chosen runs (all jobs of the run).", _png(fig)
    )


def timeseries(out: Path, frame: pd.DataFrame, run_id: str) -> ReportFigure:
    gpus = int(frame.loc[frame["run_id"] == run_id, "cluster_gpus"].iloc[0])
    series = run_series(run_dir(out, frame, run_id), gpus)
    fig = _canvas(7.0, 5.0)
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.step(series.queue.times / 3600.0, series.queue.values, where="post", color="tab:orange")
    top.set_ylabel("queued jobs")
    top.set_title(f"Queue length and GPU utilization over time\n{_describe(frame, run_id)}", fontsize=10)
    top.grid(alpha=0.3)
    bottom.step(series.utilization.times / 3600.0, series.utilization.values * 100.0, where="post")
    bottom.set_ylabel("GPU utilization (%)")
    bottom.set_xlabel("simulated time (hours)")
    bottom.set_ylim(0, 105)
    bottom.grid(alpha=0.3)
    note = (
        "GPU holding from recorded allocation intervals (exact, preemptions included)."
        if series.source == "recorded"
        else "Approximation: each job holds its GPUs from first start to end (preemption gaps ignored)."
    )
    return ReportFigure(f"timeseries-{run_id}", f"Run {run_id}", note, _png(fig))


def auto_timeline(out: Path, frame: pd.DataFrame, run_id: str) -> ReportFigure | None:
    path = run_dir(out, frame, run_id) / "auto_timeline.csv"
    if not path.is_file():
        return None
    timeline = pd.read_csv(path)
    if timeline.empty:
        return None
    combos = (timeline["ordering"] + "+" + timeline["admission"]).tolist()
    names = sorted(set(combos))
    fig = _canvas(7.0, 2.2 + 0.3 * len(names))
    ax = fig.add_subplot()
    times = timeline["time"].to_numpy(dtype=float) / 3600.0
    ax.step(times, [names.index(c) for c in combos], where="post", marker=".")
    ax.set_yticks(range(len(names)), names)
    ax.set_title(f"auto: chosen ordering+admission over time\n{_describe(frame, run_id)}", fontsize=10)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("combination")
    ax.grid(alpha=0.3)
    switches = int(timeline["switched"].sum())
    caption = f"{len(timeline)} evaluations, {switches} switches."
    return ReportFigure(f"auto-timeline-{run_id}", f"auto timeline, run {run_id}", caption, _png(fig))


