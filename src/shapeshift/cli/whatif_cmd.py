"""``shapeshift whatif``: a Slurm site's history replayed under Slurm's rules and others.

Reads an ``sacct --parsable2`` history and the site's ``slurm.conf`` (and optionally an
``sacctmgr show assoc -P`` dump), then writes the comparison, the slurm replay's agreement
with the record, per-account and per-partition figures and a short report
(``shapeshift.slurm.whatif``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from shapeshift.cli.common import console, guarded, output_dir, progress_bar, show_progress
from shapeshift.errors import InputError

__all__ = ["command"]


def _policy_args(items: list[str] | None, policies: list[str]) -> dict[str, dict[str, str]]:
    """``POLICY:key=value`` items -> parameters per policy."""
    result: dict[str, dict[str, str]] = {}
    for item in items or []:
        name, sep, rest = item.partition(":")
        key, eq, value = rest.partition("=")
        if not sep or not eq or not key.strip():
            raise InputError(f"--policy-arg {item!r} must look like POLICY:key=value", field="--policy-arg")
        if name not in policies:
            raise InputError(f"--policy-arg {item!r} names a policy not given with --policy", field="--policy-arg")
        result.setdefault(name, {})[key.strip()] = value.strip()
    return result


@guarded
def command(
    sacct: Annotated[
        Path, typer.Option("--sacct", help="sacct --parsable2 history (JobID|Submit|Start|End|State|...).")
    ],
    slurm_conf: Annotated[
        Path, typer.Option("--slurm-conf", help="The site's slurm.conf (gres.conf beside it is read).")
    ],
    out: Annotated[Path, typer.Option("--out", help="Directory for comparison.csv, agreement.json, report.md, ...")],
    policy: Annotated[
        list[str] | None, typer.Option("--policy", help="A policy to replay (repeatable; default: slurm).")
    ] = None,
    assoc: Annotated[
        Path | None, typer.Option("--assoc", help="sacctmgr show assoc -P dump (the fair-share tree).")
    ] = None,
    qos: Annotated[
        Path | None, typer.Option("--qos", help="sacctmgr show qos -P dump (the QOS priorities).")
    ] = None,
    policy_arg: Annotated[
        list[str] | None, typer.Option("--policy-arg", help="POLICY:key=value, a parameter of one policy (repeatable).")
    ] = None,
    zone: Annotated[
        str | None,
        typer.Option("--zone", help="The site's time zone (IANA, e.g. Europe/Berlin) for times without an offset."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    """Replay a Slurm history under Slurm's own rules and under other policies."""
    from shapeshift.slurm.whatif import whatif

    policies = list(policy or ["slurm"])
    args = _policy_args(policy_arg, policies)
    target = output_dir(out)
    assert target is not None
    with progress_bar("replays", show_progress(quiet)) as update:
        outcome = whatif(
            sacct,
            slurm_conf,
            policies,
            assoc=assoc,
            qos=qos,
            policy_args=args,
            out=target,
            progress=update,
            zone=zone,
        )
    if quiet:
        return
    table = Table(title=f"what if: {sacct.name}")
    shown = ("avg_jct", "avg_queue", "p99_queue", "makespan", "gpu_utilization")
    table.add_column("source")
    for key in shown:
        table.add_column(key, justify="right")
    for source, summary in outcome.summaries.items():
        table.add_row(source, *("" if summary.get(k) is None else f"{summary[k]:g}" for k in shown))
    console.print(table)
    agree = outcome.agreement
    if agree and agree.get("jobs_compared"):
        console.print(
            f"slurm replay vs record: {agree['within_5s']:.1%} within 5 s, {agree['within_60s']:.1%} within 60 s, "
            f"median {agree['median_abs_diff_s']} s, P90 {agree['p90_abs_diff_s']} s, "
            f"same order {agree['same_order_share']:.1%}"
            + (f"; {missing} recorded job(s) never started" if (missing := agree.get("jobs_only_recorded")) else "")
        )
    for note in outcome.notes:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)
    console.print(
        f"wrote {target}/comparison.csv, agreement.json, by_account.csv, by_partition.csv, starts.csv, report.md"
    )
