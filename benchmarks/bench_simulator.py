"""FIFO + consolidated placement over the whole Philly trace on its virtual clusters.

    python benchmarks/bench_simulator.py [--trace PATH|NAME] [--cluster PATH|NAME] [--policy NAME]
    python benchmarks/bench_simulator.py --against REF [--repeats 3]
    python benchmarks/bench_simulator.py --workers 2 [--repeats 3]

The trace and cluster default to the bundled ``philly`` and ``philly-vcs`` data sets (a
name is resolved to its unpacked file first, so older revisions read it as a path).
Prints jobs, events, wall seconds (read, build, simulate) and peak memory. Goal on a
2-core machine: under 30 s and under 2 GB. The run goes through ``shapeshift.runs.run``,
the path every front door takes (job list, simulation and summary).

``--against REF`` also measures the code at git revision ``REF`` (checked out into a
temporary worktree) on the same machine, alternating old and new ``--repeats`` times,
and prints the ratio of the median build + simulate times old / new (> 1: the new code is
faster), in wall time and in CPU time (the steadier figure when other work shares the
machine).

``--workers N`` times the same run in one process and split by partition over N
processes (``run(spec, workers=N)``), alternating, and prints the ratio and whether the
two summaries are identical (they must be).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(trace: Path, cluster_path: Path, policy: str) -> dict[str, float | int | str]:
    """One timed run with whatever ``shapeshift`` is importable (old or new API)."""
    from shapeshift.cluster import load_cluster
    from shapeshift.workloads.readers import read_workload

    t0 = time.perf_counter()
    workload = read_workload(trace)
    t1 = time.perf_counter()
    cluster = load_cluster(cluster_path)
    c1 = time.process_time()
    try:
        from shapeshift.runs import RunSpec, run
    except ImportError:  # a revision from before the run API
        from shapeshift.analysis.metrics import summarize
        from shapeshift.policies.framework.registry import make_policy
        from shapeshift.sim.simulator import simulate

        jobs = workload.jobs()
        t2 = time.perf_counter()
        result = simulate(jobs, cluster, make_policy(policy), workload_name=workload.name)
        summarize(result)  # what the simulate command did next; run() includes it
        t3, c3 = time.perf_counter(), time.process_time()
        api = "simulate() + summarize()"
    else:
        t2 = time.perf_counter()
        result = run(RunSpec(workload=workload, cluster=cluster, policy=policy)).simulation
        t3, c3 = time.perf_counter(), time.process_time()
        api = "run(RunSpec)"
    return {
        "api": api,
        "jobs": len(result.jobs),
        "completed": sum(1 for j in result.jobs if j.state.value == "completed"),
        "rejected": len(result.rejections),
        "events": result.events,
        "decisions": result.decisions,
        "read": t1 - t0,
        "build": t2 - t1,
        "simulate": t3 - t2,
        "total": t3 - t0,
        "cpu": c3 - c1,  # build + simulate, CPU seconds: steadier than wall time on a shared machine
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _subprocess(src: Path, args: argparse.Namespace) -> dict[str, float]:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
        "import bench_simulator as b; from pathlib import Path;"
        "print(json.dumps(b.measure(Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5])))"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(src),
            str(ROOT / "benchmarks"),
            str(args.trace),
            str(args.cluster),
            args.policy,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def against(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "old"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.against],
            check=True,
            capture_output=True,
        )
        try:
            old, new = [], []
            for i in range(args.repeats):
                old.append(_subprocess(tree / "src", args))
                new.append(_subprocess(ROOT / "src", args))
                o, n = old[-1]["build"] + old[-1]["simulate"], new[-1]["build"] + new[-1]["simulate"]
                print(
                    f"repeat {i + 1}: old {o:.2f} s ({old[-1]['cpu']:.2f} s CPU), "
                    f"new {n:.2f} s ({new[-1]['cpu']:.2f} s CPU)",
                    flush=True,
                )
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    same = all(
        o[k] == n[k] for o, n in zip(old, new, strict=True) for k in ("jobs", "completed", "events", "decisions")
    )
    # Building the job list moved inside run(): compare build + simulate on both sides.
    o_med = statistics.median(r["build"] + r["simulate"] for r in old)
    n_med = statistics.median(r["build"] + r["simulate"] for r in new)
    print(f"old ({args.against}, {old[0]['api']}): median build + simulate {o_med:.2f} s, {args.repeats} repeats")
    print(f"new (working tree, {new[0]['api']}): median build + simulate {n_med:.2f} s")
    o_cpu = statistics.median(r["cpu"] for r in old)
    n_cpu = statistics.median(r["cpu"] for r in new)
    print(f"ratio old / new   {o_med / n_med:.2f} (> 1: new is faster); same events and decisions: {same}")
    print(f"CPU time          old {o_cpu:.2f} s, new {n_cpu:.2f} s: ratio {o_cpu / n_cpu:.2f}")
    return 0


def split(args: argparse.Namespace) -> int:
    from shapeshift.cluster import load_cluster
    from shapeshift.runs import RunSpec, run
    from shapeshift.workloads.readers import read_workload

    spec = RunSpec(workload=read_workload(args.trace), cluster=load_cluster(args.cluster), policy=args.policy)
    times: dict[int, list[float]] = {1: [], args.workers: []}
    summaries = {}
    for i in range(args.repeats):
        for workers in times:
            t0 = time.perf_counter()
            summary = dict(run(spec, workers=workers).summary)
            times[workers].append(time.perf_counter() - t0)
            summary.pop("sim_wall_seconds")
            summaries[workers] = summary
        print(f"repeat {i + 1}: " + ", ".join(f"{w} process(es) {t[-1]:.2f} s" for w, t in times.items()), flush=True)
    one, many = (statistics.median(t) for t in times.values())
    print(f"one process {one:.2f} s, {args.workers} processes {many:.2f} s (median of {args.repeats}, wall)")
    print(f"ratio one / split {one / many:.2f}; identical summaries: {summaries[1] == summaries[args.workers]}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="philly", help="trace file or data set name (default: philly)")
    parser.add_argument("--cluster", default="philly-vcs", help="cluster YAML or data set name (default: philly-vcs)")
    parser.add_argument("--policy", default="fifo")
    parser.add_argument("--against", help="git revision to compare with (e.g. a commit before a change)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1, help="compare one process with N (partitions split)")
    args = parser.parse_args()
    # Imported here: --against imports this module with an older shapeshift on the path.
    from shapeshift import datasets
    from shapeshift.errors import InputError

    try:
        args.trace, args.cluster = datasets.locate(args.trace), datasets.locate(args.cluster)
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2
    for flag, path in (("--trace", args.trace), ("--cluster", args.cluster)):
        if not path.exists():
            print(f"{flag}: {path} not found", file=sys.stderr)
            return 2
    if args.against:
        return against(args)
    if args.workers > 1:
        return split(args)
    r = measure(args.trace, args.cluster, args.policy)
    print(f"policy            {args.policy} (consolidated placement), via {r['api']}")
    print(f"jobs              {r['jobs']} ({r['completed']} completed, {r['rejected']} rejected)")
    print(f"events            {r['events']}")
    print(f"decisions         {r['decisions']}")
    print(f"read trace        {r['read']:6.2f} s")
    print(f"build jobs        {r['build']:6.2f} s")
    print(f"simulate          {r['simulate']:6.2f} s  ({r['events'] / r['simulate']:,.0f} events/s)")
    print(f"total wall        {r['total']:6.2f} s  (goal < 30 s: ratio {r['total'] / 30:.2f})")
    print(f"peak memory       {r['peak_mb']:6.0f} MB (goal < 2048 MB: ratio {r['peak_mb'] / 2048:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
