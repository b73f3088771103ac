"""Held-out few-shot errors of the performance model: settings chosen leave-one-model-out.

    python benchmarks/bench_perf_heldout.py [TRACE_DIR|NAME] [--offload-runs 1,3] [--bonus 1]

TRACE_DIR defaults to the bundled measured tables, ``rubick-a800-tables``.

For each of the six target models (bert, gpt2, llama7, llama30, roberta without its
anomalous 1-GPU rows, t5) and each candidate setting of ``shapeshift.perf.heldout``
(model options x planner hyper-parameters), fit on the planner's 7 rows and measure the
error on every other row. Then, per model, the setting chosen on the other five is
applied to it: that is the held-out figure. The shipped defaults' figures (tuned on
all six) are printed beside it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from shapeshift import datasets
from shapeshift.perf.heldout import candidate_settings, few_shot_error, leave_one_model_out
from shapeshift.perf.measurements import read_trace_dir
from shapeshift.perf.validate import with_clean_variants

DEFAULT = "rubick-a800-tables"
MODELS = ("bert", "gpt2", "llama7", "llama30", "roberta_without_1gpu", "t5")
SHIPPED = "all/offload3/cover1"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=DEFAULT, help=f"measured tables: directory or data set name ({DEFAULT})")
    ap.add_argument("--offload-runs", default="1,3", help="the planner's Offload quotas to try")
    ap.add_argument("--bonus", default="1", help="the planner's coverage bonuses to try")
    args = ap.parse_args()
    root = datasets.locate(args.root)
    runs = tuple(int(x) for x in args.offload_runs.split(","))
    bonuses = tuple(float(x) for x in args.bonus.split(","))
    data = with_clean_variants(read_trace_dir(root))
    start = time.perf_counter()
    avg: dict[str, dict[str, float]] = {}
    mx: dict[str, dict[str, float]] = {}
    for s in candidate_settings(runs, bonuses):
        avg[s.name], mx[s.name] = {}, {}
        for m in MODELS:
            e = few_shot_error(data[m], s)
            avg[s.name][m], mx[s.name][m] = e.avg_err, e.max_err
        print(f"  {s.name}: " + ", ".join(f"{m} {avg[s.name][m]:.1%}" for m in MODELS), flush=True)
    choice = leave_one_model_out(avg)
    print("\n| model | setting chosen on the other five | held-out avg / max | shipped defaults (tuned) avg / max |")
    print("|---|---|---|---|")
    for m in MODELS:
        c = choice[m]
        print(f"| {m} | {c} | {avg[c][m]:.1%} / {mx[c][m]:.1%} | {avg[SHIPPED][m]:.1%} / {mx[SHIPPED][m]:.1%} |")
    held = np.mean([avg[choice[m]][m] for m in MODELS])
    tuned = np.mean([avg[SHIPPED][m] for m in MODELS])
    took = time.perf_counter() - start
    print(f"\nmean over the six: held-out {held:.1%}, shipped (tuned) {tuned:.1%}  ({took:.0f} s)")


if __name__ == "__main__":
    main()
