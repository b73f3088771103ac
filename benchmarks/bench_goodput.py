"""Goodput scheduling speed: the whole Pollux workload-6 and Pollux's decision time.

1. Simulates Pollux workload-6 (bundled data set ``pollux-workload6``: 160 jobs, 16 x 4
   GPUs, measured profiles with statistical efficiency from ``pollux-profiles``, 30 s
   restarts as the authors' simulator) under ``pollux`` with 60 s rounds and prints
   the wall time and the average JCT (the original Pollux simulator needs tens of
   minutes for this trace). Goal: under 60 s on the 2-core machine.
2. Decision time of ``pollux`` with 160 jobs on 64 GPUs: all of workload-6 submitted at
   once, jobs placed and run for ``--warm`` rounds of 60 s (so jobs hold GPUs, have
   progress and restart history), then ``--repeat`` more rounds each timed; p50 / p99.

    python benchmarks/bench_goodput.py [--policy pollux] [--param search=exact] [--repeat 50] [--skip-workload]

``--param k=v`` (repeatable) passes a policy parameter to both, e.g. ``search=exact`` for
Pollux's exact search (its default is the source's genetic search, about 10x the CPU).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from shapeshift import datasets
from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.engine import Engine
from shapeshift.engine.overheads import Overheads
from shapeshift.perf.pollux.ground_truth import PolluxGroundTruth
from shapeshift.policies.framework.registry import make_policy
from shapeshift.runs import RunSpec, ThroughputSpec, run
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor
from shapeshift.workloads.readers import read_workload

WORKLOAD = "pollux-workload6"
PROFILES = "pollux-profiles"


def whole_workload(policy: str, round_seconds: float, params: dict[str, str]) -> None:
    workload = read_workload(WORKLOAD)
    spec = RunSpec(
        workload=workload,
        cluster=shorthand_cluster(16, 4),
        policy=policy,
        params=(("round", round_seconds), *sorted(params.items())),
        overheads=Overheads(30.0, 30.0),
        throughput=ThroughputSpec("pollux", str(datasets.locate(PROFILES))),
    )
    t0 = time.perf_counter()
    result = run(spec)
    wall = time.perf_counter() - t0
    s = result.summary
    print(
        f"{policy} on workload-6, {round_seconds:g} s rounds: {wall:.1f} s wall "
        f"({s['decisions']} decisions), average JCT {s['avg_jct'] / 3600:.3f} h"
    )


def decision_time(policy_name: str, warm: int, repeat: int, params: dict[str, str]) -> None:
    jobs = [replace(j, submit_time=0.0) for j in read_workload(WORKLOAD).jobs()]
    policy = make_policy(policy_name, {"profiles": str(datasets.locate(PROFILES)), **params})
    truth = PolluxGroundTruth(datasets.locate(PROFILES))
    engine = Engine(shorthand_cluster(16, 4), policy, SimulatedExecutor(truth, CompletionQueue()), Overheads(30, 30))
    for spec in jobs:
        engine.submit(spec, 0.0)
    times = []
    for k in range(warm + repeat):
        now = 60.0 * (k + 1)
        engine.fire_timer()
        t0 = time.perf_counter()
        engine.step(now)
        if k >= warm:
            times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1000
    running = len(engine.allocations)
    pending = sum(len(p) for p in engine.pending.values())
    print(f"{policy_name}: {running} running + {pending} pending jobs on 64 GPUs")
    p50, p99 = np.percentile(ms, 50), np.percentile(ms, 99)
    print(f"decision time over {len(ms)} rounds: p50 {p50:.1f} ms, p99 {p99:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="pollux")
    ap.add_argument("--round", type=float, default=60.0)
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--skip-workload", action="store_true")
    ap.add_argument("--param", action="append", default=[], metavar="K=V", help="a policy parameter (repeatable)")
    args = ap.parse_args()
    params = dict(p.split("=", 1) for p in args.param)
    if not args.skip_workload:
        whole_workload(args.policy, args.round, params)
    decision_time(args.policy, args.warm, args.repeat, params)


if __name__ == "__main__":
    main()
