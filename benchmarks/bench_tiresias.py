"""Tiresias speed: the whole Philly trace on its VCs, and 4,000 Philly jobs on one cluster.

    python benchmarks/bench_tiresias.py [--trace PATH|NAME] [--cluster YAML|NAME] [--jobs 4000] [--nodes 64]

Runs ``tiresias`` with its defaults (the reference simulator's ``dlas-gpu``: queue limits
3,250 and 7,200 GPU-seconds, exact demotion instants, no periodic timer) and no restore
penalty (the reference charges none):

* over the whole Philly trace (bundled ``philly``) on its 11 virtual clusters (bundled
  ``philly-vcs``); goal under 30 s of simulation;
* over the first ``--jobs`` jobs by submit time on ``--nodes`` x 8 GPUs, one partition
  (virtual-cluster labels ignored); goal under 1 s of simulation.

Prints the wall and CPU seconds of each simulation (job list built beforehand), its
events, decisions and preemptions, and whether each goal is met. The goals are judged on
CPU seconds, which other processes on a shared machine inflate less than wall time.
"""

from __future__ import annotations

import argparse
import sys
import time

from shapeshift.analysis.metrics import summarize
from shapeshift.cluster import load_cluster, shorthand_cluster
from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec, JobSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload
from shapeshift.workloads.workload import Workload

GOALS = {"whole Philly, 11 VCs": 30.0, "first jobs, one cluster": 1.0}


def _run(label: str, jobs: list[JobSpec], cluster: ClusterSpec) -> bool:
    start, cpu = time.perf_counter(), time.process_time()
    result = simulate(jobs, cluster, make_policy("tiresias"), overheads=Overheads(0.0, 0.0))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    s = summarize(result)
    goal = GOALS[label]
    print(
        f"{label:24} {len(result.jobs):6d} jobs  wall {wall:6.2f} s  CPU {cpu:6.2f} s"
        f" (goal < {goal:g} s: {'met' if cpu < goal else 'MISSED'})  events {result.events}"
        f"  decisions {s['decisions']}  preemptions {s['preemptions']}  avg JCT {s['avg_jct']:.1f} s"
    )
    return cpu < goal


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="philly", help="Philly trace file or data set name (default: philly)")
    parser.add_argument("--cluster", default="philly-vcs", help="cluster YAML or data set name (default: philly-vcs)")
    parser.add_argument("--jobs", default=4000, type=int)
    parser.add_argument("--nodes", default=64, type=int)
    args = parser.parse_args()
    try:
        full, vcs = read_workload(args.trace), load_cluster(args.cluster)
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2
    met = _run("whole Philly, 11 VCs", full.jobs(), vcs)
    sliced = Workload(f"philly-first-{args.jobs}", full.frame.iloc[: args.jobs].assign(vc="").reset_index(drop=True))
    met &= _run("first jobs, one cluster", sliced.jobs(), shorthand_cluster(args.nodes, 8))
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
