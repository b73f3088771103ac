"""A self-contained HTML report of a trace characterization.

One file that can be mailed or attached to a ticket: figures are embedded as base64
PNG ``data:`` URIs and the style is inline, so the report opens anywhere without the
PNG files next to it. Sections the trace could not support are listed with the reason.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from shapeshift.analysis.characterize import TOP_USER_PERCENTS, Characterization
from shapeshift.page_style import REPORT_CSS

_STYLE = REPORT_CSS + "td, th { text-align: right; } td:first-child, th:first-child { text-align: left; }\n"


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    return str(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _table(headers: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def embed_png(path: Path, caption: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    alt = html.escape(caption)
    return f'<figure><img alt="{alt}" src="data:image/png;base64,{data}"><figcaption>{alt}</figcaption></figure>'


def _summary(stats: dict[str, Any]) -> list[str]:
    parts = [
        _table(
            ("quantity", "value"),
            [
                ("jobs", stats["jobs"]),
                ("GPU jobs", stats.get("gpu_jobs")),
                ("CPU jobs", stats.get("cpu_jobs")),
                ("total GPU time (GPU-hours)", stats.get("total_gpu_hours")),
                ("first submission", stats.get("origin") or "relative times"),
                ("queueing / start times from", stats.get("timing_source") or "not available"),
            ],
        )
    ]
    durations = stats.get("durations")
    if durations:
        rows = [
            (kind, d["jobs"], d["median_s"], d["mean_s"], d["p90_s"])
            for kind, d in (("GPU jobs", durations["gpu"]), ("CPU jobs", durations.get("cpu")))
            if d
        ]
        parts.append("<h2>Durations</h2>" + _table(("jobs", "count", "median (s)", "mean (s)", "P90 (s)"), rows))
    size = stats.get("job_size")
    if size:
        parts.append(
            "<h2>Job sizes</h2>"
            + _table(
                ("group", "share of jobs", "share of GPU time"),
                [
                    ("1 GPU", _pct(size["single_gpu_job_share"]), _pct(size["single_gpu_time_share"])),
                    (">= 8 GPUs", _pct(size["ge8_gpu_job_share"]), _pct(size["ge8_gpu_time_share"])),
                ],
            )
        )
    util = stats.get("utilization")
    if util:
        parts.append(
            "<h2>Utilization</h2><p>Plotted: <b>"
            + html.escape(util["method"])
            + "</b></p>"
            + _table(
                ("mean GPUs in use", "peak GPUs in use", "capacity (GPUs)", "mean utilization"),
                [
                    (
                        util["mean_gpus_in_use"],
                        util["peak_gpus_in_use_hourly"],
                        util["capacity_gpus"],
                        _pct(util["mean_utilization"]),
                    )
                ],
            )
        )
    vcs = stats.get("per_vc")
    if vcs:
        parts.append(
            "<h2>Virtual clusters</h2>"
            + _table(
                ("VC", "jobs", "GPU-hours", "avg queueing (s)"),
                [(r["vc"], r["jobs"], r["gpu_hours"], r.get("avg_queue_s")) for r in vcs["vcs"]],
            )
        )
    status = stats.get("status")
    if status:
        parts.append(
            "<h2>Final status</h2>"
            + _table(
                ("state", "jobs", "share of jobs", "share of GPU time"),
                [(r["state"], r["jobs"], _pct(r["job_share"]), _pct(r["gpu_time_share"])) for r in status["by_state"]],
            )
        )
    users = stats.get("users")
    if users:
        rows = [
            (
                f"top {p} %",
                users[f"top{p}pct_users"],
                _pct(users[f"top{p}pct_gpu_time_share"]),
                _pct(users.get(f"top{p}pct_queue_share")),
            )
            for p in TOP_USER_PERCENTS
        ]
        parts.append(
            f"<h2>Users ({users['users']})</h2>"
            + _table(("users", "count", "share of GPU time", "share of queueing"), rows)
        )
    return parts


def write_report(ch: Characterization, figures: list[tuple[str, Path]], path: str | Path) -> Path:
    """Write ``report.html`` with every figure embedded; returns its path."""
    stats = ch.stats
    title = f"Trace characterization: {html.escape(str(stats['trace']))}"
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title><style>{_STYLE}</style></head><body>"
    ]
    parts.append(f"<h1>{title}</h1>")
    parts.extend(_summary(stats))
    if stats["omitted"]:
        items = "".join(
            f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in sorted(stats["omitted"].items())
        )
        parts.append(f"<h2>Omitted</h2><ul class='note'>{items}</ul>")
    parts.append("<h2>Figures</h2>")
    parts.extend(embed_png(p, caption) for caption, p in figures)
    parts.append("</body></html>")
    path = Path(path)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
