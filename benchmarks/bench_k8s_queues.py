"""Decision time of ``kueue`` and ``kai`` (goal: 10,000 pending workloads over 100 queues
in 10 cohorts, p99 per decision under 50 ms) and a replay of the Philly trace mapped to
queues by virtual cluster (goal: under 2 minutes).

Decisions: 100 ClusterQueues of 8 GPUs nominal quota each, 10 per cohort, borrowing
within the cohort and Kueue's default preemption settings (none; ``--reclaim`` sets
``reclaimWithinCohort: Any``, whose preemptions among workloads arriving at one instant
cost many cycles, see docs/kueue-kai.md); 100 leaf queues deserving 8 GPUs each under 10 parent
queues (KAI); 100 nodes x 8 GPUs; 10,000 jobs submitted at time 0 (seeded: 1-8 GPUs,
10 min to 10 h, queue uniform). Every ``decide`` is timed until ``--decisions`` of them
have run (the pending list stays near 10,000 throughout), in wall time and in CPU time
(on a shared machine the wall time includes waiting for a core; the load average is
printed with the figures).

Replay: ``philly`` (its 11 virtual clusters, jobs of the 4 tiny others left out) on
352 x 8 GPUs in one pool, queues from ``examples/k8s/philly-kueue.yaml`` /
``philly-kai.yaml`` (``shapeshift.k8s.vc_queues``); ``--jobs`` cuts it, or, above the
82,229 jobs the 11 VCs hold, continues it with copies of the trace shifted by its span
(``--jobs 100000``: the trace, then its first 17,771 jobs again one span later), so the
offered load stays the trace's.

    python benchmarks/bench_k8s_queues.py [--decisions 300] [--jobs N] [--skip-replay]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import random
import time
from pathlib import Path

import numpy as np

from shapeshift.cluster import shorthand_cluster
from shapeshift.model import JobSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers.detect import read_workload

ROOT = Path(__file__).resolve().parent.parent
PHILLY_VCS = (
    "6214e9",
    "7f04ca",
    "11cb48",
    "b436b2",
    "ee9e8c",
    "e13805",
    "6c71a0",
    "2869ce",
    "ed69ec",
    "103959",
    "0e4a51",
)


def kueue_config(queues: int, cohorts: int, quota: int, preemption: str = "") -> str:
    docs = ["kind: ResourceFlavor\nmetadata: {name: f}\n"]
    for i in range(queues):
        docs.append(
            f"kind: ClusterQueue\nmetadata: {{name: cq{i}}}\nspec:\n  namespaceSelector: {{}}\n"
            f"  cohortName: cohort{i % cohorts}\n{preemption}"
            "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
            f"    - name: f\n      resources: [{{name: nvidia.com/gpu, nominalQuota: {quota}}}]\n"
        )
    return "---\n".join(docs)


def kai_config(queues: int, parents: int, quota: int) -> str:
    docs = [
        f"kind: Queue\nmetadata: {{name: p{j}}}\nspec: {{resources: {{gpu: {{quota: {quota * queues // parents}}}}}}}\n"
        for j in range(parents)
    ]
    docs += [
        f"kind: Queue\nmetadata: {{name: cq{i}}}\n"
        f"spec: {{parentQueue: p{i % parents}, resources: {{gpu: {{quota: {quota}}}}}}}\n"
        for i in range(queues)
    ]
    return "---\n".join(docs)


class Enough(Exception):
    pass


def decision_times(
    policy_name: str, config: Path, jobs: list[JobSpec], nodes: int, limit: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each decision's wall time and CPU time (this thread's), in ms: on a shared machine
    the wall time includes waiting for a core, the CPU time does not."""
    policy = make_policy(policy_name, {"config": str(config), "queue_from": "tenant"})
    decide = policy.decide
    times: list[tuple[float, float]] = []

    def timed(view):
        start, cpu = time.perf_counter(), time.thread_time()
        schedule = decide(view)
        times.append((time.perf_counter() - start, time.thread_time() - cpu))
        if len(times) >= limit:
            raise Enough
        return schedule

    policy.decide = timed
    with contextlib.suppress(Enough):
        simulate(jobs, shorthand_cluster(nodes, 8), policy)
    ms = np.array(times) * 1000.0
    return ms[:, 0], ms[:, 1]


def pending_jobs(n: int, queues: int, seed: int) -> list[JobSpec]:
    rng = random.Random(seed)
    return [
        JobSpec(
            job_id=f"w{i}",
            submit_time=0.0,
            num_gpus=rng.choice((1, 1, 2, 4, 8)),
            duration=rng.uniform(600, 36000),
            tenant=f"cq{rng.randrange(queues)}",
        )
        for i in range(n)
    ]


def extended(jobs: list[JobSpec], n: int) -> list[JobSpec]:
    """The first ``n`` jobs of the trace repeated end to end: copy ``k`` has its submit
    times shifted by ``k`` spans (last submit - first submit + the mean gap) and its ids
    suffixed ``+k``, so it arrives after the previous copy at the same rate."""
    if n <= len(jobs):
        return jobs[:n]
    first, last = jobs[0].submit_time, jobs[-1].submit_time
    span = (last - first) * len(jobs) / max(len(jobs) - 1, 1)
    out = list(jobs)
    k = 1
    while len(out) < n:
        out += [
            dataclasses.replace(j, job_id=f"{j.job_id}+{k}", submit_time=j.submit_time + k * span)
            for j in jobs[: n - len(out)]
        ]
        k += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=300, help="decisions timed per policy")
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=None, help="replay N Philly jobs (repeated past its end)")
    parser.add_argument("--skip-replay", action="store_true")
    parser.add_argument("--reclaim", action="store_true", help="reclaimWithinCohort: Any on every ClusterQueue")
    parser.add_argument("--policies", default="kueue,kai")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_k8s_queues"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    policies = args.policies.split(",")
    preemption = "  preemption: {reclaimWithinCohort: Any}\n" if args.reclaim else ""
    (args.out / "kueue.yaml").write_text(kueue_config(100, 10, 8, preemption))
    (args.out / "kai.yaml").write_text(kai_config(100, 10, 8))
    jobs = pending_jobs(args.pending, 100, seed=0)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"decisions: {args.pending:,} pending workloads, 100 queues in 10 cohorts, 100 x 8 GPUs")
    print("| policy | decisions | p50 (ms) | p99 (ms) | max (ms) | CPU p50 (ms) | CPU p99 (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in policies:
        ms, cpu = decision_times(name, args.out / f"{name}.yaml", jobs, 100, args.decisions)
        p50, p99 = np.percentile(ms, [50, 99])
        c50, c99 = np.percentile(cpu, [50, 99])
        row = f"| {name} | {len(ms)} | {p50:.1f} | {p99:.1f} | {ms.max():.1f} | {c50:.1f} | {c99:.1f} |"
        print(row, flush=True)
    if args.skip_replay:
        return
    philly = [j for j in read_workload("philly").jobs() if j.vc in PHILLY_VCS]
    if args.jobs:
        philly = extended(philly, args.jobs)
    print(f"\nreplay: philly, {len(philly):,} jobs of its 11 virtual clusters, 352 x 8 GPUs in one pool")
    print("| policy | wall (s) | CPU (s) | decisions | jobs completed | load average |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in policies:
        config = ROOT / "examples" / "k8s" / f"philly-{name}.yaml"
        policy = make_policy(name, {"config": str(config)})
        start, cpu = time.perf_counter(), time.process_time()
        result = simulate(philly, shorthand_cluster(352, 8), policy)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        done = sum(1 for j in result.jobs if j.end_time is not None)
        load = os.getloadavg()[0]
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {result.decisions:,} | {done:,} | {load:.1f} |", flush=True)


if __name__ == "__main__":
    main()
