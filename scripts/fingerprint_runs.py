"""Fingerprints of many simulation runs, to check that a speed change decides the same.

    python scripts/fingerprint_runs.py OUT.txt [--only SUBSTRING] [--queue 30000,100000] [--traces DIR]
                                     [--philly PATH|NAME] [--philly-cluster PATH|NAME]
    diff OLD.txt NEW.txt

Runs 16 policy variants (fifo, sjf and qssf with and without backfill, srtf twice, las,
tiresias three times, themis, gavel three times, optimus) on four inputs: 10,000 seeded
Poisson jobs on 150 x 8 GPUs (a long queue), 3,000 on 1000 x 8 (none), the whole Philly
trace on its 11 VCs (the bundled ``philly`` and ``philly-vcs`` data sets, read from
their unpacked files so that the workload is named as when read from a path) and 3,000
jobs on the heterogeneous example cluster (``../shared/examples``, not bundled; skipped
without it). A shapeshift from before the bundled data sets cannot resolve the names:
pass ``--philly FILE --philly-cluster FILE`` there, or the Philly input is skipped.
Each line is the run's label, a hash of its ``jobs.csv`` and ``summary.json`` (wall-time
fields dropped), its decisions and average JCT. Identical lines, old code against new
(``PYTHONPATH=old/src``), mean the same starts, ends, preemptions and summary, byte for
byte. A full pass takes about 8 minutes on the project's 2-core machine (gavel on the
heterogeneous cluster with ``priority=age`` alone about 2).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

#: Not bundled: the heterogeneous example cluster comes from the reference checkout.
HETERO = Path(__file__).resolve().parents[1].parent / "shared" / "examples" / "cluster-heterogeneous.yaml"
VARIANTS: list[tuple[str, dict[str, object]]] = [
    ("fifo", {}), ("fifo", {"backfill": True}), ("sjf", {}), ("sjf", {"backfill": True}), ("qssf", {}),
    ("srtf", {}), ("srtf", {"lease": 0}), ("las", {}), ("tiresias", {}), ("tiresias", {"starvation": 2}),
    ("tiresias", {"thresholds": "600,1800,7200", "placement": "yarn"}), ("themis", {}), ("gavel", {}),
    ("gavel", {"rounds": "grid"}), ("gavel", {"priority": "age"}), ("optimus", {}),
]


def _resolve(text: str) -> Path | None:
    """An existing path, or the file a bundled data set name stands for; ``None`` where the
    shapeshift on the path has no bundled data sets."""
    if Path(text).exists():
        return Path(text)
    try:
        from shapeshift import datasets
    except ImportError:
        return None
    return datasets.locate(text)


def _inputs(traces: Path, larger: list[int], philly_spec: tuple[str, str]) -> dict[str, tuple[Path, object]]:
    from shapeshift.cluster import load_cluster, shorthand_cluster
    from shapeshift.workloads.generators import poisson

    traces.mkdir(parents=True, exist_ok=True)

    def trace(jobs: int) -> Path:
        path = traces / f"poisson-{jobs}-500.csv"
        if not path.exists():
            poisson(jobs, 500.0, seed=1).frame.to_csv(path, index=False)
        return path

    inputs: dict[str, tuple[Path, object]] = {
        "q10k": (trace(10_000), shorthand_cluster(150, 8)),
        "f3k": (trace(3_000), shorthand_cluster(1000, 8)),
        **{f"q{n // 1000}k": (trace(n), shorthand_cluster(150, 8)) for n in larger},
    }
    philly, vcs = (_resolve(text) for text in philly_spec)
    if philly is not None and vcs is not None:
        inputs["philly"] = (philly, load_cluster(vcs))
    else:
        print(
            "this shapeshift has no bundled data sets: the Philly input is skipped (pass --philly FILE "
            "--philly-cluster FILE)",
            file=sys.stderr,
        )
    if HETERO.exists():
        inputs["het3k"] = (trace(3_000), load_cluster(HETERO))
    else:
        print(f"{HETERO} not found (not bundled; needs ../shared): the heterogeneous input is skipped", file=sys.stderr)
    return inputs


def fingerprint(result) -> str:  # a RunResult
    with tempfile.TemporaryDirectory() as directory:
        result.write(directory)
        summary = json.loads((Path(directory) / "summary.json").read_text())
        kept = {k: v for k, v in summary.items() if "wall" not in k}
        digest = hashlib.sha256((Path(directory) / "jobs.csv").read_bytes())
        digest.update(json.dumps(kept, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", default="", help="run only the labels containing this text")
    parser.add_argument("--queue", default="", help="also these trace sizes on 150 x 8, e.g. 30000,100000 "
                        "(labels q30k, q100k: where the queue grows long; combine with --only)")
    parser.add_argument("--traces", type=Path, default=Path(tempfile.gettempdir()) / "shapeshift-bench-scale")
    parser.add_argument("--philly", default="philly", help="Philly trace file or data set name (default: philly)")
    parser.add_argument(
        "--philly-cluster", default="philly-vcs", help="its cluster YAML or data set name (default: philly-vcs)"
    )
    args = parser.parse_args()
    from shapeshift.runs import RunSpec, run
    from shapeshift.workloads.readers import read_workload

    lines = []
    larger = [int(n) for n in args.queue.split(",") if n]
    for name, (path, cluster) in _inputs(args.traces, larger, (args.philly, args.philly_cluster)).items():
        workload = read_workload(path)
        for policy, params in VARIANTS:
            label = f"{name} {policy} {json.dumps(params, sort_keys=True)}"
            if args.only not in label:
                continue
            started = time.perf_counter()
            result = run(RunSpec(workload=workload, cluster=cluster, policy=policy, params=tuple(params.items())))
            lines.append(f"{label} {fingerprint(result)} decisions={result.summary['decisions']} "
                         f"avg_jct={result.summary['avg_jct']}")
            print(lines[-1], f"({time.perf_counter() - started:.1f} s)", flush=True)
    args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
