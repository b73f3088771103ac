"""``shapeshift compare``: several policies on the same workload and cluster, side by side.

Each policy runs in its own process (``--jobs`` workers). Workers receive only plain
values (paths, names, numbers) and load the inputs themselves, so nothing unpicklable
crosses a process boundary, and every run is the same deterministic simulation it would
be alone: the results do not depend on ``--jobs``. Wall-clock time is shown in the
table but kept out of ``compare.csv`` for that reason.
"""

from __future__ import annotations

import csv
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from shapeshift.cli.common import console, guarded, progress_bar, show_progress
from shapeshift.cli.options import (
    ClusterOption,
    FormatOption,
    LaunchDelayOption,
    QuietOption,
    RestorePenaltyOption,
    SeedOption,
    WorkloadOption,
    parse_overheads,
)
from shapeshift.cli.simulate import load_inputs, run_simulation
from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.policies.registry import make_policy

#: Columns of ``compare.csv`` (seconds unless named), after ``policy``.
COMPARE_KEYS = (
    "jobs_completed",
    "jobs_total",
    "avg_jct",
    "p50_jct",
    "p99_jct",
    "avg_queue",
    "p99_queue",
    "avg_responsiveness",
    "makespan",
    "gpu_utilization",
    "preemptions",
    "reconfigurations",
    "jobs_unfinished",
)


@dataclass(frozen=True)
class RunSpec:
    """Everything one worker needs, as plain picklable values."""

    policy: str
    args: tuple[tuple[str, str], ...]
    workload: str | None
    fmt: str | None
    cluster: str | None
    seed: int
    round_seconds: float | None
    launch_delay: float
    restore_penalty: float | str
    out: str | None


def run_one(spec: RunSpec) -> tuple[str, dict[str, Any] | None, str]:
    """Simulate one policy; returns (policy, summary, error message)."""
    from shapeshift.analysis.metrics import summarize, write_outputs
    from shapeshift.model import ModelError

    try:
        data, cluster = load_inputs(Path(spec.workload) if spec.workload else None, spec.fmt, spec.cluster, spec.seed)
        result = run_simulation(
            data,
            cluster,
            spec.policy,
            dict(spec.args),
            round_seconds=spec.round_seconds,
            overheads=Overheads(spec.launch_delay, spec.restore_penalty),
        )
        extra = {"seed": spec.seed}
        if spec.out is not None:
            summary = write_outputs(result, Path(spec.out) / spec.policy, extra)
        else:
            summary = summarize(result, extra)
        return spec.policy, summary, ""
    except (InputError, ModelError, ValueError) as exc:
        return spec.policy, None, f"{spec.policy}: {exc}"


def parse_compare_args(items: list[str] | None, policies: list[str]) -> dict[str, dict[str, str]]:
    """``["sjf.backfill=false", "tiresias.threshold=600"]`` -> per-policy argument dicts."""
    per: dict[str, dict[str, str]] = {p: {} for p in policies}
    for item in items or []:
        key, sep, value = item.partition("=")
        name, dot, param = key.strip().partition(".")
        if not sep or not dot or not name or not param:
            raise InputError(f"--policy-arg {item!r} must look like policy.key=value", field="--policy-arg")
        if name not in per:
            raise InputError(
                f"--policy-arg {item!r} names policy {name!r}, which is not in --policies ({', '.join(policies)})",
                field="--policy-arg",
            )
        per[name][param.strip()] = value.strip()
    return per


def parse_policies(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise InputError("--policies needs at least one policy name", field="--policies")
    if len(set(names)) != len(names):
        raise InputError("--policies lists a policy twice", field="--policies")
    return names


def run_all(specs: list[RunSpec], workers: int, progress: bool) -> dict[str, dict[str, Any]]:
    """Run every spec (in ``workers`` processes when > 1); results keyed by policy."""
    results: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    with progress_bar("policies", progress) as update:
        update(0, len(specs))
        if workers <= 1:
            outcomes = []
            for spec in specs:
                outcomes.append(run_one(spec))
                update(len(outcomes), len(specs))
        else:
            outcomes = []
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(run_one, spec) for spec in specs]
                for future in as_completed(futures):
                    outcomes.append(future.result())
                    update(len(outcomes), len(specs))
    for policy, summary, error in outcomes:
        if summary is None:
            errors.append(error)
        else:
            results[policy] = summary
    if errors:
        raise InputError("; ".join(sorted(errors)))
    return {spec.policy: results[spec.policy] for spec in specs}


def _s(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value / 3600:,.2f}h" if value >= 3600 else f"{value:,.0f}s"


def compare_table(title: str, results: dict[str, dict[str, Any]]) -> Table:
    """One row per policy: completed jobs, avg/P99 JCT, avg queueing, responsiveness
    (time to first start), makespan, GPU utilization, preemptions, simulation wall time."""
    table = Table(title=title, padding=(0, 1))
    table.add_column("policy", no_wrap=True)
    for column in ("done", "avg JCT", "P99 JCT", "queue", "resp.", "makespan", "util", "preempt", "wall"):
        table.add_column(column, justify="right", no_wrap=True)
    for policy, s in results.items():
        done = str(s["jobs_completed"]) + ("" if s["jobs_completed"] == s["jobs_total"] else f"/{s['jobs_total']}")
        table.add_row(
            policy,
            done,
            _s(s["avg_jct"]),
            _s(s["p99_jct"]),
            _s(s["avg_queue"]),
            _s(s["avg_responsiveness"]),
            _s(s["makespan"]),
            f"{s['gpu_utilization'] * 100:.1f}%",
            str(s["preemptions"]),
            f"{s['sim_wall_seconds']:.1f}s",
        )
    return table


def write_compare_csv(path: Path, results: dict[str, dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(("policy", *COMPARE_KEYS))
        for policy, summary in results.items():
            writer.writerow((policy, *("" if summary.get(k) is None else summary[k] for k in COMPARE_KEYS)))


@guarded
def command(
    policies: Annotated[
        str, typer.Option(help="Comma-separated policy names (see `shapeshift policies`).")
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
    launch_delay: LaunchDelayOption = 0.0,
    restore_penalty: RestorePenaltyOption = "30",
    out: Annotated[
        Path | None, typer.Option(help="Write compare.csv and <policy>/summary.json, jobs.csv here.")
    ] = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Worker processes (default: one per policy, up to CPUs).")
    ] = None,
    quiet: QuietOption = False,
) -> None:
    """Run several policies on the same workload and cluster and print one comparison table."""
    names = parse_policies(policies)
    per_policy = parse_compare_args(policy_arg, names)
    for name in names:  # fail fast, in this process, on unknown policies and bad parameters
        make_policy(name, per_policy[name])
    if jobs is not None and jobs < 1:
        raise InputError("--jobs must be >= 1", field="--jobs")
    penalty = parse_overheads(launch_delay, restore_penalty).restore_penalty
    if round_seconds is not None and round_seconds <= 0:
        raise InputError("--round must be > 0 seconds", field="--round")
    data, spec = load_inputs(workload, fmt, cluster, seed)  # validates the inputs once, up front
    specs = [
        RunSpec(
            policy=name,
            args=tuple(sorted(per_policy[name].items())),
            workload=str(workload) if workload is not None else None,
            fmt=fmt,
            cluster=cluster,
            seed=seed,
            round_seconds=round_seconds,
            launch_delay=launch_delay,
            restore_penalty=penalty,
            out=str(out) if out is not None else None,
        )
        for name in names
    ]
    workers = jobs if jobs is not None else min(len(names), os.cpu_count() or 1)
    results = run_all(specs, min(workers, len(names)), show_progress(quiet))
    if out is not None:
        write_compare_csv(out / "compare.csv", results)
    if quiet:
        return
    # A pipe or file gets the full table rather than 80 truncated columns.
    screen = console if console.is_terminal else Console(width=120)
    screen.print(compare_table(f"{data.name} on {spec.total_gpus} GPUs", results))
    if out is not None:
        console.print(f"wrote {out / 'compare.csv'} and one folder per policy in {out}", highlight=False)
