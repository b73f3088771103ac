"""Alibaba's openb trace with durations under Shapeshift orderings, with FGD or best-fit
placement: queueing delay and JCT, which the FGD authors' simulator (arrivals only, no
departures) does not model.

    python scripts/openb_queueing.py --data ../shared/data/alibaba-openb --every 100,120 \\
        --policies fifo,sjf --placements consolidated,fgd --out /tmp/openb-queueing

``--policies lucid`` is Lucid's ordering (GPUs x predicted duration, its profiler) with its
defaults, the placement given as its ``placement`` parameter.

Each pod is a job submitted at its creation time and running for its lifetime
(``deletion_time - creation_time``), CPU-only pods included; a fraction of a GPU shares a
GPU with others while the shares fit (``--format openb``, docs/fgd.md). The trace is a
sample of the cluster's pods: on the whole cluster (6,212 GPUs) its demand peaks at 66
GPUs and nobody waits. ``--every K`` keeps every K-th node of the node list (nodes 0, K,
2K, ...; the list is grouped by GPU model, so the mix of models is kept), the arrivals and
durations unchanged. The mean offered load printed first (GPU-seconds asked between the
10th and 90th percentile of creation times, per second, per GPU kept) says how busy each
cluster is; the values of K are chosen from it, before the results are seen.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from shapeshift.analysis.metrics import summarize
from shapeshift.cluster import load_cluster
from shapeshift.model import ClusterSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload


def busy_gpus(frame) -> float:
    """Mean GPUs asked between the 10th and 90th percentile of submissions (GPU-seconds of
    the jobs overlapping that window, clipped to it, over its length)."""
    start, end = np.percentile(frame["submit_time"], [10, 90])
    share = np.where(frame["gpu_milli"] > 0, frame["gpu_milli"] / 1000.0, frame["num_gpus"])
    begin = np.clip(frame["submit_time"], start, end)
    finish = np.clip(frame["submit_time"] + frame["duration"], start, end)
    return float((share * (finish - begin)).sum() / (end - start))


def every_kth(cluster: ClusterSpec, k: int) -> ClusterSpec:
    nodes = cluster.nodes[::k]
    return ClusterSpec(nodes, gpu_share_limit=cluster.gpu_share_limit, gpu_fractions=cluster.gpu_fractions)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--workload", default="openb_pod_list_default")
    ap.add_argument("--cluster", default="openb_node_list_gpu_node")
    ap.add_argument("--every", default="100,120", help="keep every K-th node, comma-separated values of K")
    ap.add_argument("--policies", default="fifo,sjf")
    ap.add_argument("--placements", default="consolidated,fgd")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    workload = read_workload(args.data / f"{args.workload}.csv")
    whole = load_cluster(str(args.data / f"{args.cluster}.csv"))
    jobs = workload.jobs()
    demand = busy_gpus(workload.frame)
    rows = []
    for k in [int(x) for x in args.every.split(",") if x]:
        cluster = every_kth(whole, k)
        load = demand / cluster.total_gpus
        print(f"every {k}: {len(cluster.nodes)} nodes, {cluster.total_gpus} GPUs, load {load:.2f}", file=sys.stderr)
        for policy in [p for p in args.policies.split(",") if p]:
            for placement in [p for p in args.placements.split(",") if p]:
                result = simulate(jobs, cluster, make_policy(policy, {"placement": placement}))
                s = summarize(result)
                row = {
                    "every": k,
                    "gpus": cluster.total_gpus,
                    "load": round(load, 2),
                    "policy": policy,
                    "placement": placement,
                    "completed": s["jobs_completed"],
                    "rejected": s["jobs_rejected"],
                    "avg_queue_s": round(s["avg_queue"], 1),
                    "p99_queue_s": round(s["p99_queue"], 1),
                    "avg_jct_s": round(s["avg_jct"], 1),
                    "p50_jct_s": round(s["p50_jct"], 1),
                    "p99_jct_s": round(s["p99_jct"], 1),
                    "sim_seconds": round(s["sim_wall_seconds"], 1),
                }
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
                (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
