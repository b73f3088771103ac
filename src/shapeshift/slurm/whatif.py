"""What if: a Slurm site's own history, replayed under Slurm's rules and under others.

``whatif(sacct, slurm_conf, policies=["slurm", "fifo", ...])`` reads the history and the
configuration, summarises what really happened (``recorded``: the same metrics a
simulation reports, from the recorded Start and End), simulates each policy on the same
jobs and cluster, and measures how closely the ``slurm`` replay agrees with the record,
job by job (``agreement``). If the replay disagrees with the site's own history, the
alternatives are compared with a model of Slurm that is off by that much, and the
report says so first.

Files written to ``out``: ``comparison.csv`` (a ``source`` column, ``recorded`` first,
then the summary's metric columns), ``agreement.json``, ``by_account.csv`` and
``by_partition.csv`` (per source: jobs, mean/median/P90 wait, mean JCT, GPU-hours),
``starts.csv`` (each job's recorded and replayed starts) and ``report.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shapeshift.errors import InputError

GROUP_COLUMNS = ("source", "group", "jobs", "avg_wait", "p50_wait", "p90_wait", "avg_jct", "gpu_hours")
#: ``comparison.csv``'s columns after the summary's metrics: jobs refused at submission
#: (Slurm's submit limits, ``policies/slurm/submit_limits.py``) and the slurm replay's
#: preemptions by kind (empty where a source has none).
EXTRA_COLUMNS = ("jobs_rejected", "slurm_preempt_requeued", "slurm_preempt_cancelled")


@dataclass
class WhatIf:
    """The outcome: summaries per source, the slurm replay's agreement, per-group tables."""

    summaries: dict[str, dict[str, Any]]
    agreement: dict[str, Any] | None
    starts: Any  # pandas DataFrame: job_id, submit, recorded, <source>...
    by_account: Any
    by_partition: Any
    notes: list[str] = field(default_factory=list)

    def table(self) -> Any:
        import pandas as pd

        from shapeshift.runs.result_columns import COMPARE_KEYS

        keys = (*COMPARE_KEYS, *EXTRA_COLUMNS)
        rows = [{"source": s, **{k: v.get(k) for k in keys}} for s, v in self.summaries.items()]
        return pd.DataFrame(rows)


def _recorded_summary(workload: Any, cluster: Any) -> dict[str, Any]:
    """The summary metrics of what really happened: each job as completed at its
    recorded End after running from its recorded Start."""
    from shapeshift.analysis.metrics import summarize
    from shapeshift.engine.state import JobState, JobStatus
    from shapeshift.sim.simulator import SimulationResult

    frame = workload.frame.set_index("job_id")
    statuses = []
    for spec in workload.jobs():
        start, end = float(frame.at[spec.job_id, "start_time"]), float(frame.at[spec.job_id, "end_time"])
        run = end - start
        statuses.append(
            JobStatus(
                spec=spec,
                partition=spec.vc,
                state=JobState.COMPLETED,
                first_start=start,
                started_at=start,
                end_time=end,
                run_seconds=run,
                attained=run * spec.num_gpus,
            )
        )
    result = SimulationResult("recorded", workload.name, cluster, statuses, [], 0, 0, 0.0)
    return summarize(result)


def _groups(frame: Any, column: str, source: str) -> list[dict[str, Any]]:
    rows = []
    for name, group in frame.groupby(column, sort=True):
        wait = group["start"] - group["submit"]
        jct = group["end"] - group["submit"]
        rows.append(
            {
                "source": source,
                "group": name,
                "jobs": len(group),
                "avg_wait": round(float(wait.mean()), 3),
                "p50_wait": round(float(wait.median()), 3),
                "p90_wait": round(float(wait.quantile(0.9)), 3),
                "avg_jct": round(float(jct.mean()), 3),
                "gpu_hours": round(float(((group["end"] - group["start"]) * group["gpus"]).sum() / 3600), 3),
            }
        )
    return rows


def whatif(
    sacct: str | Path,
    slurm_conf: str | Path,
    policies: Sequence[str] = ("slurm",),
    *,
    assoc: str | Path | None = None,
    qos: str | Path | None = None,
    policy_args: Mapping[str, Mapping[str, Any]] | None = None,
    out: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    zone: str | None = None,
) -> WhatIf:
    """Replay ``sacct`` on ``slurm_conf``'s cluster under each of ``policies`` (see the
    module docstring); ``policy_args`` maps a policy name to its parameters.
    ``progress(done, total)`` is called before the first replay and after each one.
    ``zone``: the site's time zone (an IANA name, ``Europe/Berlin``) for a history whose
    times carry no offset (sacct's default), so that runs across the spring change keep
    their length (a time in the autumn's repeated hour is read as its first occurrence);
    without it such times are read as UTC."""
    import pandas as pd

    from shapeshift.runs.facade import simulate
    from shapeshift.slurm.agreement import agreement
    from shapeshift.slurm.cluster import cluster_of
    from shapeshift.slurm.conf import read_slurm_conf
    from shapeshift.workloads.readers.sacct import read_sacct_notes

    if not policies:
        raise InputError("whatif needs at least one --policy", field="policy")
    if len(set(policies)) != len(policies):
        raise InputError("a --policy is named twice", field="policy")
    workload, sacct_notes = read_sacct_notes(sacct, _zone(zone))
    conf = read_slurm_conf(slurm_conf)
    cluster = cluster_of(conf)
    notes = sacct_notes.lines()
    ignored = conf.ignored_note()
    if ignored:
        notes.append(ignored)
    jobs = workload.jobs()
    cpu_only = workload.cpu_only_count
    if cpu_only:
        notes.append(f"{cpu_only} CPU-only job(s) left out of the replays and the recorded summary")
    kept = {j.job_id for j in jobs}
    frame = workload.frame[workload.frame["job_id"].isin(kept)]
    frame, type_note = _asked_types(frame, conf)
    if type_note:
        notes.append(type_note)
    gpu_workload = type(workload).from_frame(workload.name, frame)
    summaries = {"recorded": _recorded_summary(gpu_workload, cluster)}
    used = summaries["recorded"].get("gpu_utilization")
    if used is not None and used > 1:
        notes.append(
            f"the history kept more GPUs busy than the configuration has (recorded GPU utilisation "
            f"{used:.2f}): the slurm.conf given may not be the cluster the history ran on"
        )
    base = pd.DataFrame(
        {
            "job_id": frame["job_id"].to_numpy(),
            "submit": frame["submit_time"].to_numpy(),
            "gpus": frame["num_gpus"].to_numpy(),
            "account": frame["tenant"].to_numpy(),
            "partition": frame["vc"].to_numpy(),
        }
    )
    recorded = base.assign(start=frame["start_time"].to_numpy(), end=frame["end_time"].to_numpy())
    starts = base[["job_id", "submit"]].assign(recorded=recorded["start"])
    by_account = _groups(recorded, "account", "recorded")
    by_partition = _groups(recorded, "partition", "recorded")
    agree = None
    if progress is not None:
        progress(0, len(policies))
    for done, name in enumerate(policies, 1):
        params = dict((policy_args or {}).get(name, {}))
        if name == "slurm":
            params.setdefault("clock_origin", sacct_notes.origin)
            if assoc is not None:
                params.setdefault("assoc", str(assoc))
            if qos is not None:
                params.setdefault("qos", str(qos))
        result = simulate(gpu_workload, cluster, name, params=params)
        summaries[name] = result.summary
        notes += rejection_notes(name, result.rejections)
        sim = result.jobs.set_index("job_id")
        run = base.assign(  # floats: a replay that starts no job has a column of None
            start=sim.loc[base["job_id"], "first_start_time"].to_numpy(dtype=float),
            end=sim.loc[base["job_id"], "end_time"].to_numpy(dtype=float),
        )
        starts[name] = run["start"].to_numpy()
        by_account += _groups(run, "account", name)
        by_partition += _groups(run, "partition", name)
        if name == "slurm":
            agree = agreement(
                dict(zip(starts["job_id"], starts["recorded"], strict=True)),
                dict(zip(starts["job_id"], run["start"], strict=True)),
            )
        if progress is not None:
            progress(done, len(policies))
    outcome = WhatIf(summaries, agree, starts, pd.DataFrame(by_account), pd.DataFrame(by_partition), notes)
    if out is not None:
        write(outcome, Path(out))
    return outcome


def _asked_types(frame: Any, conf: Any) -> tuple[Any, str | None]:
    """The jobs' asked GPU types (``gpu_types``) spelt as the configuration spells them
    (sacct's ``ReqTRES`` may use another case), or dropped, with a note, where the
    configuration names no GPU type at all (``Gres=gpu:N``, or types left to gres.conf's
    ``AutoDetect``): then no node could match, and every typed job would be refused."""
    typed = frame["gpu_types"].astype(bool) if "gpu_types" in frame.columns else None
    if typed is None or not typed.any():
        return frame, None
    named = {node.gpu_type.lower(): node.gpu_type for node in conf.nodes if node.gpu_type}
    if not named:
        asked = sorted({t for cell in frame["gpu_types"] for t in cell.split("|") if t})
        note = (
            f"{int(typed.sum())} job(s) asked for a GPU type ({', '.join(asked[:3])}), "
            "but the configuration names none: the replays place them on any GPU"
        )
        return frame.drop(columns="gpu_types"), note

    def spelt(cell: str) -> str:
        return "|".join(named.get(t.lower(), t) for t in cell.split("|")) if cell else cell

    return frame.assign(gpu_types=frame["gpu_types"].map(spelt)), None


def _zone(name: str | None) -> Any:
    """The ``tzinfo`` of an IANA zone name (``None`` for none)."""
    if name is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        message = f"unknown time zone {name!r}; expected an IANA name such as Europe/Berlin"
        raise InputError(message, field="zone") from None


#: Reasons for refused jobs named one per line in the notes; the rest are summed.
_REASONS_SHOWN = 10


def rejection_notes(policy: str, rejections: Sequence[Any]) -> list[str]:
    """One line per reason a replay refused jobs (an unknown partition, a request no node
    can hold, a submit limit), with how many and the first few jobs: a refused job never
    starts, and the comparison would otherwise show only a count."""
    by_reason: dict[str, list[str]] = {}
    for rejection in rejections:
        by_reason.setdefault(rejection.reason, []).append(rejection.job_id)
    groups = list(by_reason.items())
    lines = []
    for reason, jobs in groups[:_REASONS_SHOWN]:
        shown = ", ".join(jobs[:3]) + (", ..." if len(jobs) > 3 else "")
        lines.append(f"{policy}: {len(jobs)} job(s) refused: {reason} (job {shown})")
    rest = [jobs for _, jobs in groups[_REASONS_SHOWN:]]
    if rest:
        lines.append(f"{policy}: {sum(map(len, rest))} more job(s) refused for {len(rest)} other reason(s)")
    return lines


def write(outcome: WhatIf, out: Path) -> None:
    from shapeshift.slurm.whatif_report import report_text

    out.mkdir(parents=True, exist_ok=True)
    outcome.table().to_csv(out / "comparison.csv", index=False)
    (out / "agreement.json").write_text(json.dumps(outcome.agreement, indent=2) + "\n")
    outcome.by_account.rename(columns={"group": "account"}).to_csv(out / "by_account.csv", index=False)
    outcome.by_partition.rename(columns={"group": "partition"}).to_csv(out / "by_partition.csv", index=False)
    outcome.starts.to_csv(out / "starts.csv", index=False)
    (out / "report.md").write_text(report_text(outcome))
