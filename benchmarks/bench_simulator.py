"""FIFO + consolidated placement over the whole Philly trace on its virtual clusters.

    python benchmarks/bench_simulator.py [--trace PATH] [--cluster PATH]

Prints jobs, events, wall seconds (read, build, simulate) and peak memory. Goal on a
2-core machine: under 30 s and under 2 GB.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

from shapeshift.cluster import load_cluster
from shapeshift.policies.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default=SHARED / "data/philly/philly_jobs.csv", type=Path)
    parser.add_argument("--cluster", default=SHARED / "examples/cluster-philly-vcs.yaml", type=Path)
    parser.add_argument("--policy", default="fifo")
    args = parser.parse_args()
    if not args.trace.exists():
        print(f"trace {args.trace} not found (needs ../shared/data)", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    workload = read_workload(args.trace)
    t1 = time.perf_counter()
    jobs = workload.jobs()
    cluster = load_cluster(args.cluster)
    t2 = time.perf_counter()
    result = simulate(jobs, cluster, make_policy(args.policy), workload_name=workload.name)
    t3 = time.perf_counter()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    completed = sum(1 for j in result.jobs if j.state.value == "completed")
    print(f"policy            {args.policy} (consolidated placement)")
    print(f"jobs              {len(jobs)} ({completed} completed, {len(result.rejections)} rejected)")
    print(f"events            {result.events}")
    print(f"decisions         {result.decisions}")
    print(f"read trace        {t1 - t0:6.2f} s")
    print(f"build jobs        {t2 - t1:6.2f} s")
    print(f"simulate          {t3 - t2:6.2f} s  ({result.events / (t3 - t2):,.0f} events/s)")
    print(f"total wall        {t3 - t0:6.2f} s  (goal < 30 s: ratio {(t3 - t0) / 30:.2f})")
    print(f"peak memory       {peak_mb:6.0f} MB (goal < 2048 MB: ratio {peak_mb / 2048:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
