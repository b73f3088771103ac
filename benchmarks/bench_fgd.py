"""Time ``shapeshift fill`` on the openb default trace at 1.3x (goal: >= 100x the authors' simulator).

    python benchmarks/bench_fgd.py [--placements fgd,random,...] [--seed 42]
        [--simulator DIR --reference GIT_DIR [--reuse] | --reference-run JSON | --reference-seconds S]

Prints, per placement, the wall and CPU time of one fill run (the reader excluded), its pod
events per second, and the estimated time of the paper's 10-seed x 6-placement figure on one
trace. The ratio against the authors' simulator (hkust-adsl/kubernetes-scheduler-simulator, Go):

- ``--simulator DIR``: builds it in ``DIR`` (outside this repository) and runs it on the same
  trace, placement and seed first (``shapeshift.gpushare.reference``; tens of minutes), then
  prints the measured ratio for that placement per pod event, CPU to CPU and wall to wall (the
  two random streams give runs of different lengths; a stopped run counts its prefix). ``--reuse`` reads
  a finished run there instead. Where ``go`` is absent it says so and falls back;
- ``--reference-run JSON``: the record ``scripts/peer_fgd.py --simulator`` wrote;
- otherwise the reference is assumed at 10 pod events per second (the fast end of the 6-10
  the issue measured), and only the absolute times are measurements.

The verdict uses CPU time: on a shared machine wall time also counts the other work competing
for the cores (the wall ratio is printed beside it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from shapeshift.gpushare import reference as ref
from shapeshift.gpushare.fill import run_fill
from shapeshift.gpushare.openb import read_nodes, read_pods
from shapeshift.gpushare.placement import PLACEMENTS

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "alibaba-openb"
GOAL_RATIO = 100.0
#: Events per second of the reference as the issue measured it (the fast end of 6-10).
REFERENCE_EVENTS_PER_SECOND = 10.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--placements", default=",".join(PLACEMENTS))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--reference-seconds", type=float, default=None, help="an assumed reference time")
    parser.add_argument("--reference-run", type=Path, help="JSON written by scripts/peer_fgd.py --simulator")
    parser.add_argument("--simulator", type=Path, help="build and run the reference here first")
    parser.add_argument("--reference", type=Path, help="the reference's git directory (for an empty --simulator)")
    parser.add_argument("--reuse", action="store_true", help="--simulator: read its finished run instead")
    args = parser.parse_args()
    node_file = args.data / "openb_node_list_gpu_node.csv"
    if not node_file.exists():
        print(f"trace {node_file} not found (needs ../shared/data)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    nodes = read_nodes(node_file)
    pods = read_pods(args.data / "openb_pod_list_default.csv")
    print(f"read {len(nodes)} nodes, {len(pods)} pods in {time.perf_counter() - t0:.2f} s")
    measured = measured_reference(args, node_file.parent)
    if measured is not None:
        print(
            f"reference ({measured['placement']}, seed {measured['seed']}): {measured['events']} events, "
            f"wall {measured['wall']:.0f} s, cpu {measured['cpu']:.0f} s"
        )
    total_cpu = 0.0
    worst_ratio = float("inf")
    for name in [p for p in args.placements.split(",") if p]:
        cpu0 = time.process_time()
        run = run_fill(nodes, pods, name, inflate=1.3, seed=args.seed)
        cpu = time.process_time() - cpu0
        events = len(run.events)
        total_cpu += cpu
        reference = args.reference_seconds or events / REFERENCE_EVENTS_PER_SECOND
        ratio_wall, ratio_cpu = reference / run.seconds, reference / cpu
        if measured is not None and measured["placement"] == name and measured["seed"] == args.seed:
            # Per event: the two streams differ in length, and a stopped reference run covers a prefix.
            scale = events / measured["events"]
            ratio_wall, ratio_cpu = measured["wall"] * scale / run.seconds, measured["cpu"] * scale / cpu
            reference = measured["cpu"] * scale
            print(f"  measured, per event: x{ratio_cpu:.0f} on CPU time, x{ratio_wall:.0f} on wall time, same seed")
        worst_ratio = min(worst_ratio, ratio_cpu)
        print(
            f"{name:15s} {events:6d} events  wall {run.seconds:6.2f} s  cpu {cpu:6.2f} s  "
            f"{events / cpu:6.0f} events/cpu-s  x{ratio_cpu:4.0f} (cpu), x{ratio_wall:4.0f} (wall) vs reference"
            f" {reference:.0f} s"
        )
    print(f"10 seeds x these placements: about {10 * total_cpu / 60:.1f} min of one core")
    verdict = "meets" if worst_ratio >= GOAL_RATIO else "MISSES"
    basis = "given seconds" if args.reference_seconds else f"{REFERENCE_EVENTS_PER_SECOND:g} events/s"
    if measured is not None:
        basis += f"; measured for {measured['placement']} above"
    print(
        f"slowest placement x{worst_ratio:.0f} on CPU time ({verdict} the x{GOAL_RATIO:.0f} goal; reference: {basis})"
    )
    return 0


def measured_reference(args: argparse.Namespace, data: Path) -> dict | None:
    """The measured reference run (placement, seed, events, wall and CPU seconds), if any."""
    if args.reference_run is not None:
        rec = json.loads(args.reference_run.read_text())
        return {
            "placement": rec["placement"],
            "seed": rec["seed"],
            "events": rec["reference_events"],
            "wall": rec["reference_wall_seconds"],
            "cpu": rec["reference_cpu_seconds"],
        }
    if args.simulator is None:
        return None
    reason = ref.go_missing_reason()
    if reason is not None:
        print(f"no measured reference: {reason}")
        return None
    ref.check_outside(args.simulator, Path(__file__).resolve().parents[1])
    if not (args.simulator / "go.mod").exists():
        if args.reference is None:
            print(f"no measured reference: {args.simulator} is empty and --reference is not given")
            return None
        ref.extract(args.reference, args.simulator)
    ref.build(args.simulator)
    workload = ref.prepare_input(args.simulator, data / "openb_pod_list_default.csv", data / ref.NODE_CSV)
    name = next(p for p in args.placements.split(",") if p)
    run = ref.run(args.simulator, workload, name, args.seed, reuse=args.reuse)
    return {
        "placement": name,
        "seed": args.seed,
        "events": len(run.events),
        "wall": run.wall_seconds,
        "cpu": run.cpu_seconds,
    }


if __name__ == "__main__":
    raise SystemExit(main())
