"""Compare ``shapeshift fill`` with the FGD authors' simulator (hkust-adsl/kubernetes-scheduler-simulator).

Our random stream is not Go's, so single seeds cannot match; the comparison is of medians over
seeds: for each placement and each arrived-demand percent 50..130, the median over our seeds
of the allocation ratio against the median over the reference's 10 seeds (42..51) in its
committed ``experiments/analysis/expected_results/analysis_allo_discrete.csv``. Goal: within
1 percentage point everywhere, and the same ranking of placements at 130%.

    python scripts/peer_fgd.py --data ../shared/data/alibaba-openb \\
        --reference REPO --workload openb_pod_list_default --seeds 10 --out /tmp/peer-fgd

``REPO`` is a checkout or bare git directory of the reference (read with ``git show``), or
the CSV itself. ``--simulator CHECKOUT`` instead builds the Go simulator there (outside this
repository; Debian ``golang-go``, ``go build -mod=vendor``), runs one placement and seed with
the authors' scripts and bins its log with their analysis: the same-input, same-seed peer
run, and the speed reference of ``benchmarks/bench_fgd.py``. One run takes about 40 minutes.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.gpushare.fill import run_fill
from shapeshift.gpushare.openb import read_nodes, read_pods
from shapeshift.gpushare.report import run_curve

#: The reference's directory names (experiments/run_scripts/generate_run_scripts.py) for ours.
REFERENCE_NAMES = {
    "random": "01-Random",
    "dot-product": "02-DotProd",
    "gpu-clustering": "03-GpuClustering",
    "gpu-packing": "04-GpuPacking",
    "best-fit": "05-BestFit",
    "fgd": "06-FGD",
}
#: Their score-plugin flag per placement, and the extra flags their run script passes.
REFERENCE_FLAGS = {
    "random": "-Random 1000 -gpusel random",
    "dot-product": "-DotProd 1000 -gpusel best -dimext merge -norm max",
    "gpu-clustering": "-GpuClustering 1000",
    "gpu-packing": "-GpuPacking 1000",
    "best-fit": "-BestFit 1000",
    "fgd": "-FGD 1000 -gpusel FGD -dimext share -norm max",
}
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
    }


def run_simulator(checkout: Path, placement: str, workload: str, seed: int) -> float:
    """Build and run the authors' simulator for one placement and seed (their README's
    steps); returns the wall-clock seconds of the run."""
    subprocess.run(["go", "build", "-mod=vendor", "-o", "bin/simon", "./cmd"], cwd=checkout, check=True)
    subprocess.run(["bash", "prepare_input.sh"], cwd=checkout / "data", check=True)
    exp = f"experiments/peer/{workload}/{REFERENCE_NAMES[placement]}/1.3/{seed}"
    cmd = (
        f"mkdir -p {exp} && python3 scripts/generate_config_and_run.py -d {exp} -e -b -f data/{workload} "
        f"{REFERENCE_FLAGS[placement]} -tune 1.3 -tuneseed {seed} --shuffle-pod=true -z {exp}/snapshot/ds01 "
        f"&& python3 scripts/analysis.py -f -g {exp}"
    )
    started = time.perf_counter()
    subprocess.run(["bash", "-c", cmd], cwd=checkout, check=True)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="directory of the openb CSVs")
    ap.add_argument("--reference", type=Path, help="reference checkout / git dir, or its analysis_allo_discrete.csv")
    ap.add_argument("--workload", default="openb_pod_list_default", help="one or more, comma-separated")
    ap.add_argument("--placements", default=",".join(REFERENCE_NAMES))
    ap.add_argument("--seeds", type=int, default=10, help="seeds 42.. (the reference uses 42..51)")
    ap.add_argument("--inflate", type=float, default=1.3)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--simulator", type=Path, help="build and run the Go simulator in this checkout instead")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    placements = [p for p in args.placements.split(",") if p]
    if args.simulator is not None:
        seconds = run_simulator(args.simulator, placements[0], args.workload, 42)
        print(json.dumps({"placement": placements[0], "seed": 42, "reference_seconds": seconds}))
        return
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


if __name__ == "__main__":
    main()
