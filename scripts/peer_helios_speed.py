"""Speed of the Helios artifact's simulator and ours on the same Philly jobs, FIFO policy.

    python scripts/peer_helios_speed.py --helios-dir "/tmp/helios/QSSF Service" [--log-dir DIR] [--per-vc]

``--helios-dir`` is a copy, outside this repository and unchanged, of ``framework/QSSF Service``
of S-Lab-System-Group/HeliosArtifact with its Philly input already built in ``data/Philly``
(``cluster_log.csv`` and ``vc_dict_homo.pkl``, as docs/peer-agreement.md says; jobs submitted
in the same second in the Philly file's order, i.e. sorted stably, as ours keeps them). This script
only imports that copy's modules (``utils``, ``cluster``) and calls them: in one process, with
``TZ=UTC``, it times the artifact's ``utils.trace_philly_process`` and ``utils.trace_parser``
(once, as its ``simulator.py`` does) and then ``utils.simulate_vc(..., "fifo")`` with the
``consolidate`` placer for each VC in turn (its ``simulator.py`` runs the VCs through a
process pool; here they run one after another so that the CPU time compares with ours, one
process). Its per-VC logs go to ``<log-dir>/fifo``, which ``peer_helios.py --helios-log`` reads.

Then it times ours on the same jobs (submitted 2017-10-01 to 2017-11-30 23:59, as
peer_helios.py picks them, in the artifact's 11 VCs): reading the Philly file (the bundled
``philly`` data set, unpacked before timing; ``--trace``), the
window, ``read_workload``, the cluster, and ``simulate`` with ``fifo`` (no backfill) and no
overheads. Imports are not timed for either. Prints one table: simulator, jobs, wall seconds, CPU seconds (user+sys of
this process), average JCT; then the ratios and the load average before and after.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import time
from pathlib import Path

import pandas as pd
from peer_helios import WINDOW, window_rows  # this folder's comparison script

from shapeshift import datasets
from shapeshift.cluster import load_cluster
from shapeshift.engine.overheads import Overheads
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers import read_workload


class _Clock:
    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        out = (wall - self.wall, cpu - self.cpu)
        self.wall, self.cpu = wall, cpu
        return out


def _helios(helios_dir: Path, log_dir: Path, per_vc: bool) -> tuple[list[tuple[str, int, float, float, float]], list]:
    os.environ["TZ"] = "UTC"  # the artifact turns timestamps into seconds in the local time zone
    time.tzset()
    sys.path.insert(0, str(helios_dir))
    import cluster  # the artifact's modules, from --helios-dir
    import utils

    trace_dir = str(helios_dir / "data/Philly")
    (log_dir / "fifo").mkdir(parents=True, exist_ok=True)
    logger = utils.logger_init(file=str(log_dir / "fifo_consolidate"))
    for handler in [h for h in logger.handlers if type(h) is logging.StreamHandler]:
        logger.removeHandler(handler)  # its progress lines go to the log file only
    vc_dict = pd.read_pickle(f"{trace_dir}/vc_dict_homo.pkl")

    rows = []
    clock = _Clock()
    trace_df, start_ts = utils.trace_philly_process(trace_dir, WINDOW)
    trace = utils.trace_parser(trace_df)
    jobs = len(trace_df)
    rows.append(("helios parse", jobs, *clock.lap(), float("nan")))
    vcs = cluster.Cluster(vc_dict, 8, 96).vc_list
    for vc in vcs:
        utils.simulate_vc(trace, vc, "consolidate", str(log_dir / "fifo"), "fifo", logger, start_ts)
        wall, cpu = clock.lap()
        rows.append((f"helios {vc.vc_name}", trace.vc_trace(vc.vc_name).job_num(), wall, cpu, float("nan")))
        clock.lap()  # not the count above
    wall, cpu = sum(r[2] for r in rows), sum(r[3] for r in rows)
    logs = pd.concat(
        pd.read_csv(log_dir / "fifo" / vc.vc_name / f"fifo_consolidate_{vc.vc_name}_log.csv", dtype={"vc": str})
        for vc in vcs
    )
    jct = float((logs["end_time"] - logs["submit_time"]).mean())
    for i, vc in enumerate(vcs, start=1):
        part = logs[logs["vc"] == vc.vc_name]
        name, n, w, c, _ = rows[i]
        rows[i] = (name, n, w, c, float((part["end_time"] - part["submit_time"]).mean()))
    return (rows if per_vc else []) + [("helios total", jobs, wall, cpu, jct)], list(vc_dict)


def _ours(trace: Path, cluster_yaml: Path, out: Path, vcs: list) -> list[tuple[str, int, float, float, float]]:
    clock = _Clock()
    window = window_rows(trace)
    kept = window[window["cluster"].astype(str).isin(vcs)]
    out.mkdir(parents=True, exist_ok=True)
    kept.to_csv(out / "philly_window.csv", index=False)
    workload = read_workload(out / "philly_window.csv")
    cluster = load_cluster(cluster_yaml)
    read_wall, read_cpu = clock.lap()
    result = simulate(workload.jobs(), cluster, make_policy("fifo", {}), overheads=Overheads(0.0, 0.0))
    sim_wall, sim_cpu = clock.lap()
    done = [j.end_time - j.spec.submit_time for j in result.jobs if j.end_time is not None]
    jct = sum(done) / len(done)
    return [
        ("ours read", len(workload), read_wall, read_cpu, float("nan")),
        ("ours simulate", len(result.jobs), sim_wall, sim_cpu, jct),
        ("ours total", len(result.jobs), read_wall + sim_wall, read_cpu + sim_cpu, jct),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--helios-dir", required=True, type=Path, help="copy of the artifact's 'QSSF Service'")
    parser.add_argument("--log-dir", default=Path("/tmp/peer-helios-speed/log"), type=Path)
    parser.add_argument("--trace", default="philly", help="Philly trace file or data set name (default: philly)")
    parser.add_argument("--cluster", default="philly-vcs", help="cluster YAML or data set name (default: philly-vcs)")
    parser.add_argument("--out", default=Path("/tmp/peer-helios-speed"), type=Path)
    parser.add_argument("--per-vc", action="store_true", help="also print the parse step and each VC")
    args = parser.parse_args()
    trace, cluster = datasets.locate(args.trace), datasets.locate(args.cluster)  # unpacked outside the timing
    helios_dir = args.helios_dir.resolve()
    if Path(__file__).resolve().parents[1] in helios_dir.parents:
        parser.error("--helios-dir must be outside this repository")
    load = os.getloadavg()
    rows, vcs = _helios(helios_dir, args.log_dir.resolve(), args.per_vc)
    gc.collect()
    rows += _ours(trace, cluster, args.out, vcs)
    after = os.getloadavg()
    print(f"{'simulator':16} {'jobs':>6} {'wall s':>9} {'CPU s':>9} {'avg JCT s':>10}")
    for name, jobs, wall, cpu, jct in rows:
        print(f"{name:16} {jobs:6d} {wall:9.2f} {cpu:9.2f} {jct:10.1f}")
    theirs = next(r for r in rows if r[0] == "helios total")
    ours = next(r for r in rows if r[0] == "ours total")
    print(f"helios / ours: wall {theirs[2] / ours[2]:.1f}x, CPU {theirs[3] / ours[3]:.1f}x")
    print("load average before", " ".join(f"{x:.2f}" for x in load), "after", " ".join(f"{x:.2f}" for x in after))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
