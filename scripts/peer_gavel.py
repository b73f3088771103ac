"""Per-job agreement with Gavel's own simulator (``max_min_fairness_perf``).

    python scripts/peer_gavel.py --gavel DIR --gavel-log LOG [--cluster 8:8:8] [--params k=v,...]
    python scripts/peer_gavel.py --gavel DIR --to-workload OUT.csv      # Gavel trace -> ours
    python scripts/peer_gavel.py --gavel DIR --to-gavel-trace OUT.trace --workload IN.csv

``DIR`` is Gavel's ``scheduler/`` directory (stanford-futuredata/gavel, run outside this
repository; docs/peer-agreement.md has the steps), ``LOG`` the output of its
``scripts/drivers/simulate_scheduler_with_trace.py -p max_min_fairness_perf`` on the same
trace and cluster.

Conversion, Gavel -> ours: one job per trace line, ``job_id`` = Gavel's job id (line number
from 0), ``submit_time`` = its arrival time, ``num_gpus`` = its scale factor, ``model`` = its
job type, a ``speed_<TYPE>`` column per GPU type with Gavel's isolated throughput of
(job type, scale factor) from ``simulation_throughputs.json`` (steps/s), and ``duration`` =
total steps / the fastest of those throughputs (the run time on its fastest type, as our
``generic`` format defines it). Ours -> Gavel: the inverse, for jobs whose ``model`` is a
Gavel job type: ``total_steps`` = round(duration x fastest throughput).

The cluster is ``V:P:K`` GPUs of V100, P100 and K80 on one-GPU servers (Gavel's default
``--num_gpus_per_server 1:1:1``). Ours runs ``gavel`` with its defaults (plus ``--params``)
and no launch or restore overheads (Gavel's simulator has none). Prints both average JCTs
and the share of jobs whose JCTs agree within 1 s, 1% and 5%.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.engine.overheads import Overheads
from shapeshift.model import ClusterSpec, JobSpec, NodeSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate

#: Gavel's worker type names and ours.
TYPES = {"v100": "V100", "p100": "P100", "k80": "K80"}
TRACE_COLUMNS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "SLO",
    "arrival_time",
)


def read_throughputs(gavel: Path) -> dict[tuple[str, int], dict[str, float]]:
    """(job type, scale factor) -> our GPU type -> isolated throughput (steps/s)."""
    raw = json.loads((gavel / "simulation_throughputs.json").read_text())
    table: dict[tuple[str, int], dict[str, float]] = {}
    for worker, ours in TYPES.items():
        for key, values in raw[worker].items():
            match = re.fullmatch(r"\('(.*)', (\d+)\)", key)
            if match:
                table.setdefault((match.group(1), int(match.group(2))), {})[ours] = float(values["null"])
    return table


def gavel_to_workload(trace: Path, throughputs: dict[tuple[str, int], dict[str, float]]) -> pd.DataFrame:
    """Gavel's tab-separated trace as our ``generic`` workload (module docstring)."""
    rows = []
    for i, line in enumerate(trace.read_text().splitlines()):
        fields = dict(zip(TRACE_COLUMNS, line.split("\t"), strict=True))
        scale = int(fields["scale_factor"])
        speed = throughputs[(fields["job_type"], scale)]
        row = {
            "job_id": str(i),
            "submit_time": float(fields["arrival_time"]),
            "num_gpus": scale,
            "duration": int(fields["total_steps"]) / max(speed.values()),
            "model": fields["job_type"],
        }
        row.update({f"speed_{t}": speed.get(t, 0.0) for t in TYPES.values()})
        rows.append(row)
    return pd.DataFrame(rows)


def workload_to_gavel(frame: pd.DataFrame, throughputs: dict[tuple[str, int], dict[str, float]]) -> list[str]:
    """Our workload (``model`` = a Gavel job type) as Gavel trace lines, in submit order."""
    lines = []
    for row in frame.sort_values("submit_time", kind="stable").itertuples():
        speed = throughputs[(str(row.model), int(row.num_gpus))]
        steps = round(float(row.duration) * max(speed.values()))
        fields = [str(row.model), "python3 train.py", ".", "--num_steps", "1", str(steps), str(int(row.num_gpus))]
        lines.append("\t".join([*fields, "1", "-1.000000", f"{float(row.submit_time):g}"]))
    return lines


def jobs_of(frame: pd.DataFrame) -> list[JobSpec]:
    speed_columns = [c for c in frame.columns if c.startswith("speed_")]
    return [
        JobSpec(
            job_id=str(row["job_id"]),
            submit_time=float(row["submit_time"]),
            num_gpus=int(row["num_gpus"]),
            duration=float(row["duration"]),
            model=str(row["model"]),
            gpu_speed=tuple(sorted((c.removeprefix("speed_"), float(row[c])) for c in speed_columns)),
        )
        for _, row in frame.iterrows()
    ]


def one_gpu_servers(spec: str) -> ClusterSpec:
    counts = [int(x) for x in spec.split(":")]
    nodes = [
        NodeSpec(name=f"{t.lower()}-{i:03d}", gpus=1, cpus=8, mem_gb=64, gpu_type=t)
        for t, n in zip(TYPES.values(), counts, strict=True)
        for i in range(n)
    ]
    return ClusterSpec(tuple(nodes))


def read_gavel_jcts(log: Path) -> pd.DataFrame:
    """``Job N: JCT`` lines printed by Gavel's ``get_average_jct``."""
    found = re.findall(r"^Job (\d+): ([0-9.]+)$", log.read_text(), flags=re.M)
    return pd.DataFrame({"job_id": [a for a, _ in found], "jct_gavel": [float(b) for _, b in found]})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gavel", required=True, type=Path, help="Gavel's scheduler/ directory")
    parser.add_argument("--trace", type=Path, default=None, help="Gavel trace (default: its max_min_fairness.trace)")
    parser.add_argument("--gavel-log", type=Path, help="output of Gavel's simulate_scheduler_with_trace.py")
    parser.add_argument("--cluster", default="8:8:8", help="V100:P100:K80 GPUs")
    parser.add_argument("--params", default="", help="gavel policy parameters, k=v,k=v")
    parser.add_argument("--to-workload", type=Path, help="write the trace as our workload CSV and stop")
    parser.add_argument("--to-gavel-trace", type=Path, help="write --workload as a Gavel trace and stop")
    parser.add_argument("--workload", type=Path, help="our workload CSV (for --to-gavel-trace)")
    parser.add_argument("--per-job", type=Path, help="write the paired per-job JCTs here")
    args = parser.parse_args()
    throughputs = read_throughputs(args.gavel)
    if args.to_gavel_trace:
        lines = workload_to_gavel(pd.read_csv(args.workload), throughputs)
        args.to_gavel_trace.write_text("\n".join(lines) + "\n")
        return 0
    trace = args.trace or args.gavel / "traces/physical_cluster/max_min_fairness.trace"
    frame = gavel_to_workload(trace, throughputs)
    if args.to_workload:
        frame.to_csv(args.to_workload, index=False)
        return 0
    params = dict(p.split("=", 1) for p in args.params.split(",") if p)
    policy = make_policy("gavel", params)
    result = simulate(jobs_of(frame), one_gpu_servers(args.cluster), policy, overheads=Overheads(0.0, 0.0))
    ours = pd.DataFrame(
        {
            "job_id": [j.spec.job_id for j in result.jobs],
            "jct_ours": [np.nan if j.end_time is None else j.end_time - j.spec.submit_time for j in result.jobs],
        }
    )
    print(f"ours: {result.wall_seconds:.2f} s of simulation, {getattr(policy, 'solves', 0)} LP solves")
    if args.gavel_log is None:
        print(f"average JCT (ours): {ours['jct_ours'].mean():.1f} s")
        return 0
    both = read_gavel_jcts(args.gavel_log).merge(ours, on="job_id")
    if args.per_job:
        both.to_csv(args.per_job, index=False)
    diff = (both["jct_ours"] - both["jct_gavel"]).abs()
    a, b = both["jct_gavel"].mean(), both["jct_ours"].mean()
    print(f"{len(both)} jobs paired of {len(frame)}")
    print(f"average JCT: Gavel {a:.1f} s, ours {b:.1f} s ({100 * (b - a) / a:+.2f}%)")
    within = {p: 100 * (diff <= p / 100 * both["jct_gavel"]).mean() for p in (1, 5)}
    print(f"jobs within 1 s: {100 * (diff <= 1).mean():.1f}%, within 1%: {within[1]:.1f}%, within 5%: {within[5]:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
