"""``shapeshift compare``: several policies on the same workload and cluster, side by side.

The inputs are read and validated once; each (policy, seed) ``RunSpec`` then goes to its
own process (``--jobs`` workers), which calls the same ``run`` as ``simulate`` and writes
that run's files. Every run is the same deterministic simulation it would be alone, so
the results do not depend on ``--jobs``. Wall-clock time is shown in the table but kept
out of ``compare.csv`` for that reason.

A policy may appear more than once under different parameters: ``tiresias(starvation=2)``
or ``t2=tiresias:starvation=2`` (label ``t2``). With several ``--seeds`` every figure is the
mean over seeds, with a 95% confidence interval (Student's t).
"""

from __future__ import annotations

import csv
import json
import os
import re
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from shapeshift.cli.common import EXIT_UNFINISHED, console, guarded, output_dir, progress_bar, show_progress
from shapeshift.cli.options import (
    AllowUnfinishedOption,
    ClusterOption,
    FormatOption,
    JsonOption,
    LaunchDelayOption,
    QuietOption,
    RestorePenaltyOption,
    SeedOption,
    ThroughputOption,
    WindowOption,
    WorkloadOption,
    parse_window,
    settle_flags,
)
from shapeshift.cli.simulate import energy_spec, show_notes, warn_if_slow
from shapeshift.errors import InputError
from shapeshift.runs.result_columns import COMPARE_KEYS

if TYPE_CHECKING:  # the simulator is imported when the command runs, not for --help
    from shapeshift.runs import RunSpec
    from shapeshift.runs.setting import Settled

__all__ = ["COMPARE_KEYS", "command"]

#: Figures aggregated over seeds with a confidence interval in ``compare.csv``.
CI_KEYS = ("avg_jct", "p99_jct", "avg_queue", "makespan", "gpu_utilization")
_CALL = re.compile(r"^([A-Za-z0-9_.-]+)\((.*)\)$")


@dataclass(frozen=True)
class Entry:
    """One column of the comparison: a label, a registered policy and its parameters."""

    label: str
    policy: str
    params: tuple[tuple[str, str], ...]


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses; unbalanced parentheses are refused here, before
    a half of ``fifo(backfill=true`` could be read as a policy name."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
            if depth > 1:
                raise InputError(f"{text!r}: parentheses inside a policy's parameters", field="--policies")
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise InputError(f"{text!r}: a ')' without its '('", field="--policies")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if depth:
        raise InputError(f"{text!r}: a '(' without its ')'", field="--policies")
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _pairs(items: list[str], where: str) -> tuple[tuple[str, str], ...]:
    result = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{where}: parameter {item!r} must look like key=value", field="--policies")
        result.append((key.strip(), value.strip()))
    return tuple(result)


def parse_policies(text: str) -> list[Entry]:
    """``fifo,tiresias(starvation=2),t4=tiresias:starvation=4`` -> entries with distinct labels."""
    entries = []
    for part in _split_top(text):
        call = _CALL.match(part)
        if call:
            name, args = call.groups()
            entries.append(Entry(part, name, _pairs([a for a in args.split(",") if a.strip()], part)))
        elif "=" in part.split(":", 1)[0]:
            label, _, rest = part.partition("=")
            name, *args = rest.split(":")
            entries.append(Entry(label.strip(), name.strip(), _pairs(args, part)))
        else:
            entries.append(Entry(part, part, ()))
    if not entries:
        raise InputError("--policies needs at least one policy name", field="--policies")
    labels = [e.label for e in entries]
    if len(set(labels)) != len(labels):
        raise InputError(
            "--policies lists a policy twice; to compare one policy under other parameters give each a label "
            "(tiresias,t2=tiresias:starvation=2) or its parameters (tiresias,tiresias(starvation=2))",
            field="--policies",
        )
    return entries


def apply_policy_args(items: list[str] | None, entries: list[Entry]) -> list[Entry]:
    """``--policy-arg label.key=value`` added to the entry with that label."""
    by_label = {e.label: dict(e.params) for e in entries}
    for item in items or []:
        key, sep, value = item.partition("=")
        label, dot, param = key.strip().rpartition(".")
        if not sep or not dot or not label or not param:
            raise InputError(f"--policy-arg {item!r} must look like policy.key=value", field="--policy-arg")
        if label not in by_label:
            raise InputError(
                f"--policy-arg {item!r} names policy {label!r}, which is not in --policies ({', '.join(by_label)})",
                field="--policy-arg",
            )
        by_label[label][param.strip()] = value.strip()
    return [replace(e, params=tuple(by_label[e.label].items())) for e in entries]


def parse_seeds(text: str | None, seed: int) -> list[int]:
    if text is None:
        return [seed]
    seeds = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise InputError(f"--seeds takes integers >= 0 separated by commas, got {part!r}", field="--seeds")
        seeds.append(int(part))
    if not seeds or len(set(seeds)) != len(seeds):
        raise InputError("--seeds needs distinct seeds", field="--seeds")
    return seeds


def run_one(label: str, spec: RunSpec, out: str | None) -> tuple[str, int, dict[str, Any] | None, str]:
    """Simulate one (policy, seed) in a worker; returns (label, seed, summary, error)."""
    from shapeshift.model import ModelError
    from shapeshift.runs import run

    try:
        result = run(spec)
        summary = result.write(Path(out)) if out is not None else result.summary
        return label, spec.seed, summary, ""
    except (InputError, ModelError, ValueError) as exc:
        return label, spec.seed, None, f"{label}: {exc}"


def run_all(
    tasks: list[tuple[str, RunSpec, str | None]], workers: int, progress: bool
) -> dict[str, dict[int, dict[str, Any]]]:
    """Run every task (in ``workers`` processes when > 1); summaries by label, then seed."""
    outcomes = []
    with progress_bar("runs", progress) as update:
        update(0, len(tasks))
        if workers <= 1:
            for task in tasks:
                outcomes.append(run_one(*task))
                update(len(outcomes), len(tasks))
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(run_one, *task) for task in tasks]
                for future in as_completed(futures):
                    outcomes.append(future.result())
                    update(len(outcomes), len(tasks))
    errors = sorted({error for _, _, summary, error in outcomes if summary is None})
    if errors:
        raise InputError("; ".join(errors))
    results: dict[str, dict[int, dict[str, Any]]] = {label: {} for label, _, _ in tasks}
    for label, seed, summary, _ in outcomes:
        results[label][seed] = summary  # type: ignore[assignment]
    return {label: dict(sorted(by_seed.items())) for label, by_seed in results.items()}


def aggregate(by_seed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """One row: the mean of every numeric figure over seeds, plus ``<key>_ci95`` half-widths."""
    from shapeshift.analysis.aggregate import mean_ci95

    runs = list(by_seed.values())
    if len(runs) == 1:
        return dict(runs[0])
    row = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            row[key] = mean_ci95([r.get(key) for r in runs])[0]
    for key in CI_KEYS:
        row[f"{key}_ci95"] = mean_ci95([r.get(key) for r in runs])[1]
    return row


def _s(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value / 3600:,.2f}h" if value >= 3600 else f"{value:,.0f}s"


def _with_ci(row: dict[str, Any], key: str) -> str:
    """``9.90±8.54h``: the mean and the 95% interval's half-width in the mean's unit."""
    value, ci = row.get(key), row.get(f"{key}_ci95")
    if value is None or ci is None:
        return _s(value)
    if value >= 3600:
        return f"{value / 3600:,.2f}±{ci / 3600:,.2f}h"
    return f"{value:,.0f}±{ci:,.0f}s"


def _count(value: Any) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def compare_table(title: str, rows: dict[str, dict[str, Any]], wide: bool) -> Table:
    """One row per policy: completed jobs, avg/P99 JCT, avg queueing, responsiveness (time
    to first start), GPU utilization, preemptions; ``wide`` adds makespan and wall time.
    The narrow form fits an 80-column terminal."""
    if wide:
        table = Table(title=title, padding=(0, 1), box=box.HEAVY_HEAD)
    else:  # one space between columns, no outer padding: 8 columns in under 80 characters
        table = Table(title=title, padding=(0, 0), box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    width = max(len(label) for label in rows)
    table.add_column("policy", min_width=min(width, 22), max_width=22, overflow="fold")
    columns = ["done", "avg JCT", "P99 JCT", "queue", "resp.", "util", "preempt" if wide else "pre."]
    if wide:
        columns += ["makespan", "wall"]
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    for label, s in rows.items():
        done = _count(s["jobs_completed"])
        if s["jobs_completed"] != s["jobs_total"]:
            done += f"/{_count(s['jobs_total'])}"
        cells = [
            label,
            done,
            _with_ci(s, "avg_jct"),
            _with_ci(s, "p99_jct"),
            _s(s["avg_queue"]),
            _s(s["avg_responsiveness"]),
            f"{s['gpu_utilization'] * 100:.1f}%",
            _count(s["preemptions"]),
        ]
        if wide:
            cells += [_s(s["makespan"]), f"{s['sim_wall_seconds']:.1f}s"]
        table.add_row(*cells)
    return table


def write_compare_csv(path: Path, rows: dict[str, dict[str, Any]], entries: list[Entry], seeds: list[int]) -> None:
    """``compare.csv``: the contract columns, then SLO attainment, the registered policy and
    its parameters, the seeds and (with several seeds) the 95% interval half-widths."""
    extra = ["slo_attainment", "policy_name", "params", "seeds"]
    if len(seeds) > 1:
        extra += [f"{k}_ci95" for k in CI_KEYS]
    by_label = {e.label: e for e in entries}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(("policy", *COMPARE_KEYS, *extra))
        for label, row in rows.items():
            entry = by_label[label]
            values = {
                **row,
                "policy_name": entry.policy,
                "params": ";".join(f"{k}={v}" for k, v in entry.params),
                "seeds": ";".join(map(str, seeds)),
            }
            writer.writerow((label, *("" if values.get(k) is None else values[k] for k in (*COMPARE_KEYS, *extra))))


@guarded
def command(
    policies: Annotated[
        str,
        typer.Option(
            help="Comma-separated policies (see `shapeshift policies`); one policy twice as "
            "tiresias(starvation=2) or t2=tiresias:starvation=2."
        ),
    ] = "fifo,sjf,srtf,las,tiresias",
    workload: WorkloadOption = None,
    fmt: FormatOption = None,
    cluster: ClusterOption = None,
    policy_arg: Annotated[
        list[str] | None,
        typer.Option("--policy-arg", help="Policy parameter policy.key=value, e.g. sjf.backfill=false (repeatable)."),
    ] = None,
    round_seconds: Annotated[
        float | None, typer.Option("--round", help="Scheduling round in seconds for every policy.")
    ] = None,
    seed: SeedOption = 0,
    seeds: Annotated[
        str | None,
        typer.Option(help="Comma-separated seeds: every figure becomes the mean over seeds with a 95% interval."),
    ] = None,
    launch_delay: LaunchDelayOption = None,
    restore_penalty: RestorePenaltyOption = None,
    energy: Annotated[
        str, typer.Option(help="Cluster energy management for every policy: none, or ces (Helios CES).")
    ] = "none",
    energy_arg: Annotated[
        list[str] | None,
        typer.Option("--energy-arg", help="CES parameter key=value (repeatable), e.g. buffer=4, boot_delay=300."),
    ] = None,
    window: WindowOption = None,
    throughput: ThroughputOption = None,
    out: Annotated[
        Path | None, typer.Option(help="Write compare.csv and <policy>/summary.json, jobs.csv here.")
    ] = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Worker processes (default: one per run, up to CPUs).")
    ] = None,
    as_json: JsonOption = False,
    allow_unfinished: AllowUnfinishedOption = False,
    quiet: QuietOption = False,
) -> None:
    """Run several policies on the same workload and cluster and print one comparison table.

    Exits with status 3 when a policy left jobs unfinished (its "done" column shows
    completed/total), unless --allow-unfinished is given."""
    from shapeshift.policies.framework.registry import make_policy

    entries = apply_policy_args(policy_arg, parse_policies(policies))
    for entry in entries:  # fail fast, in this process, on unknown policies and bad parameters
        make_policy(entry.policy, dict(entry.params))
    if jobs is not None and jobs < 1:
        raise InputError("--jobs must be >= 1", field="--jobs")
    seed_list = parse_seeds(seeds, seed)
    energy_settings = energy_spec(energy, energy_arg)
    tasks = []
    title = ""

    def settled_for(s: int) -> Settled:
        return settle_flags(
            workload,
            fmt,
            cluster,
            s,
            launch_delay=launch_delay,
            restore_penalty=restore_penalty,
            throughput=throughput,
            round_seconds=round_seconds,
        )

    loaded = settled_for(seed_list[0])  # validates the inputs up front
    for s in seed_list:
        # Only the built-in demo workload depends on the seed; a trace is read once.
        settled = loaded if workload is not None or s == seed_list[0] else settled_for(s)
        data = settled.workload
        title = f"{data.name if len(seed_list) == 1 else data.name.removesuffix(f'-seed{s}')} on "
        title += f"{settled.cluster.total_gpus} GPUs" + (f", seeds {seeds}" if len(seed_list) > 1 else "")
        window_jobs = parse_window(window, len(data))
        for entry in entries:
            where = None
            if out is not None:
                where = str(out / entry.label / (f"seed{s}" if len(seed_list) > 1 else ""))
            spec = settled.spec(entry.policy, dict(entry.params), seed=s, energy=energy_settings, window=window_jobs)
            tasks.append((entry.label, spec, where))
    for spec in {label: spec for label, spec, _ in tasks}.values():
        show_notes(spec, quiet or as_json)
    output_dir(out)  # after the inputs are known good: bad input stores nothing
    warn_if_slow([entry.policy for entry in entries], quiet or as_json)
    workers = jobs if jobs is not None else min(len(tasks), os.cpu_count() or 1)
    results = run_all(tasks, min(workers, len(tasks)), show_progress(quiet) and not as_json)
    rows = {label: aggregate(by_seed) for label, by_seed in results.items()}
    if out is not None:
        write_compare_csv(out / "compare.csv", rows, entries, seed_list)
    unfinished = [label for label, row in rows.items() if row.get("jobs_unfinished")]
    if as_json:
        typer.echo(json.dumps([{"policy": label, **row} for label, row in rows.items()], indent=2))
    elif not quiet:
        # A pipe or file gets the wide table; a terminal narrower than 100 columns the narrow one.
        screen = console if console.is_terminal else Console(width=120)
        screen.print(compare_table(title, rows, wide=screen.width >= 100))
        if unfinished:
            console.print(
                f"[yellow]jobs never finished under {', '.join(unfinished)}[/]: their averages cover completed jobs "
                "only (exit status 3; --allow-unfinished accepts it)",
                highlight=False,
            )
        console.print(loaded.line(), highlight=False, soft_wrap=True)
        if out is not None:
            console.print(f"wrote {out / 'compare.csv'} and one folder per policy in {out}", highlight=False)
    if unfinished and not allow_unfinished:
        raise typer.Exit(EXIT_UNFINISHED)
