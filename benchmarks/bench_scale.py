"""Every classic policy on seeded synthetic traces of growing size, with and without a queue.

    python benchmarks/bench_scale.py [--sizes 10000,30000,100000] [--policies a,b] [--regimes queue,free]
    python benchmarks/bench_scale.py --million          # 1,000,000 jobs, fifo, rate x10 on a cluster x10

The trace is what ``shapeshift workload generate --kind poisson --jobs N --rate 500 --seed 1``
writes (Philly-fitted sizes and durations, 500 jobs/hour). Three clusters:

* ``load80``: our reading of the issue's "cluster sized for about 80% utilisation", sized
  for each trace: ``round(demand / 0.8 / 8)`` nodes of 8 GPUs, where ``demand`` is the
  trace's offered load, the GPUs its jobs would hold on average over the arrival window
  (first to last submission) if each started on arrival (``offered_gpus``). Durations
  are heavy-tailed (mean 5.2 h, longest 1,270 h), so jobs pile up through the window and
  a longer trace offers more: 1,254 GPUs at 10k jobs, 2,590 at 30k, 4,340 at 100k, hence
  196, 405 and 678 nodes. The summary's ``gpu_utilization`` (busy over the whole
  makespan, which the longest job's drain stretches) reads only 7-18% there;
* ``free``: 1000 x 8 GPUs, where every job starts at once and nothing is preempted;
* ``overload``: 150 x 8 GPUs for every size, the cluster of the issue's own opening
  measurement (the issue says 51% ``gpu_utilization``; fifo gives 50% at 100k), and the
  benchmark's only long-queue regime until session 11 (then called ``queue``). Its
  offered load is 1.05x its GPUs at 10k jobs, 2.2x at 30k and 3.6x at 100k, so its queue
  grows with the trace, and a policy whose rules restart more jobs the longer the queue
  makes preemptions that grow faster than the trace here (las: exponent 2.26, gavel 2.41).
Each (policy, regime, size) runs in its own process, so the peak memory printed (max RSS)
is that run's alone. Printed per run: wall seconds of the simulation (``run``: build,
simulate and summary; the trace is read before timing), decisions, peak RSS; per policy and
regime, the growth exponent b of wall = a * jobs^b fitted over the sizes (1 = linear), and
the same fit of the preemptions the policy's rules make (where every size has some).
Goals on the project's 2-core machine: every policy under 30 s at 100k jobs on a
cluster sized for about 80% utilisation (``load80``) and on one without queueing (``free``),
b under 1.2; 1,000,000 jobs with fifo under 60 s and 4 GB. ``overload`` is a stress test:
its load grows with the trace, and at these sizes las's and gavel's rules restart more
jobs the longer the queue, so its exponents measure the regime's change as much as the
simulator (README, "Scale"; docs/performance.md, sessions 11 and 12).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: (label, registry name, parameters): every registered classic policy, fifo twice.
POLICIES: list[tuple[str, str, dict[str, object]]] = [
    ("fifo", "fifo", {}),
    ("fifo-backfill", "fifo", {"backfill": True}),
    ("sjf", "sjf", {}),
    ("srtf", "srtf", {}),
    ("las", "las", {}),
    ("tiresias", "tiresias", {}),
    ("themis", "themis", {}),
    ("gavel", "gavel", {}),
    ("optimus", "optimus", {}),
    ("qssf", "qssf", {}),
]
#: Fixed clusters; ``load80`` is sized per trace (``load80_cluster``).
CLUSTERS = {"free": "1000x8", "overload": "150x8"}
REGIMES = ("load80", "free", "overload")
RATE = 500.0
SEED = 1
#: The utilisation the ``load80`` cluster is sized for, and its node size.
TARGET_LOAD = 0.8
GPUS_PER_NODE = 8


@functools.cache
def offered_gpus(trace: Path) -> float:
    """GPUs the trace's jobs hold on average over its arrival window (first to last
    submission) if each job starts on arrival and runs its duration: the offered load.
    Read once per trace (a trace does not change during a benchmark run)."""
    import numpy as np
    import pandas as pd

    frame = pd.read_csv(trace, usecols=["submit_time", "num_gpus", "duration"])
    submit = frame["submit_time"].to_numpy(float)
    start, end = submit.min(), submit.max()
    if end <= start:
        raise SystemExit(f"{trace}: every job is submitted at once; no arrival window to average over")
    held = np.clip(np.minimum(submit + frame["duration"].to_numpy(float), end) - submit, 0.0, None)
    return float((held * frame["num_gpus"].to_numpy(float)).sum() / (end - start))


def load80_cluster(trace: Path) -> str:
    """The cluster whose GPUs the trace's offered load fills to ``TARGET_LOAD``."""
    nodes = max(1, round(offered_gpus(trace) / TARGET_LOAD / GPUS_PER_NODE))
    return f"{nodes}x{GPUS_PER_NODE}"


def cluster_for(regime: str, trace: Path) -> str:
    return load80_cluster(trace) if regime == "load80" else CLUSTERS[regime]


def _child(trace: str, cluster: str, policy: str, params: str, limit: float) -> None:
    """One timed run in this process; prints a JSON line."""
    import resource
    import signal
    import time

    from shapeshift.cluster import shorthand_cluster
    from shapeshift.runs import RunSpec, run
    from shapeshift.workloads.readers import read_workload

    workload = read_workload(Path(trace))
    nodes, gpus = (int(x) for x in cluster.split("x"))
    spec = RunSpec(workload=workload, cluster=shorthand_cluster(nodes, gpus), policy=policy,
                   params=tuple(json.loads(params).items()))
    signal.alarm(int(limit))  # a run past the limit is reported as such, not waited for
    t0 = time.perf_counter()
    result = run(spec)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = result.summary
    print(json.dumps({"wall": wall, "decisions": s["decisions"], "preemptions": s["preemptions"], "peak_mb": peak_mb,
                      "avg_jct": s["avg_jct"], "unfinished": s.get("jobs_unfinished", 0)}))


def _trace(directory: Path, jobs: int, rate: float) -> Path:
    path = directory / f"poisson-{jobs}-{rate:g}.csv"
    if not path.exists():
        from shapeshift.workloads.generators import poisson

        poisson(jobs, rate, seed=SEED).frame.to_csv(path, index=False)
    return path


def _measure(trace: Path, cluster: str, policy: str, params: dict[str, object], limit: float) -> dict | None:
    cmd = [sys.executable, __file__, "--child", str(trace), cluster, policy, json.dumps(params), str(limit)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit + 120)
    if done.returncode != 0:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def growth_exponent(sizes: list[int], walls: list[float]) -> float | None:
    """Least-squares slope of log(wall) on log(jobs)."""
    pts = [(math.log(n), math.log(w)) for n, w in zip(sizes, walls, strict=True) if w > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else None


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(*sys.argv[2:6], float(sys.argv[6]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,30000,100000")
    parser.add_argument("--policies", default=",".join(label for label, _, _ in POLICIES))
    parser.add_argument("--regimes", default=",".join(REGIMES))
    parser.add_argument("--limit", type=float, default=300.0, help="seconds before a run is given up")
    parser.add_argument("--million", action="store_true", help="only the 1,000,000-job fifo run")
    parser.add_argument("--traces", type=Path, default=Path(tempfile.gettempdir()) / "shapeshift-bench-scale")
    args = parser.parse_args()
    args.traces.mkdir(parents=True, exist_ok=True)
    if args.million:
        trace = _trace(args.traces, 1_000_000, RATE * 10)
        for regime, cluster in (("load80", load80_cluster(trace)), ("free", "10000x8"), ("overload", "1500x8")):
            r = _measure(trace, cluster, "fifo", {}, args.limit)
            shown = "over the limit" if r is None else f"{r['wall']:.1f} s, {r['peak_mb']:.0f} MB peak"
            print(f"1,000,000 jobs, fifo, {regime} ({cluster}): {shown} (goal: 60 s, 4 GB)")
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    chosen = [p for p in POLICIES if p[0] in args.policies.split(",")]
    # ``queue`` was overload's name before session 11; the commands in docs/performance.md use it.
    regimes = ["overload" if r == "queue" else r for r in args.regimes.split(",")]
    unknown = sorted(set(regimes) - set(REGIMES))
    if unknown:
        parser.error(f"--regimes: unknown {', '.join(unknown)}; known: {', '.join(REGIMES)}")
    for n in sizes:
        trace = _trace(args.traces, n, RATE)
        print(f"{n} jobs: offered load {offered_gpus(trace):,.0f} GPUs; load80 cluster {load80_cluster(trace)}")
    print(f"\n{'policy':<14} {'regime':<8} {'jobs':>7} {'cluster':>8} {'wall s':>8} {'decisions':>10} "
          f"{'preempted':>10} {'peak MB':>8}")
    exponents = []
    for label, name, params in chosen:
        for regime in regimes:
            walls, stops = [], []
            for n in sizes:
                trace = _trace(args.traces, n, RATE)
                cluster = cluster_for(regime, trace)
                r = _measure(trace, cluster, name, params, args.limit)
                if r is None:
                    print(f"{label:<14} {regime:<8} {n:>7} {cluster:>8} {'> limit':>8}", flush=True)
                    break
                walls.append(r["wall"])
                stops.append(r["preemptions"])
                print(f"{label:<14} {regime:<8} {n:>7} {cluster:>8} {r['wall']:>8.2f} {r['decisions']:>10} "
                      f"{r['preemptions']:>10} {r['peak_mb']:>8.0f}", flush=True)
            done = sizes[: len(walls)]
            restarts = growth_exponent(done, stops) if all(stops) else None
            exponents.append((label, regime, growth_exponent(done, walls), restarts))
    # The second exponent is the preemptions' (where every size has some): what the rules
    # ask for. Wall time cannot grow slower than the restarts it must carry out.
    print("\ngrowth exponent against jobs: wall time (goal < 1.2), preemptions")
    for label, regime, b, restarts in exponents:
        shown = ["-" if v is None else f"{v:.2f}" for v in (b, restarts)]
        print(f"{label:<14} {regime:<8} {shown[0]:>5} {shown[1]:>5}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
