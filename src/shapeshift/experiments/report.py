"""``shapeshift report``: one self-contained HTML page (figures embedded as base64 PNG)
plus the same PNGs in a folder beside it, for papers.

Contents: metric-by-policy tables (means over seeds), the JCT CDF per policy,
load-sweep lines (average JCT and responsiveness against the load axis), queue length
and GPU utilization over time for chosen runs, the ``auto`` policy's choices over time
when there are any, and the experiment file itself.

"Chosen runs" (CDF and time series) are, unless named with ``runs``, one per policy: the
run at the last value of every varying axis (the heaviest load of a load sweep) with the
first seed.

Figures are drawn with matplotlib's object API (no pyplot global state), so building a
report inside another program changes nothing there.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from shapeshift.errors import InputError
from shapeshift.experiments.results import read_results
from shapeshift.experiments.timeseries import run_series

#: Metrics shown in tables: (column, header, kind). kind: h = seconds shown in hours, % = share, n = number.
TABLE_METRICS: tuple[tuple[str, str, str], ...] = (
    ("avg_jct", "avg JCT (h)", "h"),
    ("p50_jct", "median JCT (h)", "h"),
    ("p99_jct", "P99 JCT (h)", "h"),
    ("avg_queue", "avg queueing (h)", "h"),
    ("avg_responsiveness", "avg responsiveness (h)", "h"),
    ("makespan", "makespan (h)", "h"),
    ("gpu_utilization", "GPU utilization (%)", "%"),
    ("jobs_completed", "completed jobs", "n"),
    ("preemptions", "preemptions", "n"),
)
LABELS = ("workload", "cluster", "policy")
#: ``auto`` timelines shown beyond the chosen runs.
MAX_EXTRA_TIMELINES = 8


@dataclass(frozen=True)
class ReportOutcome:
    html: Path
    figures: tuple[Path, ...]
    chosen_runs: tuple[str, ...]


@dataclass(frozen=True)
class _Figure:
    slug: str
    title: str
    caption: str
    png: bytes


def axis_columns(frame: pd.DataFrame) -> list[str]:
    """Sweep-axis columns (``workload.rate``, ``policy.x``, ``round`` ...)."""
    return [c for c in frame.columns if "." in c or c == "round"]


def varying(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    return [c for c in columns if c in frame.columns and frame[c].nunique(dropna=True) > 1]


def pick_load_axis(frame: pd.DataFrame, requested: str | None) -> str | None:
    """The x axis of load-sweep plots: ``requested``, else an axis named like a load or rate."""
    if requested is not None:
        if requested not in frame.columns:
            known = ", ".join(axis_columns(frame)) or "none"
            raise InputError(f"no column {requested!r} in the results; sweep axes: {known}", field="--x")
        return requested
    numeric = [c for c in varying(frame, axis_columns(frame)) if pd.api.types.is_numeric_dtype(frame[c])]
    for column in numeric:
        if any(word in column for word in ("rate", "load", "scale")):
            return column
    return numeric[0] if numeric else None


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


def _load_sweep(frame: pd.DataFrame, x: str) -> list[_Figure]:
    groups = ["policy", *[c for c in varying(frame, [*LABELS, *axis_columns(frame)]) if c not in (x, "policy")]]
    data = frame.dropna(subset=[x])
    means = data.groupby([*groups, x], dropna=False, sort=False)[["avg_jct", "avg_responsiveness"]].mean()
    means = means.reset_index()
    figures = []
    for metric, name, slug in (
        ("avg_jct", "Average JCT", "load-avg-jct"),
        ("avg_responsiveness", "Average responsiveness (time to first start)", "load-responsiveness"),
    ):
        fig = _canvas()
        ax = fig.add_subplot()
        for _, part in means.groupby(groups, dropna=False, sort=False):
            part = part.sort_values(x)
            ax.plot(part[x], part[metric] / 3600.0, marker="o", label=_line_label(part.iloc[0], groups))
        values = means[metric].dropna() / 3600.0
        spread = values[values > 0]
        log = not spread.empty and spread.max() / spread.min() > 50
        if log:  # symlog: zero (an idle cluster's responsiveness) stays on the plot
            ax.set_yscale("symlog", linthresh=max(float(spread.min()), 1e-3))
        ax.set_title(f"{name} against {x}")
        ax.set_xlabel(x + (" (jobs/hour)" if x.endswith(".rate") else ""))
        ax.set_ylabel(f"{name.split(' (')[0]} (hours{', log scale' if log else ''})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        seeds = frame["seed"].nunique()
        figures.append(_Figure(slug, f"{name} vs load", f"Mean over {seeds} seed(s) per point.", _png(fig)))
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
                    field="--runs",
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


def _jobs(out: Path, run_id: str) -> pd.DataFrame:
    return pd.read_csv(out / "runs" / run_id / "jobs.csv")


def _describe(frame: pd.DataFrame, run_id: str) -> str:
    row = frame[frame["run_id"] == run_id].iloc[0]
    parts = [str(row["policy"])]
    for column in [c for c in varying(frame, [*LABELS, *axis_columns(frame), "seed"]) if c != "policy"]:
        if not pd.isna(row[column]):
            parts.append(f"{column}={row[column]}")
    return ", ".join(parts)


def _jct_cdf(out: Path, frame: pd.DataFrame, chosen: Sequence[str]) -> _Figure:
    fig = _canvas()
    ax = fig.add_subplot()
    for run_id in chosen:
        jct = np.sort(_jobs(out, run_id)["jct"].dropna().to_numpy(dtype=float)) / 3600.0
        if jct.size:
            ax.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=_describe(frame, run_id))
    ax.set_xscale("log")
    ax.set_title("JCT distribution per policy")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of completed jobs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _Figure(
        "jct-cdf", "JCT CDF per policy", "Completed jobs of the chosen runs (all jobs of the run).", _png(fig)
    )


def _timeseries(out: Path, frame: pd.DataFrame, run_id: str) -> _Figure:
    gpus = int(frame.loc[frame["run_id"] == run_id, "cluster_gpus"].iloc[0])
    series = run_series(out / "runs" / run_id, gpus)
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
    return _Figure(f"timeseries-{run_id}", f"Run {run_id}", note, _png(fig))


def _auto_timeline(out: Path, frame: pd.DataFrame, run_id: str) -> _Figure | None:
    path = out / "runs" / run_id / "auto_timeline.csv"
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
    return _Figure(f"auto-timeline-{run_id}", f"auto timeline, run {run_id}", caption, _png(fig))


def _fmt(value: object, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    number = float(value)  # type: ignore[arg-type]
    if kind == "h":
        return f"{number / 3600.0:,.2f}"
    if kind == "%":
        return f"{number * 100.0:.1f}"
    return f"{number:,.0f}" if number == int(number) else f"{number:,.2f}"


def metric_table(frame: pd.DataFrame) -> str:
    """HTML table: one row per policy and setting (means over seeds)."""
    keys = ["policy", *[c for c in varying(frame, [*LABELS, *axis_columns(frame)]) if c != "policy"]]
    metrics = [m for m in TABLE_METRICS if m[0] in frame.columns]
    means = frame.groupby(keys, dropna=False, sort=False)[[m[0] for m in metrics]].mean().reset_index()
    counts = frame.groupby(keys, dropna=False, sort=False).size().reset_index(name="runs")["runs"]
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys) + "<th>runs</th>"
    head += "".join(f"<th>{html.escape(label)}</th>" for _, label, _ in metrics)
    rows = []
    for i, row in means.iterrows():
        cells = "".join(f"<td>{html.escape('–' if pd.isna(row[k]) else str(row[k]))}</td>" for k in keys)
        cells += f"<td>{counts.iloc[i]}</td>"  # type: ignore[call-overload]
        cells += "".join(f"<td class='num'>{_fmt(row[m], kind)}</td>" for m, _, kind in metrics)
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 7px}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1.5em 0}figcaption{font-size:13px;color:#555}img{max-width:100%}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px}
"""


def build_report(
    exp_dir: str | Path,
    out_html: str | Path,
    *,
    runs: Sequence[str] | None = None,
    x_axis: str | None = None,
) -> ReportOutcome:
    """Write the HTML report and its PNGs (in ``<report stem>_figures/`` beside it)."""
    exp_dir = Path(exp_dir)
    if not (exp_dir / "results.parquet").is_file() and not (exp_dir / "results.csv").is_file():
        raise InputError(
            "no results.parquet or results.csv here; run `shapeshift experiment run FILE --out DIR` first",
            path=str(exp_dir),
        )
    frame = read_results(exp_dir)
    if frame.empty:
        raise InputError("the results table has no finished runs", path=str(exp_dir))
    out_html = Path(out_html)
    figure_dir = out_html.parent / f"{out_html.stem}_figures"
    figure_dir.mkdir(parents=True, exist_ok=True)
    chosen = choose_runs(frame, runs)
    x = pick_load_axis(frame, x_axis)

    figures: list[_Figure] = [_jct_cdf(exp_dir, frame, chosen)]
    if x is not None:
        figures += _load_sweep(frame, x)
    figures += [_timeseries(exp_dir, frame, r) for r in chosen]
    auto_runs = [str(r) for r in frame.loc[frame["policy_name"] == "auto", "run_id"] if str(r) not in chosen]
    for run_id in [*chosen, *auto_runs[:MAX_EXTRA_TIMELINES]]:
        timeline = _auto_timeline(exp_dir, frame, run_id)
        if timeline is not None:
            figures.append(timeline)

    paths = []
    for fig in figures:
        path = figure_dir / f"{fig.slug}.png"
        path.write_bytes(fig.png)
        paths.append(path)

    experiment_text = (exp_dir / "experiment.yaml").read_text() if (exp_dir / "experiment.yaml").is_file() else ""
    sections = [
        "<h2>Metrics by policy</h2>",
        "<p>Means over seeds. Times in hours.</p>",
        metric_table(frame),
        "<h2>Figures</h2>",
    ]
    if x is None:
        sections.append("<p>No numeric sweep axis: no load-sweep plots.</p>")
    for fig in figures:
        data = base64.b64encode(fig.png).decode()
        sections.append(
            f"<figure><img alt='{html.escape(fig.title)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(fig.title)}. {html.escape(fig.caption)}</figcaption></figure>"
        )
    sections += ["<h2>Experiment file</h2>", f"<pre>{html.escape(experiment_text)}</pre>"]
    title = f"Shapeshift experiment report: {exp_dir.name}"
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p>{len(frame)} runs. Per-run figures: {', '.join(chosen)}.</p>{''.join(sections)}</body></html>\n"
    )
    out_html.parent.mkdir(parents=True, exist_ok=True)
    out_html.write_text(page)
    return ReportOutcome(out_html, tuple(paths), tuple(chosen))
