"""Validation figures of the Rubick performance model on its measured tables.

Run: python benchmarks/bench_perf_validate.py [TRACE_DIR|NAME]
TRACE_DIR defaults to the bundled ``rubick-a800-tables``.
Prints, per model: full-data fit error, planner few-shot (7 rows) error, random few-shot
(7 rows, 5 seeds) error, and the ablation of each addition (full-data fit).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from shapeshift import datasets
from shapeshift.perf.fitting import abs_pct_errors, fit
from shapeshift.perf.measurements import read_trace_dir
from shapeshift.perf.rubick import ModelOptions
from shapeshift.perf.validate import validate_model, with_clean_variants

DEFAULT = "rubick-a800-tables"
VARIANTS = {
    "paper": ModelOptions(spread=False, split_forward=False, stage_overhead=False, host_contention=False),
    "+spread": ModelOptions(spread=True, split_forward=False, stage_overhead=False, host_contention=False),
    "+split fwd": ModelOptions(spread=True, split_forward=True, stage_overhead=False, host_contention=False),
    "+stage": ModelOptions(spread=True, split_forward=True, stage_overhead=True, host_contention=False),
    "+host (all)": ModelOptions(spread=True, split_forward=True, stage_overhead=True, host_contention=True),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=DEFAULT, help=f"measured tables: directory or data set name ({DEFAULT})")
    root = datasets.locate(ap.parse_args().root)
    data = with_clean_variants(read_trace_dir(root))
    start = time.perf_counter()
    print("| model | rows | full fit avg/max | planner 7 avg/max | random 7 (5 seeds) avg / worst max |")
    print("|---|---|---|---|---|")
    for name, rows in data.items():
        if len(rows) <= 7:
            print(f"| {name} | {len(rows)} | skipped: too few rows | | |")
            continue
        rep = validate_model(rows, 7, 5)
        ra = np.mean([s.avg_err for s in rep.random])
        rm = np.max([s.max_err for s in rep.random])
        p = rep.planner
        assert p is not None
        print(
            f"| {name} | {len(rows)} | {rep.full.avg_err:.1%} / {rep.full.max_err:.1%} | "
            f"{p.avg_err:.1%} / {p.max_err:.1%} | {ra:.1%} / {rm:.1%} |"
        )
    print("\nAblation, full-data fit avg/max error:")
    print("| model | " + " | ".join(VARIANTS) + " |")
    print("|---|" + "---|" * len(VARIANTS))
    for name, rows in data.items():
        if len(rows) <= 7:
            continue
        cells = []
        for opt in VARIANTS.values():
            e = abs_pct_errors(fit(rows, options=opt), rows)
            cells.append(f"{e.mean():.1%} / {e.max():.1%}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
