"""The short Markdown report of a what-if: fidelity first, then the comparison."""

from __future__ import annotations

from typing import Any

_SHOWN = ("jobs_completed", "avg_jct", "p50_jct", "avg_queue", "p99_queue", "makespan", "gpu_utilization")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def _missing(agree: dict[str, Any]) -> str:
    """The jobs the record started and the replay did not, which the figures leave out."""
    missing = agree.get("jobs_only_recorded", 0)
    if not missing:
        return ""
    return f" {missing} job(s) that started in the record never started in the replay (see the notes)."


def report_text(outcome: Any) -> str:
    lines = ["# What if: the recorded history and each policy", ""]
    agree = outcome.agreement
    if agree is not None and agree.get("jobs_compared"):
        lines += [
            "## How closely the slurm replay reproduces the record",
            "",
            f"Of {agree['jobs_compared']} jobs, {agree['within_5s']:.1%} start within 5 s of their recorded start "
            f"and {agree['within_60s']:.1%} within 60 s; the median difference is {agree['median_abs_diff_s']} s, "
            f"P90 {agree['p90_abs_diff_s']} s, the largest {agree['max_abs_diff_s']} s; "
            f"{agree['same_order_share']:.1%} of neighbouring jobs start in the recorded order."
            + _missing(agree),
            "The alternatives below are compared under the same model, so read their differences against this margin.",
            "",
        ]
    lines += ["## Summary per source", "", "| source | " + " | ".join(_SHOWN) + " |", "|---" * (len(_SHOWN) + 1) + "|"]
    for source, summary in outcome.summaries.items():
        lines.append(f"| {source} | " + " | ".join(_cell(summary.get(k)) for k in _SHOWN) + " |")
    for title, table in (("account", outcome.by_account), ("partition", outcome.by_partition)):
        lines += ["", f"## Mean wait (s) per {title}", ""]
        pivot = table.pivot(index="group", columns="source", values="avg_wait")
        sources = list(outcome.summaries)
        lines += ["| " + title + " | " + " | ".join(sources) + " |", "|---" * (len(sources) + 1) + "|"]
        for group, row in pivot.iterrows():
            lines.append(f"| {group} | " + " | ".join(_cell(row.get(s)) for s in sources) + " |")
    if outcome.notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in outcome.notes]
    return "\n".join(lines) + "\n"
