"""``shapeshift queue``: every job with owner, state, plan, placement, progress, times, and
why it waits (``--json`` for scripts; ``-t/--states`` and ``-u/--user`` filter like squeue)."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from shapeshift.cli.common import console, guarded
from shapeshift.cli.options import JsonOption
from shapeshift.errors import InputError
from shapeshift.safe_text import visible

STATES = ("queued", "running", "completed", "failed", "cancelled", "rejected")
FINISHED = ("completed", "failed", "cancelled", "rejected")


def progress_text(job: dict[str, Any]) -> str:
    total = job.get("iterations")
    done = job.get("progress") or 0
    if total:
        return f"{int(done)}/{total} ({100 * done / total:.0f}%)"
    return f"{done:.0f}s"


def _reason(text: str, explain: bool) -> str:
    from shapeshift.predict.primo_duration import EXPLAIN_SEPARATOR

    return text if explain else text.split(EXPLAIN_SEPARATOR)[0]


def clock(t: float | None) -> str:
    """Local wall-clock time, with the date only when it is not today."""
    if t is None:
        return ""
    fmt = "%H:%M:%S" if time.localtime(t)[:3] == time.localtime()[:3] else "%m-%d %H:%M"
    return time.strftime(fmt, time.localtime(t))


def elapsed_seconds(job: dict[str, Any], now: float) -> float | None:
    """Wall time since the first start (to the end for finished jobs), like squeue's TIME."""
    if job.get("first_start") is None:
        return None
    return max(0.0, (job.get("end_time") or now) - job["first_start"])


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def parse_states(value: str | None) -> str | None:
    if not value:
        return None
    states = [s.strip() for s in value.split(",") if s.strip()]
    unknown = [s for s in states if s not in STATES]
    if unknown:
        raise InputError(f"unknown job state {unknown[0]!r}; use {', '.join(STATES)}", field="--states")
    return ",".join(states)


def _seconds(value: float | None) -> str:
    return f"{value:.3f}" if value else "-"


def perf_table(jobs: list[dict[str, Any]]) -> Table:
    """Per running job: the policy model's predicted seconds per iteration, the measured
    ones (the workers' reports) and the relative error, which drives the online refit."""
    table = Table()
    for column in ("id", "name", "plan", "placement", "predicted s/iter", "observed s/iter", "error"):
        table.add_column(column, overflow="fold")
    for job in jobs:
        if job["state"] != "running":
            continue
        predicted, observed = job.get("predicted_iter_time"), job.get("iter_time")
        error = f"{100 * (predicted - observed) / observed:+.0f}%" if predicted and observed else "-"
        table.add_row(
            *map(cell, (job["id"], job["name"], job["plan"], job["placement"])),
            _seconds(predicted),
            _seconds(observed),
            error,
        )
    return table


#: Widest a name or user cell gets: at 80 columns the state, times and reason must still fit.
NAME_WIDTH = 14
USER_WIDTH = 10


def cell(value: object) -> Text:
    """User-supplied text as a table cell: never markup, never a raw control character."""
    return Text(visible(str(value)))


def queue_table(jobs: list[dict[str, Any]], now: float, *, width: int, explain: bool) -> Table:
    """The columns that fit ``width``: plan, placement and submit time from 150 columns,
    the start time from 100; at 80 the state, the elapsed time and the reason matter more
    (``--json`` always has everything). Names and users are cut with an ellipsis at a
    fixed width so a long one cannot push the other columns off the screen."""
    wide = width >= 150
    columns = ["id", "name", "user", "state", *(["plan", "placement"] if wide else []), "progress"]
    columns += [*(["submit"] if wide else []), *(["start"] if width >= 100 else []), "time", "reason"]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in columns:
        if column == "reason":
            table.add_column(column, overflow="fold")
        elif column in ("name", "user"):
            width = NAME_WIDTH if column == "name" else USER_WIDTH
            table.add_column(column, overflow="ellipsis", no_wrap=True, max_width=width)
        else:
            table.add_column(column, overflow="fold", no_wrap=True)
    for job in jobs:
        waiting = job["state"] == "queued"
        cells = {
            "id": job["id"],
            "name": job["name"],
            "user": job.get("user") or "",
            "state": job["state"],
            "plan": job["plan"] if not waiting else "",
            "placement": job["placement"] if not waiting else "",
            "progress": progress_text(job),
            "submit": clock(job["submit_time"]),
            "start": clock(job["first_start"]),
            "time": duration_text(elapsed_seconds(job, now)),
            "reason": _reason(job["reason"], explain) if waiting or job["state"] in ("failed", "rejected") else "",
        }
        table.add_row(*(cell(cells[c]) for c in columns))
    return table


@guarded
def command(
    state: Annotated[str | None, typer.Option(help="Controller state directory.")] = None,
    states: Annotated[
        str | None,
        typer.Option("--states", "-t", help=f"Only jobs in these states (comma-separated: {', '.join(STATES)})."),
    ] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user's jobs.")] = None,
    all_jobs: Annotated[bool, typer.Option("--all/--active", help="Include finished jobs (default) or not.")] = True,
    as_json: JsonOption = False,
    perf: Annotated[
        bool, typer.Option("--perf", help="Running jobs: predicted vs observed iteration time (plan-aware policies).")
    ] = False,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="With estimator=primo: a waiting job's predicted duration and top 3 reasons."),
    ] = False,
) -> None:
    """List jobs: id, name, owner, state, plan, placement, progress, submit/start time,
    elapsed time, and the reason a waiting job waits."""
    from shapeshift.runtime.remote import ControllerClient

    wanted = parse_states(states)
    jobs = ControllerClient.from_state(state).jobs(wanted, user)
    if not all_jobs:
        jobs = [j for j in jobs if j["state"] not in FINISHED]
    now = time.time()
    if perf and not as_json:
        console.print(perf_table(jobs))
        return
    if as_json:
        for job in jobs:
            job["elapsed"] = elapsed_seconds(job, now)
        typer.echo(json.dumps(jobs, indent=2))
        return
    if console.is_terminal:
        console.print(queue_table(jobs, now, width=console.width, explain=explain), highlight=False)
    else:  # piped: one line per job and the reason never cut (a script reading it wants all of it)
        table = queue_table(jobs, now, width=80, explain=explain)
        Console(file=console.file, width=100_000, highlight=False, color_system=None).print(table)
