"""Long chaos run of the live controller: jobs submitted while ``shapeshift serve`` is
SIGKILLed and restarted at random moments (see ``shapeshift.runtime.chaos``).

    python benchmarks/bench_runtime_chaos.py [--jobs 150] [--kills 15] [--seed 0]

Prints jobs submitted / completed / failed / lost / duplicated / stuck and the kills the
controller survived. The guarantee being measured: lost, duplicated and stuck are 0.
The short form runs in CI (tests/runtime/test_chaos.py).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from shapeshift.runtime.chaos import run_chaos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=150)
    parser.add_argument("--kills", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cluster", default="2x4")
    parser.add_argument("--kill-every", type=float, default=3.0, help="mean seconds between kills")
    parser.add_argument("--gap", type=float, default=0.3, help="mean seconds between submits")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shapeshift-chaos-") as tmp:
        started = time.perf_counter()
        result = run_chaos(
            Path(tmp),
            jobs=args.jobs,
            kills=args.kills,
            seed=args.seed,
            cluster=args.cluster,
            mean_gap=args.gap,
            kill_every=args.kill_every,
            settle=600,
        )
        print(result.line())
        print(f"wall {time.perf_counter() - started:.0f} s (seed {args.seed}, cluster {args.cluster})")


if __name__ == "__main__":
    main()
