"""Derive reference run lengths for the Pollux evaluation workload.

    python scripts/derive_pollux_reference.py [--profiles DIR] [--out FILE]

The Pollux workload files (``workload-N.csv``: ``name, time, application,
num_replicas, batch_size``) give no duration: the Pollux simulator runs every job until
its application's training trace ends. To replay such a file with a duration-based
throughput model we need, for each (application, replicas, batch size), the job's
length at what it asked for. This script computes it the way the artifact's own
workload generator estimates job completion times (``get_configurations`` in
``simulator/applications.py`` of petuum/adaptdl, Apache-2.0):

* iterations = the ``iteration`` column of ``validation-<batch_size>.csv`` at the last
  epoch the simulator trains (``max_epochs - 1``; max_epochs per application below);
* step time = the measured ``step_time`` of the placement that packs the replicas 4 per
  node (the artifact's 16 x 4-GPU cluster), linearly interpolated over the local batch
  (``placements.csv``); placements that were not measured are interpolated over
  (nodes, replicas, local batch) from ``placements.csv`` and ``scalability.csv``;
  a local batch above the application's largest measured one uses gradient
  accumulation (extra steps cost ``step_time - sync_time`` each);
* duration = iterations x step time.

Output: ``src/shapeshift/data/pollux_reference.json``, a grid over the replica counts
the generator considers (1, 2, 4, 6, 8, 12, 16, 24, 32, 48) and every validated batch
size; configurations outside the measured range are left out. Derived figures only;
the profiles themselves stay in ``../shared/data/pollux``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.interpolate import LinearNDInterpolator

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROFILES = ROOT.parent / "shared" / "data" / "pollux" / "profiles"
DEFAULT_OUT = ROOT / "src" / "shapeshift" / "data" / "pollux_reference.json"

#: Training length (epochs) and local-batch cap per application, as configured in the
#: artifact's ``APPLICATIONS`` table (``simulator/applications.py``).
APPLICATIONS: dict[str, dict[str, int | None]] = {
    "bert": {"max_epochs": 2, "max_local_bsz": None},
    "cifar10": {"max_epochs": 100, "max_local_bsz": None},
    "deepspeech2": {"max_epochs": 80, "max_local_bsz": None},
    "imagenet": {"max_epochs": 90, "max_local_bsz": None},
    "ncf": {"max_epochs": 10, "max_local_bsz": None},
    "yolov3": {"max_epochs": 50, "max_local_bsz": 8},
}
REPLICAS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48)
GPUS_PER_NODE = 4


def _packed(replicas: int) -> tuple[int, ...]:
    placement: tuple[int, ...] = ()
    while sum(placement) < replicas:
        placement = (*placement, min(replicas - sum(placement), GPUS_PER_NODE))
    return placement


class _Throughput:
    """Step and sync time for a placement and local batch, from the measured profiles."""

    def __init__(self, directory: Path):
        placements = pd.read_csv(directory / "placements.csv")
        placements["placement"] = placements["placement"].astype(str)
        placements["num_nodes"] = placements["placement"].str.len()
        placements["num_replicas"] = placements["placement"].map(lambda p: sum(int(c) for c in p))
        self.by_placement = {
            key: (
                rows["local_bsz"].to_numpy(float),
                rows["step_time"].to_numpy(float),
                rows["sync_time"].to_numpy(float),
            )
            for key, rows in placements.sort_values("local_bsz").groupby("placement")
        }
        scalability = pd.read_csv(directory / "scalability.csv")
        xs = ["num_nodes", "num_replicas", "local_bsz"]
        ys = ["step_time", "sync_time"]
        grouped = placements.groupby(xs)[ys].mean().reset_index()
        points = pd.concat([grouped[xs + ys], scalability[xs + ys]], ignore_index=True)
        self._nd = LinearNDInterpolator(points[xs].to_numpy(float), points[ys].to_numpy(float))
        self.min_local = int(placements["local_bsz"].min())
        self.max_local = int(placements["local_bsz"].max())

    def __call__(self, placement: tuple[int, ...], local_bsz: float) -> tuple[float, float]:
        rotations = [placement[i:] + placement[:i] for i in range(len(placement))]
        key = "".join(map(str, min(rotations)))
        if key in self.by_placement:
            x, step, sync = self.by_placement[key]
            if not x[0] <= local_bsz <= x[-1]:
                return math.nan, math.nan
            return float(np.interp(local_bsz, x, step)), float(np.interp(local_bsz, x, sync))
        nodes = min(len(placement), 16)
        step, sync = self._nd([[nodes, sum(placement), local_bsz]])[0]
        return float(step), float(sync)


def derive(profiles: Path) -> dict:
    apps: dict[str, dict] = {}
    digest = hashlib.sha256()
    for app, settings in APPLICATIONS.items():
        directory = profiles / app
        for path in sorted(directory.glob("*.csv")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        validation = {int(p.stem.split("-")[-1]): pd.read_csv(p) for p in sorted(directory.glob("validation-*.csv"))}
        epoch = int(settings["max_epochs"]) - 1
        throughput = _Throughput(directory)
        max_local = settings["max_local_bsz"] or throughput.max_local
        iterations = {bsz: int(frame["iteration"].iloc[epoch]) for bsz, frame in sorted(validation.items())}
        configs = []
        for replicas in REPLICAS:
            placement = _packed(replicas)
            for bsz, iters in iterations.items():
                local = math.ceil(bsz / replicas - 1e-8)
                if local < throughput.min_local:
                    continue
                accum = math.ceil(local / max_local - 1e-8) - 1
                atomic = math.ceil(local / (accum + 1) - 1e-8)
                step, sync = throughput(placement, atomic)
                if not (math.isfinite(step) and math.isfinite(sync)):
                    continue
                step += accum * (step - sync)
                configs.append(
                    {
                        "replicas": replicas,
                        "batch_size": bsz,
                        "iterations": iters,
                        "step_time_s": round(step, 6),
                        "duration_s": round(iters * step, 1),
                    }
                )
        apps[app] = {
            "max_epochs": settings["max_epochs"],
            "iterations_by_batch_size": {str(k): v for k, v in iterations.items()},
            "configs": configs,
        }
    return {
        "source": {
            "description": (
                "Reference run lengths of Pollux/AdaptDL evaluation jobs: iterations to the end of the "
                "application's training trace (epoch max_epochs-1 of validation-<batch>.csv) times the "
                "measured step time with replicas packed 4 per node (placements.csv, scalability.csv), "
                "as the artifact's workload generator estimates job completion times."
            ),
            "data": "../shared/data/pollux/profiles (Pollux/AdaptDL artifact, Apache-2.0)",
            "method_reference": "petuum/adaptdl simulator/applications.py: Application.get_configurations",
            "script": "scripts/derive_pollux_reference.py",
            "profiles_sha256": digest.hexdigest(),
            "gpus_per_node": GPUS_PER_NODE,
        },
        "applications": apps,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", type=Path, default=DEFAULT_PROFILES)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if not args.profiles.is_dir():
        print(f"profiles directory {args.profiles} not found (needs ../shared/data)", file=sys.stderr)
        return 2
    result = derive(args.profiles)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    n = sum(len(a["configs"]) for a in result["applications"].values())
    print(f"wrote {args.out}: {n} configurations for {len(result['applications'])} applications")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
