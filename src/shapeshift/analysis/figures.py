"""Figures of a trace characterization, as PNG files.

Built on ``matplotlib.figure.Figure`` with the Agg canvas (never ``pyplot``), so
plotting needs no display, keeps no global state and works in tests and on servers.
Every figure has a title and axis labels with units. One function per figure; each
returns the path it wrote, or ``None`` when the characterization has no data for it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from shapeshift.analysis.characterize import WEEKDAYS, Characterization

DPI = 110


def _new(width: float = 7.0, height: float = 4.0, rows: int = 1, cols: int = 1) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def _cdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(values)
    return x, np.arange(1, x.size + 1) / x.size


def duration_cdf(ch: Characterization, out: Path) -> Path | None:
    gpu = ch.curves.get("gpu_durations")
    if gpu is None or gpu.size == 0:
        return None
    fig, axes = _new()
    ax = axes[0, 0]
    series = [("GPU jobs", gpu, "tab:blue")]
    cpu = ch.curves.get("cpu_durations")
    if cpu is not None and cpu.size:
        series.append(("CPU jobs", cpu, "tab:orange"))
    for label, values, color in series:
        x, y = _cdf(np.maximum(values, 1e-3))
        median = float(np.median(values))
        ax.step(x, y, where="post", color=color, label=f"{label} (median {median:,.0f} s)")
        ax.axvline(max(median, 1e-3), color=color, linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("job duration (s, log scale)")
    ax.set_ylabel("fraction of jobs (CDF)")
    ax.set_title("Job duration CDF")
    ax.grid(True, linestyle=":")
    ax.legend(loc="lower right")
    return _save(fig, out / "duration_cdf.png")


def job_size(ch: Characterization, out: Path) -> Path | None:
    buckets = ch.curves.get("size_buckets")
    if not buckets:
        return None
    fig, axes = _new()
    ax = axes[0, 0]
    labels = [b["bucket"] for b in buckets]
    x = np.arange(len(labels))
    ax.bar(x - 0.2, [100 * b["job_share"] for b in buckets], width=0.4, label="share of jobs")
    ax.bar(x + 0.2, [100 * b["gpu_time_share"] for b in buckets], width=0.4, label="share of GPU time")
    ax.set_xticks(x, labels)
    ax.set_xlabel("job size (GPUs)")
    ax.set_ylabel("share (%)")
    ax.set_title("Job size distribution by job count and by GPU time")
    ax.grid(True, axis="y", linestyle=":")
    ax.legend()
    return _save(fig, out / "job_size.png")


def diurnal(ch: Characterization, out: Path) -> Path | None:
    by_hour = ch.curves.get("by_hour")
    if by_hour is None:
        return None
    by_day = ch.curves.get("by_weekday")
    cols = 2 if by_day is not None else 1
    fig, axes = _new(width=5.5 * cols, height=4.0, cols=cols)
    clock = ch.stats["diurnal"]["clock"]
    ax = axes[0, 0]
    ax.bar(by_hour.index, by_hour["jobs"], color="tab:blue", label="submissions")
    ax.set_xlabel("hour of day" + ("" if clock == "wall clock" else " (relative to first submission)"))
    ax.set_ylabel("mean submissions per hour (jobs/h)")
    twin = ax.twinx()
    twin.plot(by_hour.index, by_hour["gpus"], color="tab:red", marker="o", label="GPUs requested")
    twin.set_ylabel("mean GPUs requested per hour (GPUs/h)")
    ax.set_title("Submissions and GPU demand by hour of day")
    ax.set_xticks(range(0, 24, 3))
    if by_day is not None:
        ax2 = axes[0, 1]
        x = np.arange(7)
        ax2.bar(x, by_day["jobs"].fillna(0), color="tab:blue")
        ax2.set_xticks(x, WEEKDAYS)
        ax2.set_xlabel("day of week")
        ax2.set_ylabel("mean submissions per day (jobs/day)")
        twin2 = ax2.twinx()
        twin2.plot(x, by_day["gpus"], color="tab:red", marker="o")
        twin2.set_ylabel("mean GPUs requested per day (GPUs/day)")
        ax2.set_title("Submissions and GPU demand by day of week")
    return _save(fig, out / "diurnal.png")


def submissions_over_time(ch: Characterization, out: Path) -> Path | None:
    hourly = ch.curves.get("hourly")
    if hourly is None or hourly.empty:
        return None
    fig, axes = _new(width=9.0)
    ax = axes[0, 0]
    hours = (hourly.index - hourly.index[0]).total_seconds() / 86400.0
    ax.plot(hours, hourly["jobs"], linewidth=0.8)
    start = ch.stats.get("origin") or "first submission"
    ax.set_xlabel(f"days since {start}")
    ax.set_ylabel("submissions per hour (jobs/h)")
    ax.set_title("Hourly job submissions")
    ax.grid(True, linestyle=":")
    return _save(fig, out / "submissions.png")


def utilization(ch: Characterization, out: Path) -> Path | None:
    curve = ch.curves.get("utilization")
    if curve is None or curve.empty:
        return None
    fig, axes = _new(width=9.0)
    ax = axes[0, 0]
    days = (curve.index - curve.index[0]).total_seconds() / 86400.0
    ax.plot(days, curve.to_numpy(), linewidth=0.8, label="GPUs in use (hourly mean)")
    capacity = ch.curves.get("capacity")
    if capacity:
        ax.axhline(capacity, color="black", linestyle="--", linewidth=1, label=f"capacity ({capacity} GPUs)")
    ax.set_xlabel("days since the first job starts")
    ax.set_ylabel("GPUs in use (GPUs)")
    method = ch.curves.get("utilization_method", "")
    short = "ideal demand (start at submission)" if method.startswith("ideal") else method
    ax.set_title(f"GPU utilization over time — {short}", fontsize=10)
    ax.grid(True, linestyle=":")
    # Headroom above the capacity line, and the legend outside the data, so neither the
    # curve nor the capacity line is hidden.
    top = max(float(curve.max()), float(capacity or 0))
    ax.set_ylim(0, top * 1.18 if top > 0 else 1)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    return _save(fig, out / "utilization.png")


def per_vc(ch: Characterization, out: Path) -> Path | None:
    rows = ch.curves.get("per_vc")
    if not rows:
        return None
    has_queue = any(r.get("avg_queue_s") is not None for r in rows)
    cols = 3 if has_queue else 2
    fig, axes = _new(width=4.2 * cols, height=4.2, cols=cols)
    names = [r["vc"] for r in rows]
    x = np.arange(len(names))
    panels = [
        ("jobs", "jobs", "Jobs per VC"),
        ("gpu_hours", "GPU time (GPU-hours)", "GPU time per VC"),
    ]
    if has_queue:
        panels.append(("avg_queue_s", "average queueing delay (s)", "Average queueing delay per VC"))
    for ax, (key, ylabel, title) in zip(axes[0], panels, strict=True):
        ax.bar(x, [r.get(key) or 0.0 for r in rows])
        ax.set_xticks(x, names, rotation=60, fontsize=7)
        ax.set_xlabel("virtual cluster (VC)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, axis="y", linestyle=":")
    return _save(fig, out / "per_vc.png")


def status(ch: Characterization, out: Path) -> Path | None:
    data = ch.curves.get("status")
    if not data:
        return None
    fig, axes = _new(width=11.0, cols=2)
    ax = axes[0, 0]
    states = data["states"]
    x = np.arange(len(states))
    ax.bar(x - 0.2, [100 * r["job_share"] for r in data["by_state"]], width=0.4, label="share of jobs")
    ax.bar(x + 0.2, [100 * r["gpu_time_share"] for r in data["by_state"]], width=0.4, label="share of GPU time")
    ax.set_xticks(x, states, rotation=20)
    ax.set_xlabel("final status")
    ax.set_ylabel("share (%)")
    ax.set_title("Final status by job count and GPU time")
    ax.legend()
    ax2 = axes[0, 1]
    buckets = [r["bucket"] for r in data["by_size"]]
    bottom = np.zeros(len(buckets))
    for s in states:
        values = np.array([100 * r.get(s, 0.0) for r in data["by_size"]])
        ax2.bar(buckets, values, bottom=bottom, label=s)
        bottom += values
    ax2.set_xlabel("job size (GPUs)")
    ax2.set_ylabel("share of jobs (%)")
    ax2.set_title("Final status by job size")
    ax2.legend(fontsize=7)
    return _save(fig, out / "status.png")


def users(ch: Characterization, out: Path) -> Path | None:
    values = ch.curves.get("user_gpu_time")
    if values is None or values.size == 0 or values.sum() <= 0:
        return None
    fig, axes = _new()
    ax = axes[0, 0]
    for label, v in (("GPU time", values), ("queueing delay", ch.curves.get("user_queue"))):
        if v is None or v.size == 0 or v.sum() <= 0:
            continue
        x = 100 * np.arange(1, v.size + 1) / v.size
        ax.plot(np.concatenate([[0], x]), np.concatenate([[0], 100 * np.cumsum(v) / v.sum()]), label=label)
    ax.set_xlabel("top users (% of users, ranked by the quantity)")
    ax.set_ylabel("cumulative share (%)")
    ax.set_title("User concentration of GPU time and queueing")
    ax.grid(True, linestyle=":")
    ax.legend(loc="lower right")
    return _save(fig, out / "users.png")


#: Every figure, in report order: (caption, function).
FIGURES: tuple[tuple[str, Callable[[Characterization, Path], Path | None]], ...] = (
    ("Job duration CDF", duration_cdf),
    ("Job size distribution", job_size),
    ("Diurnal pattern", diurnal),
    ("Hourly submissions", submissions_over_time),
    ("GPU utilization over time", utilization),
    ("Virtual clusters", per_vc),
    ("Final status", status),
    ("User concentration", users),
)


def write_figures(ch: Characterization, out: str | Path) -> list[tuple[str, Path]]:
    """Write every figure the characterization supports; (caption, path) in report order."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for caption, fn in FIGURES:
        path = fn(ch, out)
        if path is not None:
            written.append((caption, path))
    return written
