"""``shapeshift simulate``: one policy, one workload, one cluster.

The command parses its flags into a ``RunSpec`` and calls ``shapeshift.runs.run``, the
same runner every other front door uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from shapeshift.cli.common import (
    EXIT_UNFINISHED,
    console,
    err_console,
    guarded,
    output_dir,
    progress_bar,
    show_progress,
)
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
from shapeshift.errors import InputError

if TYPE_CHECKING:  # the simulator is imported when a command runs, not for --help
    from shapeshift.runs import EnergySpec, RunResult, RunSpec


def show_notes(spec: RunSpec, quiet: bool) -> None:
    """One line on stderr for each way the run cannot show what its policy decides
    (``shapeshift.runs.pairing``)."""
    from shapeshift.runs.pairing import pairing_notes

    if not quiet:
        for note in pairing_notes(spec):
            err_console.print(note, highlight=False, soft_wrap=True)
        conf = getattr(spec.cluster, "slurm", None)  # a --cluster slurm.conf: what it left out
        ignored = conf.ignored_note() if conf is not None else None
        if ignored:
            err_console.print(ignored, highlight=False, soft_wrap=True)


def energy_spec(energy: str, energy_arg: list[str] | None) -> EnergySpec | None:
    """``--energy`` and ``--energy-arg`` as an ``EnergySpec`` (``None`` for ``none``)."""
    if energy not in ("none", "ces"):
        raise InputError(f"unknown energy mode {energy!r}; known: none, ces", field="--energy")
    if energy == "none":
        if energy_arg:
            raise InputError("--energy-arg needs --energy ces", field="--energy-arg")
        return None
    from shapeshift.energy.sim_component import ces_config, parse_energy_args
    from shapeshift.runs import EnergySpec

    params = parse_energy_args(energy_arg)
    ces_config(params)  # validate before any simulation starts
    return EnergySpec("ces", params)


#: Policies that simulate candidates at every decision, and what that costs.
SLOW_POLICIES = {
    "auto": "simulates every ordering x admission candidate at each of its decisions "
    "(about 1-2 minutes for the 300-job demo on 2 cores)",
}


def warn_if_slow(policies: list[str], quiet: bool) -> None:
    for name in dict.fromkeys(policies):
        if name in SLOW_POLICIES and not quiet:
            err_console.print(f"note: {name} {SLOW_POLICIES[name]}; progress is shown below", highlight=False)


def run_with_progress(spec: RunSpec, quiet: bool, workers: int = 1, backend: str = "processes") -> RunResult:
    """``run(spec)`` with a progress bar on a terminal (``workers`` > 1: partitions in
    parallel, as processes or Ray tasks, where the run allows it; a note says why not
    otherwise)."""
    from shapeshift.runs import run

    warn_if_slow([spec.policy], quiet)

    def note(reason: str) -> None:
        if not quiet:
            console.print(f"[yellow]--workers:[/] running in one process: {reason}", highlight=False)

    with progress_bar(spec.policy, show_progress(quiet)) as update:
        return run(spec, progress=update, workers=workers, on_serial=note, backend=backend)


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


def queue_table(summary: dict[str, Any]) -> Table:
    """Per-queue figures of a Kueue or KAI replay (``summary["queues"]``)."""
    jain = summary.get("queues_jain_share_vs_deserved")
    title = "per queue" + ("" if jain is None else f" (Jain over share / deserved: {jain:.3f})")
    table = Table(title=title)
    for column in ("queue", "admitted", "mean wait", "GPU-h", "borrowed GPU-h", "evicted", "share", "deserved"):
        table.add_column(column, justify="left" if column == "queue" else "right")
    for name, q in summary["queues"].items():
        deserved = q["deserved_share"]
        table.add_row(
            name,
            str(q["jobs_admitted"]),
            _seconds(q["admission_wait_mean_s"]),
            f"{q['gpu_hours']:,.1f}",
            f"{q['borrowed_gpu_hours']:,.1f}",
            str(q["preemptions_suffered"]),
            f"{q['gpu_share'] * 100:.1f} %",
            "-" if deserved is None else f"{deserved * 100:.1f} %",
        )
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
    launch_delay: LaunchDelayOption = None,
    restore_penalty: RestorePenaltyOption = None,
    energy: Annotated[
        str, typer.Option(help="Cluster energy management: none, or ces (Helios CES: idle nodes powered down).")
    ] = "none",
    energy_arg: Annotated[
        list[str] | None,
        typer.Option("--energy-arg", help="CES parameter key=value (repeatable), e.g. buffer=4, boot_delay=300."),
    ] = None,
    window: WindowOption = None,
    throughput: ThroughputOption = None,
    out: Annotated[Path | None, typer.Option(help="Write summary.json, jobs.csv and rejected.csv here.")] = None,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="estimator=primo: each job's predicted duration and top 3 reasons in jobs.csv."),
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            help="Simulate the partitions (virtual clusters) in this many processes; same result as one. "
            "Event-driven, partition-local policies only (others run in one process, with a note).",
        ),
    ] = 1,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="Where --workers runs the partitions: processes (this machine) "
            "or ray (RAY_ADDRESS, else a local Ray).",
        ),
    ] = "processes",
    as_json: JsonOption = False,
    allow_unfinished: AllowUnfinishedOption = False,
    quiet: QuietOption = False,
) -> None:
    """Simulate one policy on a workload and cluster, and report JCT, queueing and utilization.

    Exits with status 3 when the run left jobs unfinished (averages then cover completed
    jobs only), unless --allow-unfinished is given."""
    from shapeshift.policies.framework.registry import parse_policy_args
    from shapeshift.runs.backends import check_backend

    if workers < 1:
        raise InputError("--workers must be >= 1", field="--workers")
    check_backend(backend)
    settled = settle_flags(
        workload,
        fmt,
        cluster,
        seed,
        launch_delay=launch_delay,
        restore_penalty=restore_penalty,
        throughput=throughput,
        round_seconds=round_seconds,
    )
    params = parse_policy_args(policy_arg)
    if explain and params.get("estimator") != "primo":
        raise InputError("--explain needs a size-based policy with estimator=primo", field="--explain")
    spec = settled.spec(
        policy,
        params,
        seed=seed,
        energy=energy_spec(energy, energy_arg),
        window=parse_window(window, len(settled.workload)),
        record=frozenset({"explanations"}) if explain else frozenset(),
    )
    show_notes(spec, quiet or as_json)
    output_dir(out)
    result = run_with_progress(spec, quiet or as_json, workers, backend)
    summary = result.write(out) if out is not None else result.summary
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    elif not quiet:
        show_summary(summary, result, out)
        console.print(settled.line(), highlight=False, soft_wrap=True)
    if summary.get("jobs_unfinished") and not allow_unfinished:
        raise typer.Exit(EXIT_UNFINISHED)


def show_summary(summary: dict[str, Any], result: RunResult, out: Path | None) -> None:
    console.print(summary_table(summary))
    if summary.get("queues"):
        console.print(queue_table(summary))
    if summary.get("jobs_unfinished"):
        console.print(
            f"[yellow]{summary['jobs_unfinished']} job(s) never finished[/]: the averages cover completed jobs only "
            "(exit status 3; --allow-unfinished accepts it)",
            highlight=False,
        )
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
        for warning in summary.get("energy_warnings") or ():
            console.print(f"[yellow]CES:[/] {warning}", highlight=False)
    rejections = result.rejections
    if rejections:
        shown = ", ".join(f"{r.job_id} ({r.reason})" for r in rejections[:5])
        more = f" and {len(rejections) - 5} more" if len(rejections) > 5 else ""
        console.print(f"[yellow]{len(rejections)} job(s) rejected:[/] {shown}{more}", highlight=False)
    if out is not None:
        console.print(f"wrote {out / 'summary.json'}, {out / 'jobs.csv'}, {out / 'rejected.csv'}", highlight=False)
