"""Per-job agreement with Synergy's own simulator on its shipped 100-job traces.

    python scripts/peer_synergy.py --trace TRACE --reference fair=PEER_FAIR.csv --reference tune=PEER_TUNE.csv

The reference (msr-fiddle/synergy ``simulator/``, FIFO scheduler, ``fair`` = Synergy's
GPU-proportional allocation, ``tune`` = Synergy-Tune, on ``configs/deployment.ini``: 4
servers x 8 GPUs, 24 CPUs, 500 GB) is run outside this repository;
docs/peer-agreement.md has the steps and the driver that writes one CSV per run with
columns ``job_id, jct``. Ours runs the same trace (``read_synergy``) on the same cluster
with ``throughput: synergy`` (Synergy's profiles) and no restore penalty (Synergy's
simulator charges none): ``fifo``, ``synergy mode=proportional`` and ``synergy``
(tune, 300 s rounds). Prints average JCT and the share of jobs within 1% and 300 s (one
of Synergy's rounds).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.engine.overheads import Overheads
from shapeshift.model import ClusterSpec, NodeSpec
from shapeshift.perf.synergy_speed import SynergySpeedModel
from shapeshift.policies.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload

#: Synergy's ``configs/deployment.ini``: 4 servers x (8 GPUs, 24 CPUs, 500 GB).
SYNERGY_DEPLOYMENT = ClusterSpec(
    tuple(NodeSpec(name=f"server{i}", gpus=8, cpus=24, mem_gb=500, gpu_type="V100") for i in range(4))
)
#: Which of ours answers which reference run.
OURS = {
    "fair": [("fifo", {}), ("synergy", {"mode": "proportional"})],
    "tune": [("synergy", {}), ("synergy", {"retune_round": "none"})],
}


def ours_jcts(trace: Path, policy: str, params: dict[str, str]) -> pd.Series:
    jobs = read_workload(trace, "synergy").jobs()
    result = simulate(
        jobs,
        SYNERGY_DEPLOYMENT,
        make_policy(policy, params),
        throughput=SynergySpeedModel(SYNERGY_DEPLOYMENT),
        overheads=Overheads(0.0, 0.0),
    )
    return pd.Series(
        {int(j.spec.job_id): np.nan if j.end_time is None else j.end_time - j.spec.submit_time for j in result.jobs}
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", required=True, type=Path)
    parser.add_argument("--reference", action="append", default=[], help="MODE=CSV (MODE: fair or tune)")
    args = parser.parse_args()
    print("| reference | ours | Synergy avg JCT (s) | ours (s) | difference | jobs within 1% | within 300 s |")
    print("|---|---|---|---|---|---|---|")
    for item in args.reference:
        mode, _, path = item.partition("=")
        ref = pd.read_csv(path).set_index("job_id")["jct"]
        for policy, params in OURS[mode]:
            ours = ours_jcts(args.trace, policy, params).reindex(ref.index)
            diff = (ours - ref).abs()
            a, b = ref.mean(), ours.mean()
            label = policy + "".join(f" {k}={v}" for k, v in params.items())
            print(
                f"| {mode} | {label} | {a:,.0f} | {b:,.0f} | {100 * (b - a) / a:+.1f}% "
                f"| {100 * (diff <= 0.01 * ref).mean():.0f}% | {100 * (diff <= 300).mean():.0f}% |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
