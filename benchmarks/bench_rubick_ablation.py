"""Rubick's deviations from the paper, each switched on alone, and the Table 4 runs.

Every run is one simulation of ``shapeshift.reproduce.experiment.run_one`` (8 x 8 A800,
ground-truth speeds, 78 s restore). Rows are appended to ``--out`` (CSV) as runs finish,
and runs already there are skipped, so an interrupted sweep resumes where it stopped.

    python benchmarks/bench_rubick_ablation.py --out results/ablation.csv \
        [--set table4|ablation|sweeps|all] [--workers 2] [--only NAME,...]

Workloads: ``base``, ``bp``, ``mt`` (the paper's traces) and ``llm50`` (the base trace
redrawn so half the jobs are LLaMA jobs, ``reproduce --sweep llm`` at 0.5). The
deviations (parameters of ``rubick``, defaults = the paper) are listed in DEVIATIONS;
``legacy`` switches all of them on at once (the older defaults, see CHANGELOG.md). Guarantee
rules (margins, SLO guard, fixed or packed guaranteed jobs) only act on ``mt``, the only
trace with guaranteed jobs; they are run there only.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from shapeshift.policies.planaware.rubick import LEGACY, RubickParams
from shapeshift.reproduce.experiment import COLUMNS, Paths, llm_share, load_jobs, run_one, scale_load

#: name -> rubick parameters switching one deviation on (see docs/rubick.md)
DEVIATIONS: dict[str, dict[str, Any]] = {
    "paper": {},
    "slope=request": {"slope": "request"},
    "max_scale=2": {"max_scale": 2.0},
    "steal_margin=0.5": {"steal_margin": 0.5},
    "min_gain=0.1": {"min_gain": 0.10},
    "guard_round=60": {"guard_round": 60.0},
    "no starvation rule": {"starvation_threshold": None},
    "legacy (all)": dict(LEGACY),
}
GUARANTEE_ONLY: dict[str, dict[str, Any]] = {
    "margins 2%/25%": {"slo_margin": 0.02, "trust_margin": 0.25},
    "slo_guard (60 s)": {"slo_guard": True, "guard_round": 60.0},
    "fixed_guaranteed": {"fixed_guaranteed": True},
    "pack_guaranteed": {"pack_guaranteed": True},
}


def _jobs(paths: Paths, workload: str):
    if workload == "llm50":
        return llm_share(load_jobs(paths, "base"), 0.5)
    if workload.startswith("llm"):
        return llm_share(load_jobs(paths, "base"), int(workload[3:]) / 100)
    if workload.startswith("load"):
        return scale_load(load_jobs(paths, "base"), float(workload[4:]))
    return load_jobs(paths, workload)


def plan(kind: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(workload, policy, label, params) of every run of ``kind``."""
    runs: list[tuple[str, str, str, dict[str, Any]]] = []
    if kind in ("table4", "all"):
        for wl, pols in (
            ("base", ("rubick", "rubick-e", "rubick-r", "rubick-n", "sia", "synergy")),
            ("mt", ("rubick", "antman")),
            ("llm50", ("rubick", "sia", "synergy")),
            ("bp", ("rubick", "sia", "synergy")),
        ):
            runs += [(wl, p, "paper" if p == "rubick" else "", {}) for p in pols]
    if kind in ("ablation", "all"):
        for wl in ("base", "mt", "llm50"):
            devs = dict(DEVIATIONS) | (GUARANTEE_ONLY if wl == "mt" else {})
            runs += [(wl, "rubick", label, params) for label, params in devs.items() if label != "paper"]
    if kind == "reverse":  # the legacy defaults with one deviation switched back to the paper
        paper = RubickParams().model_dump()
        back = {
            "mt": (
                ("slope",),
                ("starvation_threshold",),
                ("max_scale",),
                ("slo_margin", "trust_margin"),
                ("pack_guaranteed",),
            ),
            "llm50": (("slope",), ("starvation_threshold",), ("max_scale",)),
        }
        for wl, groups in back.items():
            for keys in groups:
                params = dict(LEGACY) | {k: paper[k] for k in keys}
                runs.append((wl, "rubick", "legacy but paper " + "+".join(keys), params))
    if kind in ("sweeps", "all"):
        for wl in ("load0.5", "load1.5", "load2", "llm0", "llm25"):
            runs += [(wl, p, "paper" if p == "rubick" else "", {}) for p in ("rubick", "sia", "synergy")]
    return runs


def _run(args: tuple[str, str, str, dict[str, Any]]) -> dict[str, Any]:
    wl, policy, label, params = args
    paths = Paths.default()
    row = run_one(paths, _jobs(paths, wl), policy, wl.rstrip("0123456789.") or wl, variant=wl, policy_args=params)
    row["label"] = label
    row["params"] = json.dumps(params, sort_keys=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--set", default="all", choices=("table4", "ablation", "sweeps", "all", "reverse"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated policies to run (default all)")
    args = ap.parse_args()
    columns = ("label", "params", *COLUMNS)
    done: set[tuple[str, str, str]] = set()
    if args.out.is_file():
        with args.out.open(newline="") as fh:
            done = {(r["variant"], r["policy"], r["params"]) for r in csv.DictReader(fh)}
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as fh:
            csv.writer(fh).writerow(columns)
    only = set(filter(None, args.only.split(",")))
    todo = [
        r
        for r in plan(args.set)
        if (r[0], r[1], json.dumps(r[3], sort_keys=True)) not in done and (not only or r[1] in only)
    ]
    print(f"{len(todo)} runs to do ({len(done)} already in {args.out})", flush=True)
    start = time.perf_counter()
    with Pool(args.workers) as pool:
        for row in pool.imap(_run, todo):
            with args.out.open("a", newline="") as fh:
                csv.writer(fh).writerow(["" if row.get(c) is None else row.get(c) for c in columns])
            print(
                f"{time.perf_counter() - start:7.0f} s  {row['variant']:8} {row['policy']:9} {row['label']:20} "
                f"avg {row['avg_jct_h']:.3f} h  p99 {row['p99_jct_h']:.2f} h  done {row['completed']}/{row['jobs']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
