"""Per-job agreement with Synergy's own simulator on its shipped 100-job traces.

    python scripts/peer_synergy.py --trace TRACE --reference fair=PEER_FAIR.csv --reference tune=PEER_TUNE.csv

The reference (msr-fiddle/synergy ``simulator/``, FIFO scheduler, ``fair`` = Synergy's
GPU-proportional allocation, ``tune`` = Synergy-Tune, on ``configs/deployment.ini``: 4
servers x 8 GPUs, 24 CPUs, 500 GB) is run outside this repository by
``scripts/peer_synergy_reference.py`` (docs/peer-agreement.md has the steps), which
writes one CSV per run with columns ``job_id, start, finish, jct``. Ours runs the same
trace (``read_synergy``) on the same cluster with ``throughput: synergy`` (Synergy's
profiles) and no restore pause (Synergy's simulator charges none; the policy's re-tune
rule then takes every gain, ``restore_penalty=0``): ``fifo``, ``synergy
mode=proportional`` and ``synergy`` (tune, 300 s rounds). Prints average JCT, the share
of jobs whose JCT and whose run time (start to finish: what the speed model and the CPU
decisions set) agree within one of Synergy's 300 s rounds, and the median run-time gap
(Synergy's minus ours).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.engine.overheads import Overheads
from shapeshift.model import ClusterSpec, NodeSpec
from shapeshift.perf.synergy_speed import SynergySpeedModel
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload

#: Synergy's ``configs/deployment.ini``: 4 servers x (8 GPUs, 24 CPUs, 500 GB).
SYNERGY_DEPLOYMENT = ClusterSpec(
    tuple(NodeSpec(name=f"server{i}", gpus=8, cpus=24, mem_gb=500, gpu_type="V100") for i in range(4))
)
#: Synergy's round (s): its simulator starts and ends jobs on these boundaries.
ROUND = 300.0
#: Which of ours answers which reference run.
OURS = {
    "fair": [("fifo", {}), ("synergy", {"mode": "proportional"})],
    "tune": [("synergy", {"restore_penalty": "0"}), ("synergy", {"restore_penalty": "0", "retune_round": "none"})],
}


def ours_jobs(trace: Path, policy: str, params: dict[str, str]) -> pd.DataFrame:
    jobs = read_workload(trace, "synergy").jobs()
    result = simulate(
        jobs,
        SYNERGY_DEPLOYMENT,
        make_policy(policy, params),
        throughput=SynergySpeedModel(SYNERGY_DEPLOYMENT),
        overheads=Overheads(0.0, 0.0),
    )
    done = [j for j in result.jobs if j.end_time is not None and j.first_start is not None]
    return pd.DataFrame(
        {
            "jct": [j.end_time - j.spec.submit_time for j in done],
            "run": [j.end_time - j.first_start for j in done],
        },
        index=pd.Index([int(j.spec.job_id) for j in done], name="job_id"),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", required=True, type=Path)
    parser.add_argument("--reference", action="append", default=[], help="MODE=CSV (MODE: fair or tune)")
    args = parser.parse_args()
    print(
        "| reference | ours | Synergy avg JCT (s) | ours (s) | difference | JCT within 300 s "
        "| run time within 300 s | median run-time gap (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for item in args.reference:
        mode, _, path = item.partition("=")
        ref = pd.read_csv(path).set_index("job_id")
        ref_run = ref["finish"] - ref["start"]
        for policy, params in OURS[mode]:
            ours = ours_jobs(args.trace, policy, params).reindex(ref.index)
            jct_gap = (ours["jct"] - ref["jct"]).abs()
            run_gap = ref_run - ours["run"]  # Synergy holds GPUs to the end of a round
            a, b = ref["jct"].mean(), ours["jct"].mean()
            label = policy + "".join(f" {k}={v}" for k, v in params.items())
            print(
                f"| {mode} | {label} | {a:,.0f} | {b:,.0f} | {100 * (b - a) / a:+.1f}% "
                f"| {100 * (jct_gap <= ROUND).mean():.0f}% | {100 * (run_gap.abs() <= ROUND).mean():.0f}% "
                f"| {float(np.median(run_gap)):+.0f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
