"""The Rubick paper's cluster experiment (Table 4) and its two sweeps, in simulation.

* ``base``: rubick, rubick-e, rubick-r, rubick-n, sia, synergy on ``workload-base``;
* ``bp``: rubick, sia, synergy on ``workload-bp`` (requested plans are the best plans);
* ``mt``: rubick, antman on ``workload-mt`` (tenant A with a 64-GPU quota owns the
  guaranteed jobs, B has none);

on 8 nodes x 8 A800 (the bundled ``rubick-a800``), jobs running their ``steps``
iterations, charged by :class:`~shapeshift.perf.ground_truth.GroundTruthModel` (the
bundled ``rubick-a800-tables``, fitted-model fallback), restore pause 78 s: the
``RUBICK_SETTING`` the bundled workloads carry, so ``simulate --workload rubick-base``
runs the same simulation as this table's row. Outputs: ``results.csv``
(one row per run), ``results.md`` (the table next to the paper's ratios) and the ratio of
every policy to ``rubick`` on the same workload.

Sweeps: ``load`` scales the arrival rate of the base trace (``rate`` x jobs per hour:
submit times divided by ``rate``; the paper's down-sampling rate), ``llm`` redraws the
base trace's jobs so that a given share are LLaMA jobs (each arrival slot takes, with a
seeded draw, a LLaMA job of the trace with probability ``share``, another job otherwise;
arrival times are kept).
"""

from __future__ import annotations

import csv
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from shapeshift import datasets
from shapeshift.cluster import load_cluster
from shapeshift.datasets.catalog import RUBICK_SETTING
from shapeshift.engine.contract import HasKnowledge
from shapeshift.engine.overheads import Overheads
from shapeshift.engine.state import JobState
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec, JobSpec
from shapeshift.runs import RunSpec, ThroughputSpec, run
from shapeshift.workloads.readers import read_workload
from shapeshift.workloads.workload import Workload

EXPERIMENTS: dict[str, tuple[str, ...]] = {
    "base": ("rubick", "rubick-e", "rubick-r", "rubick-n", "sia", "synergy"),
    "bp": ("rubick", "sia", "synergy"),
    "mt": ("rubick", "antman"),
}
#: Ratios of avg JCT to Rubick's reported by the paper (Table 4 / Sec. 6.2), for the table.
PAPER_RATIOS: dict[tuple[str, str], float] = {
    ("base", "rubick"): 1.0,
    ("base", "sia"): 2.6,
    ("base", "synergy"): 3.23,
    ("base", "rubick-e"): 2.5,
    ("base", "rubick-r"): 1.67,
    ("base", "rubick-n"): 3.23,
    ("mt", "rubick"): 1.0,
    ("mt", "antman"): 1.6,
}
PAPER_RUBICK_AVG_JCT_H = 0.96
#: Jobs per GPU for the policies that share GPUs (AntMan packs one opportunistic job
#: beside another job, paper Sec. 4); the others see the cluster file's limit (1).
SHARE_LIMITS: dict[str, int] = dict(RUBICK_SETTING.share_limits)
RESTORE_PENALTY = RUBICK_SETTING.restore_penalty
COLUMNS = (
    "workload",
    "variant",
    "policy",
    "jobs",
    "completed",
    "avg_jct_h",
    "p99_jct_h",
    "makespan_h",
    "avg_jct_guaranteed_h",
    "avg_jct_besteffort_h",
    "slo_attainment",
    "ratio_to_rubick",
    "paper_ratio",
    "preemptions",
    "reconfigurations",
    "policy_refits",
    "gt_table",
    "gt_table_cpu_scaled",
    "gt_fallback",
    "gt_infeasible",
    "shared_gpu_time_share",
    "sim_wall_s",
)


@dataclass(frozen=True)
class Paths:
    """Where the experiment's inputs are: the bundled data sets by default, or a copy of
    the artifact's data directory (``traces/``, ``workloads/``) and a cluster file.
    ``traces`` is a directory or a data set name, as ``--throughput ground-truth:`` takes it."""

    traces: str
    workloads: dict[str, Path]
    cluster: Path

    @classmethod
    def default(cls, data: str | Path | None = None, cluster: str | Path | None = None) -> Paths:
        if data:
            root = Path(data)
            for p, what in ((root / "traces", "traces directory"), (root / "workloads", "workloads directory")):
                if not p.is_dir():
                    raise InputError(f"{p}: {what} not found (--data takes a directory with traces/ and workloads/)")
            traces = str(root / "traces")
            workloads = {w: root / "workloads" / f"workload-{w}.csv" for w in EXPERIMENTS}
        else:
            traces = "rubick-a800-tables"
            workloads = {w: datasets.path(f"rubick-{w}") for w in EXPERIMENTS}
        spec = Path(cluster) if cluster else datasets.path("rubick-a800")
        if not spec.is_file():
            raise InputError(f"{spec}: cluster file not found (pass --cluster FILE)")
        return cls(traces, workloads, spec)


def load_jobs(paths: Paths, workload: str) -> list[JobSpec]:
    return read_workload(paths.workloads[workload], "rubick").jobs()


def cluster_for(paths: Paths, workload_jobs: Sequence[JobSpec]) -> ClusterSpec:
    """The experiment cluster; tenants only when the trace has guaranteed jobs."""
    cluster = load_cluster(paths.cluster)
    if not any(j.guaranteed for j in workload_jobs):
        cluster = replace(cluster, tenants={})
    return cluster


def spec_for(
    paths: Paths,
    jobs: Sequence[JobSpec],
    policy: str,
    workload: str,
    policy_args: dict[str, Any] | None = None,
) -> RunSpec:
    """The simulation of one table cell: the Rubick setting (``RUBICK_SETTING``) on ``jobs``."""
    cluster = cluster_for(paths, jobs)
    if policy in SHARE_LIMITS and (policy_args or {}).get("sharing", True):
        cluster = replace(cluster, gpu_share_limit=SHARE_LIMITS[policy])
    return RunSpec(
        workload=Workload.from_jobs(workload, list(jobs)),
        cluster=cluster,
        policy=policy,
        params=tuple({"traces": paths.traces, **(policy_args or {})}.items()),
        overheads=Overheads(0.0, RESTORE_PENALTY),
        throughput=ThroughputSpec("ground-truth", paths.traces),
    )


def run_one(
    paths: Paths,
    jobs: Sequence[JobSpec],
    policy: str,
    workload: str,
    variant: str = "",
    policy_args: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One simulation; returns a results row (hours for times)."""
    spec = spec_for(paths, jobs, policy, workload, policy_args)
    result = run(spec)
    s = result.summary
    done = [j for j in result.simulation.jobs if j.state is JobState.COMPLETED]

    def avg_h(sel: Callable[[JobSpec], bool]) -> float | None:
        v = [j.end_time - j.spec.submit_time for j in done if sel(j.spec)]
        return float(np.mean(v)) / 3600 if v else None

    calls = result.throughput.stats.as_dict()["calls"]
    knowledge = result.policy.knowledge if isinstance(result.policy, HasKnowledge) else None
    return {
        "workload": workload,
        "variant": variant or workload,
        "policy": policy,
        "jobs": len(jobs),
        "completed": s["jobs_completed"],
        "avg_jct_h": (s["avg_jct"] or 0) / 3600,
        "p99_jct_h": (s["p99_jct"] or 0) / 3600,
        "makespan_h": s["makespan"] / 3600,
        "avg_jct_guaranteed_h": avg_h(lambda j: j.guaranteed),
        "avg_jct_besteffort_h": avg_h(lambda j: not j.guaranteed),
        "slo_attainment": s["slo_attainment"],
        "preemptions": s["preemptions"],
        "reconfigurations": s["reconfigurations"],
        "policy_refits": knowledge.refits if knowledge is not None else 0,
        "gt_table": calls["table"],
        "gt_table_cpu_scaled": calls["table_cpu_scaled"],
        "gt_fallback": calls["fallback"],
        "gt_infeasible": calls["infeasible"],
        "shared_gpu_time_share": s.get("shared_gpu_time_share"),
        "sim_wall_s": result.simulation.wall_seconds,
    }


def add_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Avg JCT of every policy relative to rubick's on the same workload variant."""
    base = {r["variant"]: r["avg_jct_h"] for r in rows if r["policy"] == "rubick"}
    for r in rows:
        ref = base.get(r["variant"])
        r["ratio_to_rubick"] = r["avg_jct_h"] / ref if ref else None
        r["paper_ratio"] = PAPER_RATIOS.get((r["workload"], r["policy"])) if r["variant"] == r["workload"] else None
    return rows


def run_table4(
    paths: Paths,
    workloads: Sequence[str] = ("base", "bp", "mt"),
    policies: dict[str, Sequence[str]] | None = None,
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    rows = []
    for wl in workloads:
        if wl not in EXPERIMENTS:
            raise InputError(f"unknown workload {wl!r}; expected one of {', '.join(EXPERIMENTS)}")
        jobs = load_jobs(paths, wl)[:limit] if limit else load_jobs(paths, wl)
        for pol in (policies or EXPERIMENTS).get(wl, EXPERIMENTS[wl]):
            if progress:
                progress(f"{wl}: {pol}")
            rows.append(run_one(paths, jobs, pol, wl))
    return add_ratios(rows)


def scale_load(jobs: Sequence[JobSpec], rate: float) -> list[JobSpec]:
    """``rate`` times as many arrivals per hour: submit times divided by ``rate``."""
    if rate <= 0:
        raise InputError("load rate must be > 0")
    return [replace(j, submit_time=j.submit_time / rate) for j in jobs]


def llm_share(jobs: Sequence[JobSpec], share: float, seed: int = 0) -> list[JobSpec]:
    """Redraw jobs so that about ``share`` of them are LLaMA jobs (arrival slots kept)."""
    if not 0 <= share <= 1:
        raise InputError("LLaMA share must be within 0..1")
    llm = [j for j in jobs if j.model.lower().startswith("llama")]
    other = [j for j in jobs if not j.model.lower().startswith("llama")]
    rng = random.Random(seed)
    out = []
    for i, slot in enumerate(jobs):
        pool = llm if (rng.random() < share and llm) or not other else other
        src = rng.choice(pool)
        out.append(replace(src, job_id=f"{src.job_id}@{i}", name=f"{src.job_id}@{i}", submit_time=slot.submit_time))
    return out


def run_sweep(
    paths: Paths,
    kind: str,
    points: Sequence[float],
    policies: Sequence[str] = ("rubick", "sia", "synergy"),
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    base = load_jobs(paths, "base")
    rows = []
    for x in points:
        jobs = scale_load(base, x) if kind == "load" else llm_share(base, x)
        jobs = sorted(jobs, key=lambda j: j.submit_time)[:limit] if limit else jobs
        for pol in policies:
            if progress:
                progress(f"{kind}={x}: {pol}")
            rows.append(run_one(paths, jobs, pol, "base", variant=f"{kind}={x:g}"))
    return add_ratios(rows)


def write_results(rows: Sequence[dict[str, Any]], path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        w = csv.writer(handle)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([_fmt(r.get(c)) for c in COLUMNS])


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """Table 4 as markdown: ours next to the paper's ratio."""
    head = (
        "| workload | policy | avg JCT (h) | P99 JCT (h) | makespan (h) | guaranteed / best-effort avg (h) "
        "| SLO attainment | ratio to rubick | paper ratio |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        ge = ""
        if r.get("avg_jct_guaranteed_h") is not None:
            ge = f"{r['avg_jct_guaranteed_h']:.2f} / {r['avg_jct_besteffort_h'] or 0:.2f}"
        slo = "" if r.get("slo_attainment") is None else f"{r['slo_attainment']:.4f}"
        ratio = "" if r.get("ratio_to_rubick") is None else f"{r['ratio_to_rubick']:.2f}x"
        paper = "" if r.get("paper_ratio") is None else f"{r['paper_ratio']:.2f}x"
        # Averages cover completed jobs only: say so loudly when some never finished.
        missing = int(r["jobs"]) - int(r["completed"])
        policy = r["policy"] + (f" ({missing} of {r['jobs']} jobs unfinished)" if missing else "")
        lines.append(
            f"| {r['variant']} | {policy} | {r['avg_jct_h']:.2f} | {r['p99_jct_h']:.2f} | {r['makespan_h']:.2f} "
            f"| {ge} | {slo} | {ratio} | {paper} |"
        )
    return head + "\n".join(lines) + "\n"
