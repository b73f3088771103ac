"""Speed of the ``slurm`` replay on large synthetic sacct histories.

Writes a seeded ``sacct --parsable2`` history of N jobs (steps included, so the reader
folds twice as many rows) for a ``slurm.conf`` of 1,000 nodes x 8 GPUs with backfill
(``bf_max_job_test=500``), reads it and replays it under ``--policy slurm``, each size in
its own process; reports read and replay seconds, peak memory (max RSS) and the growth
exponent of the total time between successive sizes (log t2/t1 / log n2/n1), and the
CPU seconds of reading and replaying (and of reading alone) with their own growth exponent.

The submission rate swings over the day (``--swing``, default 0.45), so the queue
grows to a thousand and more at the daily peaks and drains at night, as the goal's
"queue of thousands" asks; ``--swing 0`` keeps the rate flat (a short queue at the
default load).

    python benchmarks/bench_slurm.py --sizes 10000,30000,100000
    python benchmarks/bench_slurm.py --sizes 100000,300000,1000000   # the goal: < 5 min, < 4 GB
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

CONF = """\
NodeName=node[0001-1000] CPUs=64 RealMemory=512000 Gres=gpu:8
PartitionName=gpu Nodes=ALL Default=YES
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityWeightJobSize=100
PriorityCalcPeriod=1
SchedulerType=sched/backfill
SchedulerParameters=bf_max_job_test=500,bf_interval=30,bf_resolution=60,bf_window=1440
"""
HEADER = "JobID|User|Account|Partition|Submit|Eligible|Start|End|Elapsed|Timelimit|State|NNodes|AllocTRES"
#: GPUs a job asks for (uniform over these) and the lognormal run time's parameters (s).
GPU_CHOICES = (1, 1, 1, 2, 4, 8, 8, 16, 32)
RUN_MU, RUN_SIGMA = 7.0, 1.3
#: Offered load: GPU-seconds asked per second over the 8,000 GPUs, on average. Below 1, so
#: the queue drains instead of growing without bound (at a flat rate, ``--swing 0``, at
#: most 22 jobs pending over 100,000 jobs).
LOAD = 0.9
#: The daily swing of the submission rate: the load passes 1 for hours each day and the
#: queue grows to a thousand and more (1,560 pending at most over 100,000 jobs).
SWING = 0.45
#: Mean seconds between submissions for that load: mean GPUs x mean run / (LOAD x 8,000).
MEAN_GAP = (sum(GPU_CHOICES) / len(GPU_CHOICES)) * math.exp(RUN_MU + RUN_SIGMA**2 / 2) / (LOAD * 8000)


def gap_for(load: float) -> float:
    """Mean seconds between submissions for an offered load (GPU-seconds asked per
    GPU-second of the 8,000 GPUs): mean GPUs x mean run / (load x 8,000). The jobs drawn
    are the same whatever the load: only the gaps scale."""
    return MEAN_GAP * LOAD / load


def write_history(path: Path, jobs: int, seed: int, load: float = LOAD, swing: float = SWING) -> None:
    """A seeded history of ``jobs`` jobs asking for ``load`` of what 8,000 GPUs serve on
    average; ``swing``: a daily cycle, the submission rate times ``1 + swing x sin(2 pi
    t / 1 day)`` (drawn by thinning a Poisson process at the peak rate), so the queue
    grows where the load passes 1 and drains where it falls below."""
    rng = random.Random(seed)
    origin = datetime(2024, 1, 1, tzinfo=UTC)
    gap = gap_for(load)
    t = 0.0
    with path.open("w") as out:
        out.write(HEADER + "\n")
        for i in range(jobs):
            t = _next_submit(rng, t, gap, swing) if swing else t + rng.expovariate(1 / gap)
            run = max(10, int(rng.lognormvariate(RUN_MU, RUN_SIGMA)))
            gpus = rng.choice(GPU_CHOICES)
            limit_min = math.ceil(run / 60) + rng.randint(1, 60)
            submit = origin + timedelta(seconds=int(t))
            stamp = submit.strftime("%Y-%m-%dT%H:%M:%S")
            end = (submit + timedelta(seconds=run)).strftime("%Y-%m-%dT%H:%M:%S")
            user = f"u{rng.randint(0, 199)}"
            account = f"acct{int(user[1:]) % 20}"
            hours, rest = divmod(limit_min, 60)
            limit = f"{hours:02d}:{rest:02d}:00"
            tres = f"cpu={gpus * 4},gres/gpu={gpus},mem={gpus * 32}G,node={max(1, gpus // 8)}"
            out.write(
                f"{i + 1}|{user}|{account}|gpu|{stamp}|{stamp}|{stamp}|{end}|{run // 60:02d}:{run % 60:02d}|{limit}"
                f"|COMPLETED|1|{tres}\n"
            )
            elapsed = f"{run // 60:02d}:{run % 60:02d}"
            out.write(f"{i + 1}.batch||{account}||{stamp}|{stamp}|{stamp}|{end}|{elapsed}||COMPLETED|1|\n")


def _next_submit(rng: random.Random, t: float, gap: float, swing: float) -> float:
    """The next submission after ``t`` of a Poisson process whose rate is ``(1 + swing x
    sin(2 pi t / 86,400)) / gap``: candidates at the peak rate, each kept with the rate's
    share of the peak (thinning)."""
    peak = (1 + swing) / gap
    while True:
        t += rng.expovariate(peak)
        if rng.random() * (1 + swing) <= 1 + swing * math.sin(2 * math.pi * t / 86400):
            return t


def _max_pending(jobs) -> int:
    """The most jobs pending at once: submissions count up, first starts down (a start
    at the instant of a submission counted first, so a job that never waits is never
    pending)."""
    import numpy as np

    submit = jobs["submit_time"].to_numpy(float)
    start = jobs["first_start_time"].to_numpy(float)
    times = np.concatenate((submit, start))
    steps = np.concatenate((np.ones(submit.size), -np.ones(start.size)))
    order = np.lexsort((steps, times))  # at equal times the start (-1) first
    return int(np.cumsum(steps[order]).max(initial=0))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one(size: int, seed: int, work: Path, load: float = LOAD, swing: float = SWING) -> dict:
    from shapeshift.cluster import load_cluster
    from shapeshift.runs.facade import simulate
    from shapeshift.workloads.readers import read_sacct

    conf = work / "slurm.conf"
    conf.write_text(CONF)
    history = work / f"sacct-{size}.txt"
    write_history(history, size, seed, load, swing)
    c0 = _cpu()
    t0 = time.perf_counter()
    workload = read_sacct(history)
    t1 = time.perf_counter()
    c1 = _cpu()
    result = simulate(workload, load_cluster(conf), "slurm")
    t2 = time.perf_counter()
    return {
        "jobs": size,
        "sacct_rows": 2 * size,  # each job's line and its batch step's
        "load": load,
        "swing": swing,
        "read_s": round(t1 - t0, 2),
        "replay_s": round(t2 - t1, 2),
        "total_s": round(t2 - t0, 2),
        # CPU seconds of reading and replaying: on a shared machine the wall-clock
        # figures grow with the other work running beside it, the CPU time much less.
        "cpu_s": round(_cpu() - c0, 2),
        "read_cpu_s": round(c1 - c0, 2),
        "max_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3),
        "avg_queue_s": result.summary["avg_queue"],
        "max_pending": _max_pending(result.jobs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,30000,100000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--load",
        type=float,
        default=LOAD,
        help="offered load: GPU demand over the 8,000 GPUs' capacity (default 0.9)",
    )
    parser.add_argument(
        "--swing",
        type=float,
        default=SWING,
        help="daily swing of the submission rate: times 1 + SWING sin(2 pi t / day), 0 to 1 (default %(default)s)",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not (math.isfinite(args.load) and args.load > 0):
        parser.error("--load must be a positive finite number")
    if not (math.isfinite(args.swing) and 0 <= args.swing <= 1):
        parser.error("--swing must be between 0 and 1")
    if args.one:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(one(args.one, args.seed, Path(tmp), args.load, args.swing)))
        return 0
    rows = []
    options = ["--load", str(args.load), "--swing", str(args.swing)]
    for size in (int(s) for s in args.sizes.split(",")):
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(size), "--seed", str(args.seed), *options],
            check=True,
            capture_output=True,
            text=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        if rows:
            prev = rows[-1]
            scale = math.log(row["jobs"] / prev["jobs"])
            row["growth_exponent"] = round(math.log(row["total_s"] / prev["total_s"]) / scale, 2)
            # The same from CPU seconds: what a shared machine's other work leaves alone.
            row["growth_exponent_cpu"] = round(math.log(row["cpu_s"] / prev["cpu_s"]) / scale, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
