"""Per-job agreement with the Tiresias reference simulator (``dlas-gpu``) on Philly jobs.

    python scripts/peer_tiresias.py --reference-log /tmp/tiresias/logs/dlas/job.csv [--trace philly] [--jobs 4000]

The reference (SymbioticLab/Tiresias ``simulator/run_sim.py``, Python 2.7) is run outside
this repository, unchanged apart from a stub for its unused ``cplex`` import, on the first
``--jobs`` Philly jobs (``--trace``, the bundled ``philly`` data set by default; job ids
1..N in submit order, submit times and durations in whole seconds) with
``--scheme=count --schedule=dlas-gpu`` on one switch of 64 nodes x 8 GPUs;
docs/peer-agreement.md has the steps. Ours runs ``tiresias`` with its defaults,
``placement=scattered`` (any free GPUs: the reference's count-only scheme) and no restore
penalty. Prints both average JCTs, preemption counts and the share of jobs whose JCTs
agree within 1 s and within 1%.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.overheads import Overheads
from shapeshift.model import JobSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-log", required=True, type=Path)
    parser.add_argument("--trace", default="philly", help="Philly trace file or data set name (default: philly)")
    parser.add_argument("--jobs", default=4000, type=int)
    args = parser.parse_args()
    frame = read_workload(args.trace).frame.iloc[: args.jobs]
    jobs = [
        JobSpec(job_id=str(i + 1), submit_time=float(int(s)), num_gpus=int(g), duration=float(int(d)))
        for i, (s, g, d) in enumerate(zip(frame["submit_time"], frame["num_gpus"], frame["duration"], strict=True))
    ]
    policy = make_policy("tiresias", {"placement": "scattered"})
    result = simulate(jobs, shorthand_cluster(64, 8), policy, overheads=Overheads(0.0, 0.0))
    ours = pd.DataFrame(
        {
            "job_id": [int(j.spec.job_id) for j in result.jobs],
            "jct_ours": [np.nan if j.end_time is None else j.end_time - j.spec.submit_time for j in result.jobs],
            "preempt_ours": [j.preemptions for j in result.jobs],
        }
    )
    ref = pd.read_csv(args.reference_log)[["job_id", "JCT", "preempt"]]
    both = ref.merge(ours, on="job_id")
    diff = (both["jct_ours"] - both["JCT"]).abs()
    a, b = both["JCT"].mean(), both["jct_ours"].mean()
    print(f"{len(both)} jobs paired of {len(ref)} (reference) and {len(ours)} (ours)")
    print(f"average JCT: reference {a:.1f} s, ours {b:.1f} s ({100 * (b - a) / a:+.2f}%)")
    print(f"preemptions: reference {int(both['preempt'].sum())}, ours {int(both['preempt_ours'].sum())}")
    close = 100 * (diff <= 0.01 * both["JCT"]).mean()
    print(f"jobs within 1 s: {100 * (diff <= 1).mean():.1f}%, within 1%: {close:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
