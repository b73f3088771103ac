"""Fit the job-size and duration distribution that Shapeshift's generators sample from.

    python scripts/fit_philly_distribution.py [--trace PATH|NAME] [--out FILE]

Reads the Microsoft Philly job file as processed by the Blox project (the bundled
``philly`` data set by default: ``timestamp, duration, num_gpus, gpu_time, cluster``)
and writes ``src/shapeshift/data/philly_fit.json``:

* ``sizes``: every GPU count in the trace and its share of jobs (empirical pmf);
* ``duration_groups``: for each GPU count with at least ``MIN_GROUP_JOBS`` jobs, and
  one pooled group for the remaining (rare, large) counts, the quantiles of
  ``ln(duration)`` at levels 0, 0.01, ..., 1 (an empirical quantile function: sampling
  interpolates linearly between levels, so it reproduces the trace's body and tails,
  which a single log-normal does not: Philly durations are bimodal for small jobs),
  plus the log-normal mean/sd of ``ln(duration)`` for reference;
* ``arrival_rate_per_hour``: jobs / submission span, for reference only (generators
  take the rate as a parameter).

Durations depend strongly on the GPU count (median 1-GPU job ~19 min, 8-GPU ~6.6 h),
hence one duration distribution per size. The output is deterministic (no timestamps),
so re-running the script on the same file reproduces the committed JSON byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift import datasets
from shapeshift.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = "philly"
DEFAULT_OUT = ROOT / "src" / "shapeshift" / "data" / "philly_fit.json"

MIN_GROUP_JOBS = 100
LEVELS = np.round(np.linspace(0.0, 1.0, 101), 2)


def _group(durations: np.ndarray, gpus: list[int]) -> dict:
    logs = np.log(durations)
    return {
        "gpus": gpus,
        "jobs": int(durations.size),
        "log_quantiles": [round(float(q), 6) for q in np.quantile(logs, LEVELS)],
        "lognormal": {"mu": round(float(logs.mean()), 6), "sigma": round(float(logs.std()), 6)},
        "median_s": round(float(np.median(durations)), 1),
    }


def fit(trace: Path) -> dict:
    frame = pd.read_csv(trace)
    duration = frame["duration"].to_numpy(dtype=float)
    gpus = frame["num_gpus"].to_numpy(dtype=np.int64)
    keep = (duration > 0) & (gpus > 0)
    duration, gpus = duration[keep], gpus[keep]
    sizes, counts = np.unique(gpus, return_counts=True)
    own = [int(s) for s, c in zip(sizes, counts, strict=True) if c >= MIN_GROUP_JOBS]
    rest = [int(s) for s in sizes if int(s) not in own]
    groups = [_group(duration[gpus == s], [s]) for s in own]
    if rest:
        groups.append(_group(duration[np.isin(gpus, rest)], rest))
    stamps = pd.to_datetime(frame["timestamp"], format="ISO8601")
    span_h = (stamps.max() - stamps.min()).total_seconds() / 3600.0
    return {
        "source": {
            "trace": "philly data set (Microsoft Philly 2017, MIT; processed by Blox)",
            "trace_sha256": hashlib.sha256(trace.read_bytes()).hexdigest(),
            "script": "scripts/fit_philly_distribution.py",
            "jobs_used": int(keep.sum()),
            "jobs_dropped": int((~keep).sum()),
            "note": "jobs with duration <= 0 or no GPUs are dropped; durations in seconds",
        },
        "arrival_rate_per_hour": round(len(frame) / span_h, 4),
        "sizes": {
            "gpus": [int(s) for s in sizes],
            "probabilities": [round(float(c) / float(counts.sum()), 8) for c in counts],
            "jobs": [int(c) for c in counts],
        },
        "quantile_levels": [float(q) for q in LEVELS],
        "duration_groups": groups,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--trace", default=DEFAULT_TRACE, help=f"trace file or data set name (default: {DEFAULT_TRACE})"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    try:
        trace = datasets.locate(args.trace)
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2
    if not trace.exists():
        print(f"trace {trace} not found", file=sys.stderr)
        return 2
    result = fit(trace)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    groups = ", ".join(
        f"{g['gpus']}: {g['jobs']} jobs, median {g['median_s']:.0f} s" for g in result["duration_groups"]
    )
    print(f"wrote {args.out}: {result['source']['jobs_used']} jobs; duration groups {groups}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
