"""Curves, summaries and the plot of fill runs.

The curve bins pod events by arrived GPU demand as the reference's analysis does
(experiments/analysis/merge_alloc_discrete.py and merge_frag_ratio_discrete.py of
hkust-adsl/kubernetes-scheduler-simulator): each event's arrived percent
``arrived_milli / total_gpus / 10`` is rounded to an integer (Python ``round``, half to
even) and its allocated percent to two decimals; the value at integer percent a is the mean
over the events whose arrived percent is a, or, where there are none, over those within
a-1..a+1; a percent with neither has no row. Allocation is rounded to two decimals after the
mean, as theirs. The fragmentation ratio of an event is ``100 x fragmented / idle`` milli
(``ClusterGpuFragReport``, pkg/simulator/analysis.go), printed to two decimals in their log
and averaged unrounded.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from shapeshift.gpushare.fill import Events, FillRun

CURVE_COLUMNS = ("arrived_pct", "allocated_pct", "fragmented_pct", "unallocated_gpus", "fragmented_gpus")


def curve(events: Events, total_gpus: int, last_pct: int) -> list[dict[str, float]]:
    """One row per integer arrived percent 0..``last_pct`` that has events (or neighbours)."""
    arrived = np.array([round(x, 0) for x in (events.arrived_milli / total_gpus / 10).tolist()])
    allocated = np.array([round(x, 2) for x in (events.allocated_milli / total_gpus / 10).tolist()])
    idle = events.idle_milli.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(idle > 0, 100.0 * events.fragmented_milli / idle, 0.0)
    ratio = np.array([round(x, 2) for x in ratio.tolist()])
    rows = []
    for pct in range(0, last_pct + 1):
        sel = arrived == pct
        if not sel.any():
            sel = (arrived >= pct - 1) & (arrived <= pct + 1)
            if not sel.any():
                continue
        rows.append(
            {
                "arrived_pct": pct,
                "allocated_pct": round(float(allocated[sel].mean()), 2),
                "fragmented_pct": round(float(ratio[sel].mean()), 2),
                "unallocated_gpus": round(float(idle[sel].mean()) / 1000, 3),
                "fragmented_gpus": round(float(events.fragmented_milli[sel].mean()) / 1000, 3),
            }
        )
    return rows


def last_percent(inflate: float) -> int:
    return round(inflate * 100)


def run_curve(run: FillRun) -> list[dict[str, float]]:
    return curve(run.events, run.total_gpus, last_percent(run.inflate))


def _at(rows: list[dict[str, float]], pct: int) -> dict[str, float] | None:
    return next((r for r in rows if r["arrived_pct"] == pct), None)


def summary(run: FillRun, rows: list[dict[str, float]]) -> dict:
    ev = run.events
    return {
        "placement": run.placement,
        "seed": run.seed,
        "inflate": run.inflate,
        "total_gpus": run.total_gpus,
        "pods_arrived": len(ev),
        "pods_placed": int(ev.placed.sum()),
        "pods_dropped": int((~ev.placed).sum()),
        "typical_shapes": run.typical_shapes,
        "at_100": _at(rows, 100),
        "at_130": _at(rows, 130),
        "final": rows[-1] if rows else None,
        "seconds": round(run.seconds, 3),
        "events_per_second": round(run.events_per_second, 1) if math.isfinite(run.events_per_second) else None,
    }


def write_curve(path: Path, rows: list[dict[str, float]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CURVE_COLUMNS)
        w.writeheader()
        w.writerows(rows)


def plot(path: Path, curves: dict[str, list[dict[str, float]]], title: str) -> None:
    """The paper's Fig. 7/9 layout: allocation and fragmentation ratio against arrived demand."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    FigureCanvasAgg(fig)
    ax_alloc, ax_frag = fig.subplots(1, 2)
    for name, rows in curves.items():
        x = [r["arrived_pct"] for r in rows]
        ax_alloc.plot(x, [r["allocated_pct"] for r in rows], label=name)
        ax_frag.plot(x, [r["fragmented_pct"] for r in rows], label=name)
    ax_alloc.set_xlabel("arrived GPU demand (% of capacity)")
    ax_alloc.set_ylabel("GPU allocation ratio (%)")
    ax_frag.set_xlabel("arrived GPU demand (% of capacity)")
    ax_frag.set_ylabel("fragmented share of idle GPU (%)")
    ax_alloc.legend(loc="lower right", fontsize="small")
    for ax in (ax_alloc, ax_frag):
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write_runs(out: Path, runs: list[FillRun], title: str) -> dict:
    """DIR/curve.csv and DIR/summary.json for one placement; DIR/<placement>/... for several;
    DIR/fill.png with every placement's curves."""
    out.mkdir(parents=True, exist_ok=True)
    curves: dict[str, list[dict[str, float]]] = {}
    summaries = []
    for run in runs:
        rows = run_curve(run)
        curves[run.placement] = rows
        where = out if len(runs) == 1 else out / run.placement
        where.mkdir(parents=True, exist_ok=True)
        write_curve(where / "curve.csv", rows)
        s = summary(run, rows)
        (where / "summary.json").write_text(json.dumps(s, indent=2) + "\n")
        summaries.append(s)
    combined = summaries[0] if len(runs) == 1 else {"runs": summaries}
    if len(runs) > 1:
        (out / "summary.json").write_text(json.dumps(combined, indent=2) + "\n")
    plot(out / "fill.png", curves, title)
    return combined
