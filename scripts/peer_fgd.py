"""Compare ``shapeshift fill`` with the FGD authors' simulator (hkust-adsl/kubernetes-scheduler-simulator).

Our random stream is not Go's, so single seeds cannot match; the comparison is of medians over
seeds: for each placement and each arrived-demand percent 50..130, the median over our seeds
of the allocation ratio against the median over the reference's 10 seeds (42..51) in its
committed ``experiments/analysis/expected_results/analysis_allo_discrete.csv``. Goal: within
1 percentage point everywhere, and the same ranking of placements at 130%.

    python scripts/peer_fgd.py --data ../shared/data/alibaba-openb \\
        --reference REPO --workload openb_pod_list_default --seeds 10 --out /tmp/peer-fgd

``REPO`` is a checkout or bare git directory of the reference (read with ``git show``), or
the CSV itself.

``--simulator DIR`` instead builds the Go simulator in ``DIR`` (outside this repository; its
tree is taken from ``--reference`` when ``DIR`` is empty; Debian ``golang-go``, vendored
dependencies) and runs it on our ``--data`` files for the first placement and ``--seed``, as
its experiments/README.md runs one experiment (``shapeshift.gpushare.reference``). It writes
the run's curve, compares it with the committed curve of the same seed (does the build
reproduce the authors' results?), with our fill of the same seed and with our median over
``--seeds`` seeds, and records its wall and CPU seconds for ``benchmarks/bench_fgd.py``. One
run of the default trace at 1.3x takes tens of minutes; without ``go`` it prints why and exits 0.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.gpushare import reference as ref
from shapeshift.gpushare.fill import run_fill
from shapeshift.gpushare.openb import read_nodes, read_pods
from shapeshift.gpushare.report import curve, run_curve

REFERENCE_NAMES = ref.REFERENCE_NAMES
EXPECTED = "experiments/analysis/expected_results/analysis_allo_discrete.csv"
EXPECTED_FRAG = "experiments/analysis/expected_results/analysis_frag_ratio_discrete.csv"
POINTS = list(range(50, 131))


def reference_table(reference: Path, member: str = EXPECTED) -> pd.DataFrame:
    if reference.is_file():
        return pd.read_csv(reference if member == EXPECTED else reference.with_name(Path(member).name))
    git_dir = reference / ".git" if (reference / ".git").exists() else reference
    text = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"HEAD:{member}"], check=True, capture_output=True, text=True
    ).stdout
    return pd.read_csv(io.StringIO(text))


def reference_medians(table: pd.DataFrame, workload: str) -> pd.DataFrame:
    """(placement x percent) median allocation ratio over the reference's seeds."""
    rows = table[table.workload == workload]
    out = {}
    for ours, theirs in REFERENCE_NAMES.items():
        sub = rows[rows.sc_policy == theirs]
        out[ours] = [float(sub[str(p)].median()) for p in POINTS]
    return pd.DataFrame(out, index=POINTS).T


def our_medians(data: Path, workload: str, placements: list[str], seeds: list[int], inflate: float) -> tuple:
    nodes = read_nodes(data / "openb_node_list_gpu_node.csv")
    pods = read_pods(data / f"{workload}.csv")
    per_seed, frag_seed, timing = {}, {}, {}
    for name in placements:
        curves, frags = [], []
        for seed in seeds:
            run = run_fill(nodes, pods, name, inflate=inflate, seed=seed)
            table = run_curve(run)
            rows = {r["arrived_pct"]: r["allocated_pct"] for r in table}
            frag = {r["arrived_pct"]: r["fragmented_pct"] for r in table}
            curves.append([rows.get(p, np.nan) for p in POINTS])
            frags.append([frag.get(p, np.nan) for p in POINTS])
            timing.setdefault(name, []).append(run.seconds)
            print(f"  {workload} {name} seed {seed}: {rows.get(130)} at 130% ({run.seconds:.1f} s)", file=sys.stderr)
        per_seed[name] = np.array(curves)
        frag_seed[name] = np.array(frags)
    medians = pd.DataFrame({k: np.nanmedian(v, axis=0) for k, v in per_seed.items()}, index=POINTS).T
    frag_medians = pd.DataFrame({k: np.nanmedian(v, axis=0) for k, v in frag_seed.items()}, index=POINTS).T
    return medians, per_seed, timing, frag_medians


def compare(ours: pd.DataFrame, theirs: pd.DataFrame) -> dict:
    diff = ours - theirs.loc[ours.index]
    worst = diff.abs().max(axis=1)
    at = diff.abs().idxmax(axis=1)
    rank_ours = list(ours[130].sort_values(ascending=False).index)
    rank_theirs = list(theirs.loc[ours.index][130].sort_values(ascending=False).index)
    return {
        "max_abs_diff_pp": {k: round(float(v), 3) for k, v in worst.items()},
        "at_percent": {k: int(v) for k, v in at.items()},
        "within_1pp": {k: bool(v <= 1.0) for k, v in worst.items()},
        "ours_at_130": {k: round(float(v), 3) for k, v in ours[130].items()},
        "reference_at_130": {k: round(float(v), 3) for k, v in theirs.loc[ours.index][130].items()},
        "ranking_ours": rank_ours,
        "ranking_reference": rank_theirs,
        "same_ranking": rank_ours == rank_theirs,
        "swapped_at_130": swapped_pairs(ours[130], theirs.loc[ours.index][130]),
    }


def swapped_pairs(ours: pd.Series, theirs: pd.Series) -> list[dict]:
    """Pairs of placements ranked one way by us and the other by the reference, with both gaps (pp)."""
    out = []
    names = list(ours.index)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if (ours[a] - ours[b]) * (theirs[a] - theirs[b]) < 0:
                out.append(
                    {
                        "pair": [a, b],
                        "ours_gap": round(float(ours[a] - ours[b]), 3),
                        "reference_gap": round(float(theirs[a] - theirs[b]), 3),
                    }
                )
    return out


SHORT = {"random": "random", "dot-product": "dot", "gpu-clustering": "clustering", "gpu-packing": "packing"}


def summarize(out: Path, workloads: list[str], placements: list[str]) -> str:
    """A markdown table of finished comparisons in ``out`` (the per-seed and median CSVs)."""
    head = "| trace | " + " | ".join(SHORT.get(p, p) for p in placements) + " | ranking at 130% |"
    lines = [head, "|" + "---|" * (len(placements) + 2)]
    for w in workloads:
        ours = pd.read_csv(out / f"{w}-ours-median.csv", index_col=0)
        theirs = pd.read_csv(out / f"{w}-reference-median.csv", index_col=0)
        ours.columns = theirs.columns = [int(c) for c in ours.columns]
        ours, theirs = ours.loc[placements], theirs.loc[placements]
        result = compare(ours, theirs)
        cells = [f"{result['max_abs_diff_pp'][p]:.2f} ({result['at_percent'][p]})" for p in placements]
        swaps = result["swapped_at_130"]
        rank = (
            "same"
            if not swaps
            else "; ".join(
                f"{SHORT.get(s['pair'][0], s['pair'][0])}/{SHORT.get(s['pair'][1], s['pair'][1])}: "
                f"ours {s['ours_gap']:+.2f}, ref {s['reference_gap']:+.2f}"
                for s in swaps
            )
        )
        spreads = []
        for p in placements:
            per_seed = out / f"{w}-{p}-per-seed.csv"
            if per_seed.exists():
                spreads.append(pd.read_csv(per_seed, index_col=0)["130"].std())
        if swaps and spreads:
            rank += f" (per-seed sd at 130%: {min(spreads):.2f}-{max(spreads):.2f})"
        lines.append(f"| {w.removeprefix('openb_pod_list_')} | " + " | ".join(cells) + f" | {rank} |")
    return "\n".join(lines)


def reference_seed_row(table: pd.DataFrame, workload: str, placement: str, seed: int, points: list[int]) -> list:
    """The committed curve of one seed at ``points``, or None where the table has no such row."""
    rows = table[(table.workload == workload) & (table.sc_policy == REFERENCE_NAMES[placement]) & (table.seed == seed)]
    return None if rows.empty else [float(rows.iloc[0].get(str(p), np.nan)) for p in points]


def max_gap(a: list[float], b: list[float], points: list[int]) -> tuple[float | None, int | None]:
    """Largest absolute difference over the points where both curves have a value."""
    gaps = [(abs(x - y), p) for x, y, p in zip(a, b, points, strict=True) if not (np.isnan(x) or np.isnan(y))]
    if not gaps:
        return None, None
    gap, at = max(gaps)
    return round(float(gap), 3), at


def simulator_peer(args: argparse.Namespace, placement: str) -> int:
    """Build and run the reference on our input for one placement and seed; compare its curve."""
    reason = ref.go_missing_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    checkout = args.simulator
    ref.check_outside(checkout, Path(__file__).resolve().parents[1])
    if not (checkout / "go.mod").exists():
        if args.reference is None or args.reference.is_file():
            print(f"{checkout} holds no reference tree; pass --reference with its git directory", file=sys.stderr)
            return 2
        ref.extract(args.reference, checkout)
    workload = args.workload.split(",")[0]
    ref.build(checkout, nice=args.nice)
    ref.prepare_input(checkout, args.data / f"{workload}.csv", args.data / ref.NODE_CSV)
    theirs = ref.run(checkout, workload, placement, args.seed, inflate=args.inflate, nice=args.nice, reuse=args.reuse)
    last = round(args.inflate * 100)
    go_rows = {r["arrived_pct"]: r["allocated_pct"] for r in curve(theirs.events, theirs.total_gpus, last)}
    reached = max(go_rows)
    if reached < last:  # a stopped run: its last two percents may hold only part of their events
        go_rows = {k: v for k, v in go_rows.items() if k < reached - 1}
    points = list(range(last + 1))
    go_curve = [go_rows.get(p, np.nan) for p in points]
    nodes = read_nodes(args.data / ref.NODE_CSV)
    pods = read_pods(args.data / f"{workload}.csv")
    ours_run = run_fill(nodes, pods, placement, inflate=args.inflate, seed=args.seed)
    ours_rows = {r["arrived_pct"]: r["allocated_pct"] for r in run_curve(ours_run)}
    result = {
        "workload": workload,
        "placement": placement,
        "seed": args.seed,
        "reference_events": len(theirs.events),
        "reference_dropped": int((~theirs.events.placed).sum()),
        "reference_wall_seconds": round(theirs.wall_seconds, 1),
        "reference_cpu_seconds": round(theirs.cpu_seconds, 1),
        "reference_log": str(theirs.log),
        "ours_events": len(ours_run.events),
        "ours_wall_seconds": round(ours_run.seconds, 2),
        "reference_reached_pct": reached,
        "reference_at_130": go_rows.get(130),
        "ours_same_seed_at_130": ours_rows.get(130),
    }
    gap, at = max_gap(go_curve, [ours_rows.get(p, np.nan) for p in points], points)
    result["max_abs_diff_vs_ours_same_seed_pp"], result["at_percent_vs_ours_same_seed"] = gap, at
    if args.reference is not None:
        committed = reference_seed_row(reference_table(args.reference), workload, placement, args.seed, points)
        if committed is not None:
            gap, at = max_gap(go_curve, committed, points)
            result["max_abs_diff_vs_committed_same_seed_pp"], result["at_percent_vs_committed"] = gap, at
    if args.seeds > 1:
        ours, _, _, _ = our_medians(args.data, workload, [placement], list(range(42, 42 + args.seeds)), args.inflate)
        gap, at = max_gap(go_curve, [float(ours.loc[placement, p]) if p in POINTS else np.nan for p in points], points)
        result[f"max_abs_diff_vs_our_{args.seeds}_seed_median_pp"], result["at_percent_vs_our_median"] = gap, at
    pd.DataFrame(
        {"reference": go_curve, "ours_same_seed": [ours_rows.get(p, np.nan) for p in points]}, index=points
    ).to_csv(args.out / f"simulator-{workload}-{placement}-{args.seed}-curve.csv", index_label="arrived_pct")
    (args.out / f"simulator-{workload}-{placement}-{args.seed}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="directory of the openb CSVs")
    ap.add_argument("--reference", type=Path, help="reference checkout / git dir, or its analysis_allo_discrete.csv")
    ap.add_argument("--workload", default="openb_pod_list_default", help="one or more, comma-separated")
    ap.add_argument("--placements", default=",".join(REFERENCE_NAMES))
    ap.add_argument("--seeds", type=int, default=10, help="seeds 42.. (the reference uses 42..51)")
    ap.add_argument("--inflate", type=float, default=1.3)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--simulator", type=Path, help="build and run the Go simulator in this directory instead")
    ap.add_argument("--seed", type=int, default=42, help="the --simulator run's seed")
    ap.add_argument("--nice", type=int, default=19, help="niceness of the --simulator build and run")
    ap.add_argument("--reuse", action="store_true", help="--simulator: read a finished run instead of running again")
    ap.add_argument("--summarize", action="store_true", help="print a markdown table of the finished runs in --out")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    placements = [p for p in args.placements.split(",") if p]
    if args.summarize:
        print(summarize(args.out, [w for w in args.workload.split(",") if w], placements))
        return 0
    if args.data is None:
        ap.error("--data is required")
    if args.simulator is not None:
        return simulator_peer(args, placements[0])
    if args.reference is None:
        ap.error("--reference is required unless --simulator is given")
    seeds = list(range(42, 42 + args.seeds))
    alloc_table = reference_table(args.reference)
    frag_table = reference_table(args.reference, EXPECTED_FRAG)
    summary = {}
    for workload in [w for w in args.workload.split(",") if w]:
        ours, per_seed, timing, frag_ours = our_medians(args.data, workload, placements, seeds, args.inflate)
        theirs = reference_medians(alloc_table, workload)
        frag_theirs = reference_medians(frag_table, workload)
        result = compare(ours, theirs)
        frag_diff = (frag_ours - frag_theirs.loc[frag_ours.index]).abs().max(axis=1)
        result.update(
            workload=workload,
            seeds=seeds,
            frag_ratio_max_abs_diff_pp={k: round(float(v), 3) for k, v in frag_diff.items()},
            mean_seconds_per_run={k: round(float(np.mean(v)), 2) for k, v in timing.items()},
        )
        ours.round(3).to_csv(args.out / f"{workload}-ours-median.csv")
        theirs.loc[ours.index].to_csv(args.out / f"{workload}-reference-median.csv")
        frag_ours.round(3).to_csv(args.out / f"{workload}-ours-frag-median.csv")
        frag_theirs.loc[ours.index].round(3).to_csv(args.out / f"{workload}-reference-frag-median.csv")
        for name, arr in per_seed.items():
            pd.DataFrame(arr, index=seeds, columns=POINTS).to_csv(args.out / f"{workload}-{name}-per-seed.csv")
        (args.out / f"{workload}-compare.json").write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        summary[workload] = result
    (args.out / "compare.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
