"""``shapeshift simulate``: one policy, one workload, one cluster."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from shapeshift.cli.common import console, guarded, progress_bar, show_progress
from shapeshift.cli.options import (
    DEMO_CLUSTER,
    ClusterOption,
    FormatOption,
    LaunchDelayOption,
    QuietOption,
    RestorePenaltyOption,
    SeedOption,
    WorkloadOption,
    parse_overheads,
)
from shapeshift.cluster import load_cluster
from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec
from shapeshift.policies.base import Policy
from shapeshift.policies.registry import make_policy, parse_policy_args
from shapeshift.sim.simulator import SimulationResult, simulate
from shapeshift.workloads.readers import read_workload
from shapeshift.workloads.synthetic import PoissonSpec, poisson_workload
from shapeshift.workloads.workload import Workload

#: The built-in demo: 300 Poisson jobs (12/hour, Philly-like sizes) on DEMO_CLUSTER.
DEMO_JOBS = 300


def load_inputs(workload: Path | None, fmt: str | None, cluster: str | None, seed: int) -> tuple[Workload, ClusterSpec]:
    """The workload file (or the seeded demo) and the cluster (or the demo cluster)."""
    if workload is None:
        data = poisson_workload(PoissonSpec(jobs=DEMO_JOBS, seed=seed), name=f"demo-poisson-seed{seed}")
    else:
        data = read_workload(workload, fmt)
    return data, load_cluster(cluster or DEMO_CLUSTER)


def run_simulation(
    data: Workload,
    spec: ClusterSpec,
    policy_name: str,
    policy_args: dict[str, str],
    *,
    round_seconds: float | None,
    overheads: Overheads,
    quiet: bool = True,
    wrap: Callable[[Policy], Policy] | None = None,
) -> SimulationResult:
    policy = make_policy(policy_name, policy_args)
    if wrap is not None:
        policy = wrap(policy)
    try:
        with progress_bar(f"{policy_name}", show_progress(quiet)) as update:
            return simulate(
                data.jobs(),
                spec,
                policy,
                workload_name=data.name,
                overheads=overheads,
                round_seconds=round_seconds,
                progress=update,
            )
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _seconds(value: Any) -> str:
    if value is None:
        return "-"
    if value >= 3600:
        return f"{value:,.0f} s ({value / 3600:.2f} h)"
    return f"{value:,.1f} s"


def summary_table(summary: dict[str, Any]) -> Table:
    table = Table(title=f"{summary['policy']} on {summary['workload']} ({summary['cluster_gpus']} GPUs)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    jobs = f"{summary['jobs_completed']} completed / {summary['jobs_total']} total"
    table.add_row("jobs", jobs + (f", {summary['jobs_rejected']} rejected" if summary["jobs_rejected"] else ""))
    if summary.get("jobs_unfinished"):
        table.add_row("unfinished", str(summary["jobs_unfinished"]))
    for key, label in (
        ("avg_jct", "average JCT"),
        ("p50_jct", "median JCT"),
        ("p99_jct", "P99 JCT"),
        ("avg_queue", "average queueing"),
        ("p99_queue", "P99 queueing"),
        ("avg_responsiveness", "average responsiveness"),
        ("makespan", "makespan"),
    ):
        table.add_row(label, _seconds(summary[key]))
    table.add_row("GPU utilization", f"{summary['gpu_utilization'] * 100:.1f} %")
    table.add_row("preemptions", str(summary["preemptions"]))
    table.add_row("reconfigurations", str(summary["reconfigurations"]))
    table.add_row("simulation wall time", f"{summary['sim_wall_seconds']:.2f} s")
    return table


@guarded
def simulate_command(
    workload: WorkloadOption = None,
    fmt: FormatOption = None,
    cluster: ClusterOption = None,
    policy: Annotated[str, typer.Option(help="Policy name (see `shapeshift policies`).")] = "fifo",
    policy_arg: Annotated[
        list[str] | None, typer.Option("--policy-arg", help="Policy parameter key=value (repeatable).")
    ] = None,
    round_seconds: Annotated[
        float | None, typer.Option("--round", help="Scheduling round in seconds (round-based policies).")
    ] = None,
    seed: SeedOption = 0,
    launch_delay: LaunchDelayOption = 0.0,
    restore_penalty: RestorePenaltyOption = "30",
    energy: Annotated[
        str, typer.Option(help="Cluster energy management: none, or ces (Helios CES: idle nodes powered down).")
    ] = "none",
    energy_arg: Annotated[
        list[str] | None,
        typer.Option("--energy-arg", help="CES parameter key=value (repeatable), e.g. buffer=4, boot_delay=300."),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write summary.json, jobs.csv and rejected.csv here.")] = None,
    quiet: QuietOption = False,
) -> None:
    """Simulate one policy on a workload and cluster, and report JCT, queueing and utilization."""
    from shapeshift.analysis.metrics import summarize, write_outputs

    args = parse_policy_args(policy_arg)
    overheads = parse_overheads(launch_delay, restore_penalty)
    if energy not in ("none", "ces"):
        raise InputError(f"unknown energy mode {energy!r}; known: none, ces", field="--energy")
    data, spec = load_inputs(workload, fmt, cluster, seed)
    wrap = None
    if energy == "ces":
        from shapeshift.energy.sim_component import CESWrapper, parse_ces_args

        try:
            wrap = CESWrapper(spec, parse_ces_args(energy_arg))
        except ValueError as exc:
            raise InputError(str(exc), field="--energy-arg") from None
    result = run_simulation(
        data, spec, policy, args, round_seconds=round_seconds, overheads=overheads, quiet=quiet, wrap=wrap
    )
    extra: dict[str, Any] = {"seed": seed}
    if wrap is not None and wrap.policy is not None:
        from shapeshift.energy.sim_component import energy_extra

        baseline = run_simulation(data, spec, policy, args, round_seconds=round_seconds, overheads=overheads)
        extra.update(energy_extra(result, baseline, wrap.policy))
    summary = write_outputs(result, out, extra) if out is not None else summarize(result, extra)
    if quiet:
        return
    console.print(summary_table(summary))
    if "energy_node_hours_saved" in summary:
        change = summary["energy_avg_jct_change_pct"]
        console.print(
            f"CES: {summary['energy_node_hours_saved']:,.1f} node-hours powered down "
            f"({summary['energy_kwh_saved']:,.1f} kWh), {summary['energy_wakeups']} wake-ups, "
            f"{summary['energy_jobs_waited_for_boot']} job(s) waited for a boot; average JCT "
            + ("-" if change is None else f"{change:+.2f} %")
            + " vs. no CES",
            highlight=False,
        )
    if result.rejections:
        shown = ", ".join(f"{r.job_id} ({r.reason})" for r in result.rejections[:5])
        more = f" and {len(result.rejections) - 5} more" if len(result.rejections) > 5 else ""
        console.print(f"[yellow]{len(result.rejections)} job(s) rejected:[/] {shown}{more}", highlight=False)
    if out is not None:
        console.print(f"wrote {out / 'summary.json'}, {out / 'jobs.csv'}, {out / 'rejected.csv'}", highlight=False)
