"""Every registered policy on a 2,000-job slice of the Philly trace, 64 nodes x 8 GPUs.

    python benchmarks/bench_policies.py [--trace PATH|NAME] [--jobs 2000] [--nodes 64] [--policies a,b]
                                        [--penalty 30] [--full-philly NAME]

The trace defaults to the bundled ``philly`` data set. The slice is its first ``--jobs``
jobs by submit time, on one unpartitioned cluster (virtual-cluster labels ignored).
Prints the wall seconds of each simulation and the metrics table. Goal on the project's
2-core machine: every policy under 20 s.

``--full-philly sjf`` additionally runs that policy over the whole trace on its virtual
clusters (the bundled ``philly-vcs`` cluster), the scale of the Helios comparisons.
"""

from __future__ import annotations

import argparse
import sys
import time

from shapeshift.analysis.metrics import summarize
from shapeshift.cluster import load_cluster, shorthand_cluster
from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.policies.framework.registry import make_policy, registry
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload
from shapeshift.workloads.workload import Workload

GOAL_SECONDS = 20.0


def _h(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:8.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="philly", help="Philly trace file or data set name (default: philly)")
    parser.add_argument("--jobs", default=2000, type=int)
    parser.add_argument("--nodes", default=64, type=int)
    parser.add_argument("--policies", default="")
    parser.add_argument("--penalty", default="30")
    parser.add_argument("--full-philly", default="", help="also run this policy on the whole trace on philly-vcs")
    args = parser.parse_args()
    try:
        full = read_workload(args.trace)
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2
    sliced = Workload(f"philly-first-{args.jobs}", full.frame.iloc[: args.jobs].reset_index(drop=True))
    jobs = sliced.jobs()
    cluster = shorthand_cluster(args.nodes, 8)
    overheads = Overheads(0.0, Overheads.parse_penalty(args.penalty))
    names = [p for p in args.policies.split(",") if p] or list(registry())
    span = jobs[-1].submit_time - jobs[0].submit_time
    where = f"{args.nodes} x 8 GPUs, restore penalty {args.penalty}"
    print(f"{len(jobs)} Philly jobs over {span / 86400:.1f} days on {where}")
    header = (
        f"{'policy':10} {'wall s':>7} {'decisions':>9} {'avg JCT h':>9} {'p99 JCT h':>9} {'avg queue h':>11} "
        f"{'resp. h':>8} {'makespan h':>10} {'util %':>6} {'preempt':>7} {'reconf':>6}"
    )
    print(header)
    print("-" * len(header))
    slow = []
    for name in names:
        start = time.perf_counter()
        result = simulate(jobs, cluster, make_policy(name), workload_name=sliced.name, overheads=overheads)
        wall = time.perf_counter() - start
        s = summarize(result)
        if wall >= GOAL_SECONDS:
            slow.append(name)
        print(
            f"{name:10} {wall:7.2f} {s['decisions']:9d} {_h(s['avg_jct']):>9} {_h(s['p99_jct']):>9} "
            f"{_h(s['avg_queue']):>11} {_h(s['avg_responsiveness']):>8} {_h(s['makespan']):>10} "
            f"{s['gpu_utilization'] * 100:6.1f} {s['preemptions']:7d} {s['reconfigurations']:6d}"
        )
    print(f"goal: every policy under {GOAL_SECONDS:.0f} s; " + (f"over: {', '.join(slow)}" if slow else "all met"))

    if args.full_philly:
        vcs = load_cluster("philly-vcs")
        start = time.perf_counter()
        result = simulate(full.jobs(), vcs, make_policy(args.full_philly), workload_name=full.name, overheads=overheads)
        wall = time.perf_counter() - start
        s = summarize(result)
        print(
            f"full Philly ({len(result.jobs)} jobs, 11 VCs) under {args.full_philly}: {wall:.2f} s, "
            f"{s['decisions']} decisions, avg JCT {_h(s['avg_jct']).strip()} h"
        )
    return 1 if slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
