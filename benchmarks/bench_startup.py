"""Start-up times a user feels: ``shapeshift --help``, the demo ``shapeshift simulate`` and
``shapeshift submit`` (against a state directory with no controller, which fails at once
after start-up, so only start-up is measured).

    python benchmarks/bench_startup.py [--repeats 5]

Prints the median wall time of each over ``--repeats`` fresh processes. Goals on a
2-core machine: --help and the demo under 1 s, submit under 0.5 s.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def wall(argv: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    exe = shutil.which("shapeshift") or f"{sys.executable} -m shapeshift.cli.main"
    cmd = exe.split()
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job.yaml"
        job.write_text("name: j\ncommand: '{python} -c pass'\nresources: {gpus: 1}\n")
        rows = [
            ("shapeshift --help", [*cmd, "--help"], 1.0),
            ("shapeshift simulate (demo)", [*cmd, "simulate", "-q"], 1.0),
            ("shapeshift submit (no controller)", [*cmd, "submit", str(job), "--state", str(Path(tmp) / "st")], 0.5),
            ("python -c pass (interpreter alone)", [sys.executable, "-c", "pass"], None),
        ]
        print(f"{'command':40s} {'median wall':>12s}  goal")
        for name, argv, goal in rows:
            t = wall(argv, args.repeats)
            print(f"{name:40s} {t:10.2f} s  {'' if goal is None else f'< {goal:g} s (ratio {t / goal:.2f})'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
