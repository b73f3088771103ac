"""Makespan of a tuning workload with and without bubble squeezing (simulation).

    python benchmarks/bench_bubble.py [--seeds 0 1 2] [--host-nodes 3 4]

Cluster: 4 nodes x 8 GPUs (80 GB each), up to 2 jobs per GPU. Hosts: one pipeline job
per host node, 8 GPUs each (dp=2, pp=4, m=4: bubble 3/7 of its GPU time), running 6, 8,
10 and 12 hours, submitted at 0. Tuning workload: 48 fused-trial jobs (16 trials fused
8 at a time, 2,000 steps per trial at 1.2 steps/s: 55.6 min on a whole GPU each),
arriving as a Poisson stream over the first 4 hours (seeded). Policy: FIFO with
backfill and the default overheads (30 s restore on every move), with and without the
``bubble`` option (``BubbleSqueeze``, also with ``promote``), squeezed trials at
15% of exclusive speed and hosts unslowed (``BubbleInterference`` defaults: Hydro /
Hu's thesis ch. 3). With 4 host nodes every GPU is a host's; with 3, one node is free
for tuning jobs and squeezing adds the hosts' bubbles on top.

Prints the tuning workload's makespan (first arrival to last completion), its mean job
completion time and the hosts' mean JCT for each setting. Simulation only: no timing
of this machine enters the figures.
"""

from __future__ import annotations

import argparse
import random
import statistics

from shapeshift.engine.overheads import Overheads
from shapeshift.model import ClusterSpec, ExecutionPlan, FusedTrials, JobSpec, NodeSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.tune.squeeze import BubbleInterference, BubbleSqueeze

HOURS = 3600.0


def workload(seed: int, host_nodes: int) -> list[JobSpec]:
    hosts = [JobSpec(f"host{i}", 0.0, 8, duration=(6 + 2 * i) * HOURS, model="gpt2",
                     plan=ExecutionPlan(dp=2, pp=4, micro_batches=4)) for i in range(host_nodes)]
    rng = random.Random(seed)
    tuning, t = [], 0.0
    trials = FusedTrials(trials=16, fused=8, steps=2000, trial_rate=1.2)
    for i in range(48):
        t += rng.expovariate(48 / (4 * HOURS))
        tuning.append(JobSpec(f"tune{i:02d}", round(t, 3), 1, duration=trials.duration, tuning=trials))
    return sorted(hosts + tuning, key=lambda j: (j.submit_time, j.job_id))


def measure(seed: int, host_nodes: int, squeeze: str) -> dict[str, float]:
    cluster = ClusterSpec(tuple(NodeSpec(f"n{i}", gpus=8, cpus=64, mem_gb=512, gpu_mem_gb=80.0) for i in range(4)),
                          gpu_share_limit=2)
    inner = make_policy("fifo", {"backfill": True})
    policy = BubbleSqueeze(inner, promote=squeeze == "bubble+promote") if squeeze != "off" else inner
    result = simulate(workload(seed, host_nodes), cluster, policy, overheads=Overheads(),
                      interference=BubbleInterference())
    tune = [j for j in result.jobs if j.job_id.startswith("tune")]
    host = [j for j in result.jobs if j.job_id.startswith("host")]
    first = min(j.spec.submit_time for j in tune)
    return {
        "makespan_h": (max(j.end_time for j in tune) - first) / HOURS,
        "tune_jct_h": statistics.mean(j.end_time - j.spec.submit_time for j in tune) / HOURS,
        "host_jct_h": statistics.mean(j.end_time - j.spec.submit_time for j in host) / HOURS,
        "squeezed": getattr(policy, "squeezed", 0),
        "promoted": getattr(policy, "promoted", 0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--host-nodes", type=int, nargs="+", default=[4, 3])
    args = parser.parse_args()
    print("| host nodes | seed | squeezing | tuning makespan (h) | tuning mean JCT (h) | host mean JCT (h) "
          "| squeezed | promoted |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for host_nodes in args.host_nodes:
        for seed in args.seeds:
            for squeeze in ("off", "bubble", "bubble+promote"):
                m = measure(seed, host_nodes, squeeze)
                print(f"| {host_nodes} | {seed} | {squeeze} | {m['makespan_h']:.2f} | "
                      f"{m['tune_jct_h']:.2f} | {m['host_jct_h']:.2f} | {m['squeezed']} | {m['promoted']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
