"""Per-job agreement with the Helios artifact's simulator on the Philly trace, per VC.

    python scripts/peer_helios.py --helios-log /tmp/helios/log [--trace PATH|NAME] [--cluster YAML|NAME]

The Helios simulator (S-Lab-System-Group/HeliosArtifact, ``framework/QSSF Service``) is
run outside this repository, unchanged, on the Philly file (the bundled ``philly`` data
set, ``--trace``; the cluster is the bundled ``philly-vcs``) converted to its input
(``cluster_log.csv`` sorted by submit time, as its ``log_process.py`` writes it; every
job COMPLETED; ``vc_dict_homo.pkl`` from its ``philly_vc.csv``), one VC at a time, with
the ``consolidate`` placer; it writes ``<log>/<policy>/<vc>/<policy>_consolidate_<vc>_log.csv``.
See docs/peer-agreement.md for the exact steps. Helios simulates only jobs submitted from
2017-10-01 to 2017-11-30 23:59, so ours runs on the same jobs.

Ours: fifo; sjf (oracle durations, no backfill: the defaults); srtf (oracle) with its
default 300 s lease and with ``lease=0``, every restart paying Helios's checkpoint rule.
Jobs are paired per VC by (submit time, duration, GPUs) in order. Prints, per policy, the
average JCT of each simulator, the relative difference, and the share of jobs whose JCTs
agree within 1 s and within 1%.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift import datasets
from shapeshift.cluster import load_cluster
from shapeshift.engine.overheads import Overheads
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload

WINDOW = ("2017-10-01 00:00:00", "2017-11-30 23:59:00")
OURS = {
    "fifo": ("fifo", {}, Overheads(0.0, 0.0)),
    "sjf": ("sjf", {"estimator": "oracle"}, Overheads(0.0, 0.0)),
    "srtf": ("srtf", {"estimator": "oracle"}, Overheads(restore_penalty="helios")),
    "srtf lease=0": ("srtf", {"estimator": "oracle", "lease": "0"}, Overheads(restore_penalty="helios")),
}


def _key(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.sort_values(["vc", "submit", "duration", "gpus"], kind="stable").copy()
    frame["rank"] = frame.groupby(["vc", "submit", "duration", "gpus"]).cumcount()
    return frame.set_index(["vc", "submit", "duration", "gpus", "rank"])


def window_rows(trace: Path) -> pd.DataFrame:
    """The rows of the Philly file that Helios simulates (submitted within ``WINDOW``)."""
    raw = pd.read_csv(trace)
    when = pd.to_datetime(raw["timestamp"])
    return raw[(when >= WINDOW[0]) & (when <= WINDOW[1])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--helios-log", required=True, type=Path)
    parser.add_argument("--trace", default="philly", help="Philly trace file or data set name (default: philly)")
    parser.add_argument("--cluster", default="philly-vcs", help="cluster YAML or data set name (default: philly-vcs)")
    parser.add_argument("--out", default=Path("/tmp/peer-helios"), type=Path)
    parser.add_argument("--per-vc", action="store_true", help="also print one row per VC")
    args = parser.parse_args()
    kept = window_rows(datasets.locate(args.trace))
    args.out.mkdir(parents=True, exist_ok=True)
    kept.to_csv(args.out / "philly_window.csv", index=False)
    workload = read_workload(args.out / "philly_window.csv")
    cluster = load_cluster(args.cluster)
    print(f"{len(workload)} Philly jobs submitted {WINDOW[0]} .. {WINDOW[1]}")
    head = f"{'policy':14} {'VCs':>3} {'jobs':>6} {'Helios avg JCT':>14} {'ours':>10} {'diff':>7}"
    print(f"{head} {'<=1 s':>6} {'<=1%':>6}")
    for label, (name, params, overheads) in OURS.items():
        helios_name = label.split()[0]
        files = sorted((args.helios_log / helios_name).glob(f"*/{helios_name}_consolidate_*_log.csv"))
        if not files:
            print(f"{label:14} no Helios logs under {args.helios_log / helios_name}", file=sys.stderr)
            continue
        theirs = pd.concat([pd.read_csv(f, dtype={"vc": str}) for f in files])
        vcs = sorted(theirs["vc"].astype(str).unique())
        theirs = _key(
            pd.DataFrame(
                {
                    "vc": theirs["vc"].astype(str),
                    "submit": theirs["submit_time"].astype(float),
                    "duration": theirs["duration"].astype(float),
                    "gpus": theirs["gpu_num"].astype(int),
                    "jct": (theirs["end_time"] - theirs["submit_time"]).astype(float),
                }
            )
        )
        result = simulate(workload.jobs(), cluster, make_policy(name, params), overheads=overheads)
        ours = _key(
            pd.DataFrame(
                {
                    "vc": [j.spec.vc for j in result.jobs],
                    "submit": [j.spec.submit_time for j in result.jobs],
                    "duration": [j.spec.duration for j in result.jobs],
                    "gpus": [j.spec.num_gpus for j in result.jobs],
                    "jct": [np.nan if j.end_time is None else j.end_time - j.spec.submit_time for j in result.jobs],
                }
            )
        )
        ours = ours[ours.index.get_level_values("vc").isin(vcs)]
        both = theirs.merge(ours, left_index=True, right_index=True, suffixes=("_helios", "_ours"))
        diff = (both["jct_ours"] - both["jct_helios"]).abs()
        a, b = both["jct_helios"].mean(), both["jct_ours"].mean()
        print(
            f"{label:14} {len(vcs):3d} {len(both):6d} {a:14.1f} {b:10.1f} {100 * (b - a) / a:+6.2f}%"
            f" {100 * (diff <= 1).mean():5.1f}% {100 * (diff <= 0.01 * both['jct_helios']).mean():5.1f}%"
        )
        if args.per_vc:
            for vc, part in both.groupby(level="vc"):
                d = (part["jct_ours"] - part["jct_helios"]).abs()
                a, b = part["jct_helios"].mean(), part["jct_ours"].mean()
                print(
                    f"  {vc:12} {len(part):6d} {a:14.1f} {b:10.1f} {100 * (b - a) / a:+6.2f}%"
                    f" {100 * (d <= 1).mean():5.1f}% {100 * (d <= 0.01 * part['jct_helios']).mean():5.1f}%"
                )
        if len(both) != len(theirs):
            print(f"  {len(theirs) - len(both)} Helios jobs unpaired", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
