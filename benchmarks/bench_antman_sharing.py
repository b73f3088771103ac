"""AntMan's rules on the Rubick MT workload, each changed alone (AntMan's fidelity table).

Every run is ``shapeshift.reproduce.experiment.run_one`` on ``workload-mt`` (8 x 8 A800,
ground-truth speeds, 78 s restore; ``antman`` on a cluster with ``gpu_share_limit: 2``
unless ``sharing=false``). Prints one markdown row per variant with its ratio to the
default. Wall time is printed too; it is inflated when other work loads the machine.

    python benchmarks/bench_antman_sharing.py [--data DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from shapeshift.reproduce.experiment import Paths, load_jobs, run_one

VARIANTS: dict[str, dict[str, Any]] = {
    "default (the paper's rules)": {},
    "preempt_opportunistic=true": {"preempt_opportunistic": True},
    "max_used_gpu_mem_gb=16": {"max_used_gpu_mem_gb": 16.0},
    "preempt_opportunistic=true, max_used_gpu_mem_gb=16": {"preempt_opportunistic": True, "max_used_gpu_mem_gb": 16.0},
    "guaranteed_backfill=true": {"guaranteed_backfill": True},
    "opportunistic_after=none": {"opportunistic_after": None},
    "opportunistic_after=1800": {"opportunistic_after": 1800.0},
    "opportunistic_after=7200": {"opportunistic_after": 7200.0},
    "guaranteed_backfill=true, opportunistic_after=none": {"guaranteed_backfill": True, "opportunistic_after": None},
    "dynamic_gpus=true": {"dynamic_gpus": True},
    "dynamic_gpus=true, guaranteed_backfill=true, opportunistic_after=none": {
        "dynamic_gpus": True,
        "guaranteed_backfill": True,
        "opportunistic_after": None,
    },
    "sharing=false": {"sharing": False},
    "guaranteed_slowdown=0.05": {"guaranteed_slowdown": 0.05},
    "idle_slots=false": {"idle_slots": False},
    "guaranteed_only_util_limit=true": {"guaranteed_only_util_limit": True},
    "prefer_empty_gpus=true": {"prefer_empty_gpus": True},
    "both of ours (guaranteed_only_util_limit, prefer_empty_gpus)": {
        "guaranteed_only_util_limit": True,
        "prefer_empty_gpus": True,
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=None,
        help="a copy of the Rubick artifact's data directory (traces/, workloads/); default: the bundled data sets",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N jobs (smoke runs)")
    args = parser.parse_args()
    paths = Paths.default(args.data)
    jobs = load_jobs(paths, "mt")[: args.limit] if args.limit else load_jobs(paths, "mt")
    print(
        "| variant | avg JCT (h) | guaranteed / best-effort (h) | SLO attainment | preemptions "
        "| shared GPU time | ratio to default | wall (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    default = None
    for name, params in VARIANTS.items():
        start = time.perf_counter()
        row = run_one(paths, jobs, "antman", "mt", policy_args=params)
        wall = time.perf_counter() - start
        default = default or row["avg_jct_h"]
        shared = row["shared_gpu_time_share"]
        split = f"{row['avg_jct_guaranteed_h']:.2f} / {row['avg_jct_besteffort_h']:.2f}"
        print(
            f"| {name} | {row['avg_jct_h']:.3f} | {split} "
            f"| {row['slo_attainment']:.3f} | {row['preemptions']} | {'–' if shared is None else f'{shared:.1%}'} "
            f"| {row['avg_jct_h'] / default:.2f}x | {wall:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
