"""Decision time of the plan-aware policies: one ``decide`` with 400 jobs on 64 GPUs.

Builds an engine on the 8 x 8 A800 cluster (bundled ``rubick-a800``), submits 400 jobs
drawn (seeded) from ``rubick-mt`` (guaranteed and best-effort, every model), lets the policy place the first
ones, then times repeated decisions over the same state (a fresh arrival each time, so
the policy sees a new pending job); speeds come from the bundled ``rubick-a800-tables``.
Curves are warm after the first decision, which is what a running scheduler sees; the
cold first decision (fitting the 7-row samples) is printed separately.

    python benchmarks/bench_rubick_decision.py [--policy rubick] [--repeat 50]

Requirement: p50 and p99 under 200 ms.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import replace

import numpy as np

from shapeshift import datasets
from shapeshift.cluster import load_cluster
from shapeshift.engine.engine import Engine
from shapeshift.engine.overheads import Overheads
from shapeshift.perf.ground_truth import GroundTruthModel
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.executor import CompletionQueue, SimulatedExecutor
from shapeshift.workloads.readers import read_workload

TABLES = "rubick-a800-tables"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="rubick")
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--legacy", action="store_true", help="rubick with every rule of ours on (rubick.LEGACY)")
    args = ap.parse_args()
    cluster = load_cluster("rubick-a800")
    trace = read_workload("rubick-mt").jobs()
    rng = random.Random(args.seed)
    jobs = [replace(rng.choice(trace), job_id=f"j{i}", submit_time=0.0) for i in range(args.jobs + args.repeat)]
    truth = GroundTruthModel.from_dir(datasets.locate(TABLES))
    extra = {}
    if args.legacy:
        from shapeshift.policies.planaware.rubick import LEGACY

        extra = dict(LEGACY)
    policy = make_policy(args.policy, {"traces": TABLES, **extra})
    engine = Engine(cluster, policy, SimulatedExecutor(truth, CompletionQueue()), Overheads(0.0, 78.0))
    for spec in jobs[: args.jobs]:
        engine.submit(spec, 0.0)
    t0 = time.perf_counter()
    engine.step(0.0)
    cold = time.perf_counter() - t0
    times = []
    cpu_times = []  # process CPU time: what the decision costs, whatever else loads the machine
    refit_flags = []
    knowledge = getattr(policy, "knowledge", None)
    for k, spec in enumerate(jobs[args.jobs :]):
        now = 1.0 + k
        engine.submit(spec, now)
        engine.fire_timer()
        refits = knowledge.refits if knowledge is not None else 0
        t0, c0 = time.perf_counter(), time.process_time()
        engine.step(now)
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
        refit_flags.append(knowledge is not None and knowledge.refits > refits)
    ms = np.array(times) * 1000
    running = len(engine.allocations)
    pending = sum(len(p) for p in engine.pending.values())
    print(f"{args.policy}: {running} running + {pending} pending jobs on {cluster.total_gpus} GPUs")
    print(f"cold first decision (fits 7-row samples, builds curves): {cold * 1000:.0f} ms")
    print(
        f"decision time over {len(ms)} decisions: "
        f"p50 {np.percentile(ms, 50):.1f} ms, p99 {np.percentile(ms, 99):.1f} ms"
    )
    cpu_ms = np.array(cpu_times) * 1000
    p50, p99 = np.percentile(cpu_ms, 50), np.percentile(cpu_ms, 99)
    print(f"CPU time of the same decisions: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    plain = ms[~np.array(refit_flags, dtype=bool)]
    n_refit = int(np.sum(refit_flags))
    print(
        f"without the {n_refit} decision(s) that refit a model online: "
        f"p50 {np.percentile(plain, 50):.1f} ms, p99 {np.percentile(plain, 99):.1f} ms"
    )


if __name__ == "__main__":
    main()
