"""``shapeshift compare``: several policies on the same workload and cluster, side by side.

The inputs are read and validated once; each policy's ``RunSpec`` then goes to its own
process (``--jobs`` workers), which calls the same ``run`` as ``simulate`` and writes that
policy's files. Every run is the same deterministic simulation it would be alone, so the
results do not depend on ``--jobs``. Wall-clock time is shown in the table but kept out
of ``compare.csv`` for that reason.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
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
from shapeshift.cli.simulate import energy_spec, load_inputs
from shapeshift.errors import InputError
from shapeshift.policies.registry import make_policy
from shapeshift.runs import COMPARE_KEYS, RunSpec, run
from shapeshift.runs.result import write_compare_csv

__all__ = ["COMPARE_KEYS", "command"]


def run_one(spec: RunSpec, out: str | None) -> tuple[str, dict[str, Any] | None, str]:
    """Simulate one policy (in a worker); returns (policy, summary, error message)."""
    from shapeshift.model import ModelError

    try:
        result = run(spec)
        summary = result.write(Path(out) / spec.policy) if out is not None else result.summary
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


def run_all(specs: list[RunSpec], out: str | None, workers: int, progress: bool) -> dict[str, dict[str, Any]]:
    """Run every spec (in ``workers`` processes when > 1); summaries keyed by policy."""
    results: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    outcomes = []
    with progress_bar("policies", progress) as update:
        update(0, len(specs))
        if workers <= 1:
            for spec in specs:
                outcomes.append(run_one(spec, out))
                update(len(outcomes), len(specs))
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(run_one, spec, out) for spec in specs]
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
    energy: Annotated[
        str, typer.Option(help="Cluster energy management for every policy: none, or ces (Helios CES).")
    ] = "none",
    energy_arg: Annotated[
        list[str] | None,
        typer.Option("--energy-arg", help="CES parameter key=value (repeatable), e.g. buffer=4, boot_delay=300."),
    ] = None,
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
    data, cluster_spec = load_inputs(workload, fmt, cluster, seed)  # validates the inputs once, up front
    base = RunSpec(
        workload=data,
        cluster=cluster_spec,
        round_seconds=round_seconds,
        overheads=parse_overheads(launch_delay, restore_penalty),
        seed=seed,
        energy=energy_spec(energy, energy_arg),
    )
    specs = [replace(base, policy=name, params=tuple(per_policy[name].items())) for name in names]
    workers = jobs if jobs is not None else min(len(names), os.cpu_count() or 1)
    results = run_all(specs, str(out) if out is not None else None, min(workers, len(names)), show_progress(quiet))
    if out is not None:
        write_compare_csv(out / "compare.csv", results)
    if quiet:
        return
    # A pipe or file gets the full table rather than 80 truncated columns.
    screen = console if console.is_terminal else Console(width=120)
    screen.print(compare_table(f"{data.name} on {cluster_spec.total_gpus} GPUs", results))
    if out is not None:
        console.print(f"wrote {out / 'compare.csv'} and one folder per policy in {out}", highlight=False)
