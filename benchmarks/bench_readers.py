"""Time the trace readers on the shared traces (goal: the 82k-job Philly file in < 2 s).

    python benchmarks/bench_readers.py [--repeat N]

Prints, per trace, the best and median wall time of ``read_workload`` (file to validated
``Workload``) over N runs, and for Philly also ``describe`` and ``Workload.jobs()``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from shapeshift.workloads.describe import describe
from shapeshift.workloads.readers import read_workload

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TRACES = (
    "philly/philly_jobs.csv",
    "rubick/workloads/workload-mt.csv",
    "pollux/workload-6.csv",
)
GOAL_SECONDS = 2.0


def _timed(fn: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    philly = DATA / TRACES[0]
    if not philly.exists():
        print(f"trace {philly} not found (needs ../shared/data)", file=sys.stderr)
        return 2
    status = 0
    for relative in TRACES:
        path = DATA / relative
        if not path.exists():
            continue
        best, median, workload = _timed(lambda p=path: read_workload(p), args.repeat)
        print(f"read {relative:38s} {len(workload):>7,} jobs  best {best:6.3f} s  median {median:6.3f} s")
        if relative == TRACES[0]:
            philly_best = best
            best_d, _, _ = _timed(lambda w=workload: describe(w), args.repeat)
            best_j, _, _ = _timed(lambda w=workload: w.jobs(), args.repeat)
            print(f"  describe {best_d:6.3f} s   jobs() {best_j:6.3f} s")
    verdict = "meets" if philly_best < GOAL_SECONDS else "MISSES"
    print(f"Philly read: {philly_best:.3f} s ({verdict} the {GOAL_SECONDS:.0f} s goal)")
    if philly_best >= GOAL_SECONDS:
        status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
