"""Wall time of a 3-policy x 9-load sweep of 1,000-job runs with 2 worker processes.

    python benchmarks/bench_sweep.py [--workers 2] [--jobs 1000] [--keep DIR]

FIFO, Tiresias and Optimus (the policies present in the registry; FIFO with backfill
stands in for any that are missing) on a Philly-fitted Poisson workload at 1..9
jobs/hour on 32 x 4 GPUs. Prints the cold sweep's wall time, the sum of per-run
simulation times (the serial cost), the parallel speed-up, and the wall time of the same
sweep again (every run a cache hit).
"""

from __future__ import annotations

import argparse
import tempfile
import textwrap
import time
from pathlib import Path

import pandas as pd

from shapeshift.experiments.runner import run_experiment
from shapeshift.experiments.schema import load_experiment
from shapeshift.experiments.workloads import GENERATORS
from shapeshift.policies.framework.registry import registry


def experiment_text(jobs: int) -> str:
    known = registry()
    policies = [
        "fifo",
        "{name: tiresias, policy: tiresias, params: {round: 300}}"
        if "tiresias" in known
        else "{name: fifo-backfill, policy: fifo, params: {backfill: true}}",
        "{name: optimus, policy: optimus, params: {round: 300}}"
        if "optimus" in known
        else "{name: fifo-first-fit, policy: fifo, params: {placement: first-fit}}",
    ]
    generator = "philly-poisson" if "philly-poisson" in GENERATORS else "poisson"
    return textwrap.dedent(
        f"""
        name: bench-sweep
        workloads:
          - {{name: load, generator: {generator}, jobs: {jobs}, rate: 1}}
        clusters: [32x4]
        policies: [{", ".join(policies)}]
        seeds: [0]
        sweep:
          workload.rate: [1, 2, 3, 4, 5, 6, 7, 8, 9]
        """
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--keep", type=Path, default=None, help="Write the experiment here (default: a temp dir).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp) / "out"
        path = Path(tmp) / "bench-sweep.yaml"
        path.write_text(experiment_text(args.jobs))
        experiment = load_experiment(path)
        t0 = time.perf_counter()
        cold = run_experiment(experiment, out, workers=args.workers)
        t1 = time.perf_counter()
        warm = run_experiment(experiment, out, workers=args.workers)
        t2 = time.perf_counter()
        table = pd.read_parquet(out / "results.parquet")
        serial = float(table["sim_wall_seconds"].sum())
        print(
            f"runs              {cold.total} ({', '.join(table['policy'].unique())} x 9 loads), {args.jobs} jobs each"
        )
        print(f"failed            {len(cold.failed)}")
        print(f"workers           {args.workers}")
        print(f"sweep wall        {t1 - t0:7.2f} s")
        print(f"sum of sim time   {serial:7.2f} s  (speed-up {serial / (t1 - t0):.2f}x)")
        for policy, part in table.groupby("policy", sort=False):
            print(f"  {policy:<15} {part['sim_wall_seconds'].sum():7.2f} s simulated")
        print(f"re-run (cached)   {t2 - t1:7.2f} s  ({warm.cached} cache hits, {warm.executed} simulated)")
    return 0 if not cold.failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
