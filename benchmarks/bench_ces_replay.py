"""CES (Helios cluster energy saving) figures on the Philly node series.

Run: python benchmarks/bench_ces_replay.py [SERIES] [--sim]

SERIES is a node series file or data set name (default: the bundled
``philly-node-sequence``). Prints the forecast SMAPE on the 14 held-out days (LightGBM
vs seasonal naive), the replay figures with the default parameters and a small sweep of
the buffer sigma. With ``--sim`` it also runs FIFO on the bundled Philly trace and VC
cluster with and without the in-simulation CES component and prints energy saved
against the JCT impact.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys
import time
from pathlib import Path

from shapeshift import datasets
from shapeshift.energy.ces import CESConfig
from shapeshift.energy.replay import read_node_series, run_replay
from shapeshift.errors import InputError

DEFAULT = "philly-node-sequence"


def replay_figures(series_path: Path) -> None:
    series = read_node_series(series_path)
    started = time.perf_counter()
    result = run_replay(series)
    wall = time.perf_counter() - started
    s, f = result.summary, result.summary["forecast"]
    print(f"## CES replay: {s['series']} ({s['window_start']} .. {s['window_end']}, {s['days']:.1f} days)")
    print()
    print("| forecaster | SMAPE on held-out days |")
    print("|---|---|")
    print(f"| LightGBM ({f['config']['num_trees']} trees, features >= 3 h old) | {f['smape_lightgbm_pct']:.2f} % |")
    print(f"| seasonal naive (same bin one day earlier) | {f['smape_seasonal_naive_pct']:.2f} % |")
    print()
    print("| metric | value |")
    print("|---|---|")
    rows = [
        (
            "average total / active / powered nodes",
            f"{s['avg_total_nodes']:.1f} / {s['avg_active_nodes']:.1f} / {s['avg_powered_nodes']:.1f}",
        ),
        ("average sleeping nodes", f"{s['avg_sleeping_nodes']:.1f}"),
        ("wake-ups per day", f"{s['wakeups_per_day']:.2f} ({s['nodes_woken_per_day']:.1f} nodes/day)"),
        ("power-downs per day", f"{s['power_downs_per_day']:.2f}"),
        (
            "node utilization before -> after",
            f"{100 * s['utilization_before']:.1f} % -> {100 * s['utilization_after']:.1f} %",
        ),
        (
            "bins short of powered nodes (node-bins waiting for a boot)",
            f"{s['shortage_bins']} ({s['shortage_node_bins']})",
        ),
        (
            "energy saved",
            f"{s['energy_node_hours_saved']:,.0f} node-hours = {s['energy_kwh_saved']:,.0f} kWh "
            f"({100 * s['energy_saved_fraction']:.1f} %)",
        ),
        ("wall time (forecast + replay)", f"{wall:.2f} s"),
    ]
    for name, value in rows:
        print(f"| {name} | {value} |")
    print()
    print("Buffer sweep (same forecast):")
    print()
    print("| buffer (nodes) | avg sleeping | wake-ups/day | node-bins waiting | utilization after | kWh saved |")
    print("|---|---|---|---|---|---|")
    for buffer in (0, 10, 20, 40):
        r = run_replay(series, CESConfig(buffer=buffer)).summary
        print(
            f"| {buffer} | {r['avg_sleeping_nodes']:.1f} | {r['wakeups_per_day']:.2f} | {r['shortage_node_bins']} "
            f"| {100 * r['utilization_after']:.1f} % | {r['energy_kwh_saved']:,.0f} |"
        )
    print()


def sim_figures() -> None:
    from shapeshift.cluster import load_cluster
    from shapeshift.energy.sim_component import CESPolicy, energy_extra
    from shapeshift.policies.framework.registry import make_policy
    from shapeshift.sim.simulator import simulate
    from shapeshift.workloads.readers import read_workload

    workload = read_workload("philly")
    cluster = load_cluster("philly-vcs")
    jobs = workload.jobs()
    t0 = time.perf_counter()
    baseline = simulate(jobs, cluster, make_policy("fifo"))
    t1 = time.perf_counter()
    ces = CESPolicy(make_policy("fifo"), cluster, CESConfig())
    result = simulate(jobs, cluster, ces)
    t2 = time.perf_counter()
    e = energy_extra(result, baseline, ces)
    print("## CES inside the simulation: FIFO, Philly trace, 352 nodes in 11 VCs, boot delay 300 s")
    print()
    print("| metric | value |")
    print("|---|---|")
    base, change = e["energy_baseline_avg_jct"], e["energy_avg_jct_change_pct"]
    print(f"| average JCT without / with CES | {base:,.0f} s / {base * (1 + change / 100):,.0f} s ({change:+.2f} %) |")
    share = 100 * e["energy_saved_fraction"]
    print(f"| node-hours powered down | {e['energy_node_hours_saved']:,.0f} ({share:.1f} % of node-time) |")
    print(f"| energy saved | {e['energy_kwh_saved']:,.0f} kWh |")
    print(f"| average nodes off | {e['energy_avg_nodes_off']:.1f} |")
    print(f"| wake-ups / power-downs | {e['energy_wakeups']} / {e['energy_power_downs']} |")
    print(f"| jobs that waited for a boot (estimate) | {e['energy_jobs_waited_for_boot']} |")
    print(f"| wall time without / with CES | {t1 - t0:.1f} s / {t2 - t1:.1f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("series", nargs="?", default=DEFAULT, help=f"node series file or data set name ({DEFAULT})")
    parser.add_argument("--sim", action="store_true", help="also run FIFO on Philly with and without CES")
    args = parser.parse_args()
    try:
        path = datasets.locate(args.series)
    except InputError as exc:
        sys.exit(str(exc))
    if not path.exists():
        sys.exit(f"node series {path} not found (pass its path or a data set name)")
    replay_figures(path)
    if args.sim:
        sim_figures()


if __name__ == "__main__":
    main()
