"""Derive reference run lengths for the Pollux evaluation workload.

    python scripts/derive_pollux_reference.py [--profiles DIR|NAME] [--out FILE]

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
  node (the artifact's 16 x 4-GPU cluster), interpolated as the simulator does
  (``shapeshift.perf.pollux.profiles``); the batch is split over replicas as the
  simulator runs a job at a target batch (``Job.update_local_bsz``): a local batch above
  the application's largest uses gradient accumulation, and a single GPU above the
  initial batch accumulates at least once (extra micro-steps cost
  ``step_time - sync_time`` each);
* duration = iterations x step time.

Output: ``src/shapeshift/data/pollux_reference.json``, a grid over the replica counts
the generator considers (1, 2, 4, 6, 8, 12, 16, 24, 32, 48) and every validated batch
size; configurations outside the measured range are left out. Derived figures only;
the profiles themselves are the bundled ``pollux-profiles`` data set (the default
``--profiles``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import pandas as pd

from shapeshift import datasets
from shapeshift.engine.batching import split_batch
from shapeshift.errors import InputError
from shapeshift.model import BatchSpec
from shapeshift.perf.pollux.profiles import APPLICATIONS, ApplicationProfile
from shapeshift.perf.pollux.reference import GPUS_PER_NODE, packed, run_length

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROFILES = "pollux-profiles"
DEFAULT_OUT = ROOT / "src" / "shapeshift" / "data" / "pollux_reference.json"

REPLICAS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48)


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
        profile = ApplicationProfile(directory, app)
        iterations = {bsz: int(frame["iteration"].iloc[epoch]) for bsz, frame in sorted(validation.items())}
        configs = []
        for replicas in REPLICAS:
            placement = packed(replicas)
            for bsz in iterations:
                if math.ceil(bsz / replicas - 1e-8) < profile.min_local:
                    continue
                batch = BatchSpec(bsz, profile.init_batch, profile.max_batch, profile.min_local, profile.max_local)
                split = split_batch(batch, bsz, replicas)
                if not profile.measured(placement, split.atomic):
                    continue
                steps, seconds = run_length(str(profiles.resolve()), app, replicas, bsz)
                if steps == 0:
                    continue
                configs.append(
                    {
                        "replicas": replicas,
                        "batch_size": bsz,
                        "iterations": steps,
                        "step_time_s": round(seconds / steps, 6),
                        "duration_s": round(seconds, 1),
                    }
                )
        apps[app] = {
            "max_epochs": settings["max_epochs"],
            "batch": {
                "initial": profile.init_batch,
                "max": profile.max_batch,
                "min_local": profile.min_local,
                "max_local": profile.max_local,
            },
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
            "data": "pollux-profiles data set (Pollux/AdaptDL artifact, Apache-2.0)",
            "method_reference": "petuum/adaptdl simulator/applications.py: Application.get_configurations",
            "script": "scripts/derive_pollux_reference.py",
            "profiles_sha256": digest.hexdigest(),
            "gpus_per_node": GPUS_PER_NODE,
        },
        "applications": apps,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--profiles",
        default=DEFAULT_PROFILES,
        help=f"profiles directory or data set name (default: {DEFAULT_PROFILES})",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    try:
        profiles = datasets.locate(args.profiles)
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2
    if not profiles.is_dir():
        print(f"profiles directory {profiles} not found", file=sys.stderr)
        return 2
    result = derive(profiles)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    n = sum(len(a["configs"]) for a in result["applications"].values())
    print(f"wrote {args.out}: {n} configurations for {len(result['applications'])} applications")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
