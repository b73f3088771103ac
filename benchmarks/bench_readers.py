"""Time the trace readers on the bundled traces (goal: the 82k-job Philly file in < 2 s).

    python benchmarks/bench_readers.py [--repeat N]

Prints, per trace, the best and median wall time of ``read_workload`` (file to validated
``Workload``) over N runs, and for Philly also ``describe`` and ``Workload.jobs()``. The
data sets are unpacked once before timing, so the figures are the reader's, not the cache's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from shapeshift import datasets
from shapeshift.workloads.describe import describe
from shapeshift.workloads.readers import read_workload

#: Bundled workload data sets (``shapeshift.datasets``), Philly first.
TRACES = ("philly", "rubick-mt", "pollux-workload6")
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
    status = 0
    for name in TRACES:
        path = datasets.locate(name)  # unpacks on first use, outside the timed reads
        best, median, workload = _timed(lambda p=path: read_workload(p), args.repeat)
        print(f"read {name:20s} {len(workload):>7,} jobs  best {best:6.3f} s  median {median:6.3f} s")
        if name == TRACES[0]:
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
