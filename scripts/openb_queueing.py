"""Alibaba's openb trace with durations under Shapeshift orderings, with FGD or best-fit
placement: queueing delay and JCT, which the FGD authors' simulator (arrivals only, no
departures) does not model.

    python scripts/openb_queueing.py --data ../shared/data/alibaba-openb --load 0.5,1 \\
        --policies fifo,sjf --placements consolidated,fgd --out /tmp/openb-queueing

Each pod is a job submitted at its creation time and running for its lifetime
(``deletion_time - creation_time``), CPU-only pods included; a fraction of a GPU shares a
GPU with others while the shares fit (``--format openb``, docs/fgd.md). At the trace's own
arrival rate its peak demand is 66 of the cluster's 6,212 GPUs, so nobody waits. ``--load
L`` divides every submission time by the factor S that makes the offered load L (GPU-seconds
asked / (submission span / S) / GPUs; ``shapeshift.workloads.transforms.scale_load``): the
same jobs, S times as often. The loads are chosen before the results are seen.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from shapeshift.analysis.metrics import summarize
from shapeshift.cluster import load_cluster
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload
from shapeshift.workloads.transforms import scale_load


def offered_load(frame, gpus: int, scale: float) -> float:
    """Mean GPUs asked over the submission span, per cluster GPU, at ``scale``."""
    share = np.where(frame["gpu_milli"] > 0, frame["gpu_milli"] / 1000.0, frame["num_gpus"])
    span = (frame["submit_time"].max() - frame["submit_time"].min()) / scale
    return float((share * frame["duration"]).sum() / span / gpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--workload", default="openb_pod_list_default")
    ap.add_argument("--cluster", default="openb_node_list_gpu_node")
    ap.add_argument("--load", default="0.5,1", help="offered loads (fractions of the GPUs), comma-separated")
    ap.add_argument("--policies", default="fifo,sjf")
    ap.add_argument("--placements", default="consolidated,fgd")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    workload = read_workload(args.data / f"{args.workload}.csv")
    cluster = load_cluster(str(args.data / f"{args.cluster}.csv"))
    rows = []
    natural = offered_load(workload.frame, cluster.total_gpus, 1.0)
    for load in [float(x) for x in args.load.split(",") if x]:
        scale = load / natural
        scaled = scale_load(workload, scale)
        print(f"load {load:g}: arrivals x{scale:.1f} (the trace's own load is {natural:.5f})", file=sys.stderr)
        jobs = scaled.jobs()
        for policy in [p for p in args.policies.split(",") if p]:
            for placement in [p for p in args.placements.split(",") if p]:
                result = simulate(jobs, cluster, make_policy(policy, {"placement": placement}))
                s = summarize(result)
                row = {
                    "offered_load": load,
                    "arrival_scale": round(scale, 1),
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
