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
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from shapeshift.analysis.aggregate import mean_ci95
from shapeshift.errors import InputError
from shapeshift.experiments.report_figures import (
    LABELS,
    ReportFigure,
    auto_timeline,
    axis_columns,
    choose_runs,
    jct_cdf,
    load_sweep,
    timeseries,
    varying,
)
from shapeshift.experiments.report_inputs import read_any_results
from shapeshift.page_style import REPORT_CSS

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
#: ``auto`` timelines shown beyond the chosen runs.
MAX_EXTRA_TIMELINES = 8


@dataclass(frozen=True)
class ReportOutcome:
    html: Path
    figures: tuple[Path, ...]
    chosen_runs: tuple[str, ...]


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
    """HTML table: one row per policy and setting; with several seeds, the mean and the
    half-width of its 95% confidence interval (Student's t)."""
    keys = ["policy", *[c for c in varying(frame, [*LABELS, *axis_columns(frame)]) if c != "policy"]]
    metrics = [m for m in TABLE_METRICS if m[0] in frame.columns]
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys) + "<th>runs</th>"
    head += "".join(f"<th>{html.escape(label)}</th>" for _, label, _ in metrics)
    rows = []
    for key, part in frame.groupby(keys, dropna=False, sort=False):
        values = key if isinstance(key, tuple) else (key,)
        cells = "".join(f"<td>{html.escape('–' if pd.isna(v) else str(v))}</td>" for v in values)
        cells += f"<td>{len(part)}</td>"
        for column, _, kind in metrics:
            mean, ci = mean_ci95(part[column].tolist())
            text = _fmt(mean, kind) + ("" if ci is None else f" ± {_fmt(ci, kind)}")
            cells += f"<td class='num'>{text}</td>"
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


_CSS = REPORT_CSS + "td.num { text-align: right; }\n"


def build_report(
    exp_dir: str | Path,
    out_html: str | Path,
    *,
    runs: Sequence[str] | None = None,
    x_axis: str | None = None,
) -> ReportOutcome:
    """Write the HTML report and its PNGs (in ``<report stem>_figures/`` beside it). ``exp_dir``
    is an experiment's output, or the ``--out`` directory of ``compare`` or ``simulate``."""
    exp_dir = Path(exp_dir)
    frame = read_any_results(exp_dir)
    if frame.empty:
        raise InputError("the results table has no finished runs", path=str(exp_dir))
    out_html = Path(out_html)
    figure_dir = out_html.parent / f"{out_html.stem}_figures"
    figure_dir.mkdir(parents=True, exist_ok=True)
    chosen = choose_runs(frame, runs)
    x = pick_load_axis(frame, x_axis)

    figures: list[ReportFigure] = [jct_cdf(exp_dir, frame, chosen)]
    if x is not None:
        figures += load_sweep(frame, x)
    figures += [timeseries(exp_dir, frame, r) for r in chosen]
    auto_runs = [str(r) for r in frame.loc[frame["policy_name"] == "auto", "run_id"] if str(r) not in chosen]
    for run_id in [*chosen, *auto_runs[:MAX_EXTRA_TIMELINES]]:
        timeline = auto_timeline(exp_dir, frame, run_id)
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
        "<p>Means over seeds (± the 95% confidence interval's half-width with several seeds). Times in hours.</p>",
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
