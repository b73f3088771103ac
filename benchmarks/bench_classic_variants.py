"""What each of our variants of a published rule changes: defaults against named variants.

    python benchmarks/bench_classic_variants.py [--trace PATH|NAME] [--jobs 2000] [--policies gavel,...]

Two workloads, both settings chosen before looking at the numbers:

* the first ``--jobs`` Philly jobs (the bundled ``philly`` data set) on 64 x 8 GPUs, one partition, 30 s restore penalty
  (the ``bench_policies.py`` setting): sjf, srtf, las, tiresias, themis and gavel, each
  with its default and the variants the README's fidelity table lists;
* 400 Philly-fitted Poisson jobs at 12 jobs/hour (at most 4 GPUs, seed 0) with models drawn
  from those Gavel measured, on ``../shared/examples/cluster-heterogeneous.yaml`` (4 x 4
  V100, P100 and K80): gavel's objective and fill variants, where GPU types matter. That
  cluster file is not bundled; without ``../shared`` this table is skipped.

Prints average JCT (hours), average queueing (hours), preemptions and decisions per run.
The numbers feed the "measured effect" column of the README's fidelity table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shapeshift import datasets
from shapeshift.analysis.metrics import summarize
from shapeshift.cluster import load_cluster, shorthand_cluster
from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.generators import poisson
from shapeshift.workloads.readers import read_workload
from shapeshift.workloads.workload import Workload

#: Not bundled: the heterogeneous example cluster comes from the reference checkout.
HETERO = Path(__file__).resolve().parents[1].parent / "shared" / "examples" / "cluster-heterogeneous.yaml"
PHILLY_VARIANTS: list[tuple[str, dict[str, str]]] = [
    ("sjf", {}),
    ("sjf", {"backfill": "true"}),
    ("srtf", {}),
    ("srtf", {"lease": "0"}),
    ("las", {}),
    ("las", {"mode": "event"}),
    ("tiresias", {}),
    ("tiresias", {"starvation": "2"}),
    ("themis", {}),
    ("themis", {"contention": "current"}),
    ("themis", {"knob": "0.2", "contention": "current"}),
    ("gavel", {}),
    ("gavel", {"fill": "true"}),
    ("gavel", {"rounds": "grid", "priority": "age"}),
]
HETERO_VARIANTS: list[tuple[str, dict[str, str]]] = [
    ("gavel", {}),
    ("gavel", {"fill": "true"}),
    ("gavel", {"fill_spare": "true"}),
    ("gavel", {"objective": "best-type", "fill": "true"}),
    ("gavel", {"rounds": "grid"}),
    ("gavel", {"reset_interval": "0"}),
    ("gavel", {"rounds": "grid", "priority": "age"}),
]
GAVEL_MODELS = ("resnet50", "resnet18", "transformer", "lstm", "a3c", "cyclegan", "recommendation")


def _table(title: str, jobs, cluster, variants, overheads: Overheads, only: set[str]) -> None:
    variants = [v for v in variants if not only or v[0] in only]
    if not variants:
        return
    print(title)
    print(f"{'policy':10} {'variant':34} {'avg JCT h':>9} {'avg queue h':>11} {'preempt':>8} {'decisions':>9}")
    for name, params in variants:
        result = simulate(jobs, cluster, make_policy(name, params), overheads=overheads)
        s = summarize(result)
        label = ",".join(f"{k}={v}" for k, v in params.items()) or "(default)"
        print(
            f"{name:10} {label:34} {s['avg_jct'] / 3600:9.3f} {s['avg_queue'] / 3600:11.3f}"
            f" {s['preemptions']:8d} {s['decisions']:9d}"
        )
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="philly", help="Philly trace file or data set name (default: philly)")
    parser.add_argument("--jobs", default=2000, type=int)
    parser.add_argument("--policies", default="", help="comma-separated policy names (default: all)")
    args = parser.parse_args()
    try:
        trace = datasets.locate(args.trace)
    except InputError as exc:
        print(f"--trace: {exc}", file=sys.stderr)
        return 2
    if not trace.exists():
        print(f"--trace: {trace} not found", file=sys.stderr)
        return 2
    full = read_workload(trace)
    sliced = Workload("philly", full.frame.iloc[: args.jobs].assign(vc="").reset_index(drop=True))
    penalty = Overheads(0.0, 30.0)
    only = {p for p in args.policies.split(",") if p}
    _table(
        f"first {args.jobs} Philly jobs, 64 x 8 GPUs",
        sliced.jobs(),
        shorthand_cluster(64, 8),
        PHILLY_VARIANTS,
        penalty,
        only,
    )
    if not HETERO.exists():
        print(f"{HETERO} not found (not bundled; needs ../shared): heterogeneous table skipped", file=sys.stderr)
        return 0
    generated = poisson(400, 12.0, seed=0, models=GAVEL_MODELS, max_gpus=4).jobs()
    _table(
        "400 Poisson jobs with Gavel's models, 4 x 4 V100 / P100 / K80",
        generated,
        load_cluster(HETERO),
        HETERO_VARIANTS,
        penalty,
        only,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
