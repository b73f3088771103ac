"""The bundled data sets' cost: the wheel's size, and the time to load Philly from the bundle.

    python benchmarks/bench_datasets.py [--repeat N]

Builds the wheel (``pip wheel --no-deps --no-build-isolation``, so nothing is downloaded)
and prints its size and the bundled archives' share of it; then, in fresh processes with
an empty cache (``SHAPESHIFT_DATA_HOME`` in a temporary directory), the time to read the
82,247-job Philly trace by name the first time (unpacking included) and once unpacked,
beside reading the same CSV from a plain path. Best and median of N runs each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOAD = (
    "import time, sys; t = time.perf_counter(); "
    "from shapeshift.workloads.readers import read_workload; "
    "w = read_workload(sys.argv[1]); print(time.perf_counter() - t, len(w))"
)


def wheel_size() -> tuple[int, int]:
    """(wheel bytes, bytes of the bundled archives inside it)."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, str(ROOT)],
            check=True,
        )
        wheel = next(Path(out).glob("shapeshift-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            bundled = sum(i.compress_size for i in archive.infolist() if "/datasets/bundled/" in i.filename)
        return wheel.stat().st_size, bundled


def load_seconds(target: str, cache: str) -> float:
    env = {**os.environ, "SHAPESHIFT_DATA_HOME": cache}
    done = subprocess.run([sys.executable, "-c", LOAD, target], env=env, check=True, capture_output=True, text=True)
    seconds, jobs = done.stdout.split()
    assert int(jobs) == 82_247, jobs
    return float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    size, bundled = wheel_size()
    print(f"wheel: {size / 1e6:.2f} MB, of which the bundled data sets {bundled / 1e6:.2f} MB")
    cold, warm, plain = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(load_seconds("philly", cache))
            warm.append(load_seconds("philly", cache))
            from shapeshift import datasets

            os.environ["SHAPESHIFT_DATA_HOME"] = cache
            datasets.store.directory.cache_clear()
            plain.append(load_seconds(str(datasets.path("philly")), cache))
    for label, times in (("by name, empty cache", cold), ("by name, unpacked", warm), ("plain path", plain)):
        print(f"Philly {label:22s} best {min(times):.3f} s  median {statistics.median(times):.3f} s")


if __name__ == "__main__":
    main()
