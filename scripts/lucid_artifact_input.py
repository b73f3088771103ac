"""Inputs for running Lucid beside its authors' simulator on Philly, 1-7 October 2017.

    python scripts/lucid_artifact_input.py OUT_DIR [--artifact ARTIFACT/simulation]

Writes into ``OUT_DIR`` (outside the repository):

* ``philly-oct1-7.csv``: the bundled ``philly`` jobs submitted 2017-10-01 00:00:00 to
  2017-10-07 23:59:00 with GPUs (10,650 jobs), stably sorted by submit time, every job in
  one VC ``philly``; Shapeshift numbers them 0.. in this order;
* ``philly-44x8-shared.yaml``: one VC of 44 nodes x 8 P100 (16 GB), two jobs per GPU;

and, with ``--artifact`` (a work tree of S-Lab-System-Group/Lucid ``simulation/``), the
artifact's Philly input under ``OUT_DIR/artifact``: ``cluster_full_log.csv`` (the same jobs
with the same ids, and every later Philly job for its estimator notebook to train on),
``vc_config.csv`` (``philly`` = 44 nodes), and ``OUT_DIR/lucid-profiles.csv``: each
week job's configuration with the artifact's label, for Shapeshift's
``--policy-arg profiles=...`` (per-configuration sharing scores). Each job gets the model Shapeshift draws for it
(``shapeshift.perf.colocation``: a hash of id and seed 0) and one of that model's
profiled configurations (dataset, batch size, AMP) from the artifact's own
``analyzer/single_data.csv``, by a hash of its id, with that configuration's measured
figures. The artifact's figures are read from its tree at run time and written only
under ``OUT_DIR``; nothing of them is kept in this repository.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import pandas as pd

from shapeshift.datasets import path as dataset_path
from shapeshift.model import JobSpec
from shapeshift.perf.colocation import profile_of

FIRST, LAST = "2017-10-01 00:00:00", "2017-10-07 23:59:00"
NODES = 44

CLUSTER = f"""# Philly's 1-7 October 2017 as the Lucid artifact runs it: one VC of {NODES} x 8 GPUs
# (FIFO's average JCT then matches the thesis's 37.1 h), two jobs per GPU for Lucid's pairs.
nodes:
  - count: {NODES}
    gpus: 8
    cpus: 64
    mem_gb: 512
    gpu_type: P100
    gpu_mem_gb: 16
partitions:
  philly: {NODES}
gpu_share_limit: 2
"""


def _pick(job_id: str, n: int) -> int:
    digest = hashlib.blake2b(f"config\x1f{job_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--artifact", type=Path, help="the artifact's simulation/ directory")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    jobs = pd.read_csv(dataset_path("philly"))
    jobs["ts"] = pd.to_datetime(jobs["timestamp"])
    jobs = jobs[(jobs["num_gpus"] > 0) & (jobs["ts"] >= FIRST)].sort_values("ts", kind="stable")
    week = jobs[jobs["ts"] <= LAST]
    week.assign(cluster="philly")[["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]].to_csv(
        out / "philly-oct1-7.csv", index=False
    )
    (out / "philly-44x8-shared.yaml").write_text(CLUSTER)
    print(f"{len(week)} jobs -> {out / 'philly-oct1-7.csv'}")
    if args.artifact is None:
        return

    single = pd.read_csv(args.artifact / "analyzer" / "single_data.csv")
    configs = {m: g.reset_index(drop=True) for m, g in single.groupby("model")}
    rows = []
    for i, job in enumerate(jobs.itertuples(index=False)):
        job_id = str(i)
        model = profile_of(JobSpec(job_id, 0.0, 1, duration=1.0), 0).profiled_as
        options = configs[model]
        config = options.iloc[_pick(job_id, len(options))]
        rows.append(
            {
                "job_id": job_id,
                "user": "u",
                "vc": "philly",
                "gpu_num": int(job.num_gpus),
                "state": "COMPLETED",
                "submit_time": job.timestamp,
                "duration": round(job.duration),
                **{k: config[k] for k in ("dataset", "model", "batchsize", "amp", "speed")},
                **{k: config[k] for k in ("gpu_util", "gmem_util", "gmem", "label")},
            }
        )
    target = out / "artifact"
    target.mkdir(exist_ok=True)
    frame = pd.DataFrame(rows)
    frame.drop(columns="label").to_csv(target / "cluster_full_log.csv", index=False)
    profiles = ["job_id", "model", "dataset", "batchsize", "amp", "gpu_util", "gmem_util", "gmem", "label"]
    frame[profiles].head(len(week)).to_csv(out / "lucid-profiles.csv", index=False)
    (target / "vc_config.csv").write_text(f",num\nphilly,{NODES}\n")
    print(f"{len(rows)} jobs (from {FIRST}) -> {target / 'cluster_full_log.csv'}")


if __name__ == "__main__":
    main()
