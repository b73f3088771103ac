"""A seeded trace on a real Slurm and in ``--policy slurm`` with the same slurm.conf.

Needs a running Slurm from ``scripts/real_slurm.sh start`` (as root: jobs are submitted
as the users ``alice`` (account A) and ``bob`` (account B) that it creates). The trace:
sleep jobs of ``--min-run``..``--max-run`` seconds, 1, 2 or 4 GPUs (8 as two nodes of 4),
two accounts, time limits of whole minutes above the run times, Poisson arrivals.

Then: ``sacct`` and ``sacctmgr show assoc`` are exported, and ``shapeshift whatif``'s
library replays the history under ``slurm`` with that slurm.conf and association tree.
Printed and written to ``OUT/bench.json``: per-job start differences (median, P90, max),
the share within 5 s and 60 s, the same-order share, and every job whose start differs
by more than 5 s (``OUT/starts.csv`` has all of them).

    scripts/real_slurm.sh start
    python benchmarks/bench_slurm_real.py --jobs 30 --seed 1 --out /tmp/bench-slurm
    scripts/real_slurm.sh stop
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SACCT_FORMAT = (
    "JobID,JobIDRaw,User,Account,Partition,QOS,Submit,Eligible,Start,End,Elapsed,Timelimit,State,NNodes,"
    "ReqTRES,AllocTRES,Priority,ExitCode"
)
USERS = {"A": "alice", "B": "bob"}


@dataclass(frozen=True)
class TraceJob:
    index: int
    offset: float  # seconds after the first submission
    run: int
    gpus: int
    account: str
    limit_min: int


def make_trace(jobs: int, seed: int, min_run: int = 5, max_run: int = 60, mean_gap: float = 4.0) -> list[TraceJob]:
    rng = random.Random(seed)
    trace, t = [], 0.0
    for i in range(jobs):
        run = rng.randint(min_run, max_run)
        gpus = rng.choice((1, 1, 2, 2, 4, 8))
        limit = math.ceil((run + 1) / 60) + rng.randint(0, 2)
        trace.append(TraceJob(i, round(t, 1), run, gpus, rng.choice("AB"), limit))
        t += rng.expovariate(1 / mean_gap)
    return trace


def _slurm(*args: str, user: str | None = None) -> str:
    cmd = (["runuser", "-u", user, "--"] if user else []) + list(args)
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd="/tmp").stdout


def submit(trace: list[TraceJob], gpus_per_node: int) -> dict[str, TraceJob]:
    """Submit each job at its offset; returns Slurm job id -> job."""
    ids: dict[str, TraceJob] = {}
    start = time.monotonic()
    for job in trace:
        delay = start + job.offset - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        nodes = max(1, math.ceil(job.gpus / gpus_per_node))
        args = [
            "sbatch", "--parsable", "-A", job.account, "-p", "gpu", "-N", str(nodes),
            f"--gres=gpu:{job.gpus // nodes}", "-c", "1", "-t", str(job.limit_min), "-o", "/dev/null",
            "-J", f"bench-{job.index}", "--wrap", f"sleep {job.run}",
        ]  # fmt: skip
        job_id = _slurm(*args, user=USERS[job.account]).strip().split(";")[0]
        ids[job_id] = job
    return ids


def wait_done(ids: list[str], limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if not _slurm("squeue", "-h", "-j", ",".join(ids), "-o", "%i").strip():
            return
        time.sleep(2)
    raise SystemExit(f"jobs still queued or running after {limit_s:.0f} s")


def reset_usage() -> None:
    """Zero the recorded usage, so the real run starts from the replay's state (no usage)."""
    for account, user in USERS.items():
        _slurm("sacctmgr", "-i", "modify", "user", "where", f"name={user}", f"account={account}", "set", "RawUsage=0")
        _slurm("sacctmgr", "-i", "modify", "account", "where", f"name={account}", "set", "RawUsage=0")


def run_real(trace: list[TraceJob], out: Path, gpus_per_node: int) -> tuple[Path, Path]:
    reset_usage()
    ids = submit(trace, gpus_per_node)
    wait_done(list(ids), limit_s=sum(j.run for j in trace) + 600)
    time.sleep(2)  # slurmdbd records the last ends
    sacct = out / "sacct.txt"
    sacct.write_text(
        _slurm("sacct", "--parsable2", "--allusers", "--duplicates", f"--format={SACCT_FORMAT}", "-j", ",".join(ids))
    )
    assoc = out / "assoc.txt"
    assoc.write_text(_slurm("sacctmgr", "-P", "show", "assoc", "format=account,user,share,parentname"))
    return sacct, assoc


def calc_phase(conf: Path, sacct: Path) -> float:
    """Seconds after the first recorded submission at which slurmctld's decay thread
    calculated priorities (modulo ``PriorityCalcPeriod``, at least a minute): its last
    calculation is the first of the two 8-byte big-endian times in
    ``StateSaveLocation/priority_last_decay_ran`` (``_write_last_decay_ran``)."""
    from datetime import datetime

    text = conf.read_text()
    state = next(line.split("=", 1)[1].strip() for line in text.splitlines() if line.startswith("StateSaveLocation="))
    period = next(
        (int(line.split("=", 1)[1]) * 60 for line in text.splitlines() if line.startswith("PriorityCalcPeriod=")), 300
    )
    last_ran = int.from_bytes((Path(state) / "priority_last_decay_ran").read_bytes()[:8], "big")
    rows = [line.split("|") for line in sacct.read_text().splitlines()]
    col = rows[0].index("Submit")
    first = min(datetime.fromisoformat(r[col]).timestamp() for r in rows[1:] if r[col] not in ("", "Unknown"))
    return (last_ran - first) % max(period, 60)


def real_vs_real(first: Path, second: Path) -> dict:
    """Two real runs of the same trace against each other: job ids differ between runs,
    so the jobs are paired by submission order (``JobIDRaw``), starts in seconds from each
    run's first submission; the same figures as the replay's agreement."""
    from datetime import datetime

    from shapeshift.slurm.agreement import agreement

    def starts(path: Path) -> dict[str, float]:
        rows = [line.split("|") for line in path.read_text().splitlines()]
        col = {name: i for i, name in enumerate(rows[0])}
        jobs = sorted((r for r in rows[1:] if "." not in r[col["JobID"]]), key=lambda r: int(r[col["JobIDRaw"]]))
        t0 = min(datetime.fromisoformat(r[col["Submit"]]).timestamp() for r in jobs)
        return {str(i): datetime.fromisoformat(r[col["Start"]]).timestamp() - t0 for i, r in enumerate(jobs)}

    return agreement(starts(first), starts(second))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min-run", type=int, default=5)
    parser.add_argument("--max-run", type=int, default=60)
    parser.add_argument("--mean-gap", type=float, default=4.0)
    parser.add_argument("--gpus-per-node", type=int, default=int(os.environ.get("GPUS", "4")))
    parser.add_argument("--conf", default=os.environ.get("SLURM_CONF", "/tmp/ss-slurm/slurm.conf"))
    parser.add_argument("--sacct", help="replay this sacct export instead of running the trace")
    parser.add_argument("--assoc", help="with --sacct: the sacctmgr dump")
    parser.add_argument(
        "--calc-phase",
        type=float,
        help="the slurm policy's calc_phase (default: read from the running Slurm's state directory)",
    )
    parser.add_argument(
        "--real-pair", nargs=2, type=Path, metavar="SACCT", help="compare two real runs' exports and exit"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.real_pair:
        print(json.dumps(real_vs_real(*args.real_pair), indent=2))
        return 0
    os.environ["SLURM_CONF"] = args.conf
    args.out.mkdir(parents=True, exist_ok=True)
    if args.sacct:
        sacct, assoc = Path(args.sacct), Path(args.assoc) if args.assoc else None
    else:
        trace = make_trace(args.jobs, args.seed, args.min_run, args.max_run, args.mean_gap)
        sacct, assoc = run_real(trace, args.out, args.gpus_per_node)
    phase = args.calc_phase
    if phase is None and not args.sacct:
        phase = calc_phase(Path(args.conf), sacct)
    from shapeshift.slurm.whatif import whatif

    params = {"slurm": {"calc_phase": phase}} if phase is not None else None
    outcome = whatif(sacct, args.conf, ["slurm"], assoc=assoc, policy_args=params, out=args.out)
    agree = dict(outcome.agreement or {}) | {"calc_phase": phase}
    starts = outcome.starts.assign(diff=outcome.starts["slurm"] - outcome.starts["recorded"])
    far = starts[starts["diff"].abs() > 5]
    agree["differing_jobs"] = far[["job_id", "submit", "recorded", "slurm", "diff"]].to_dict("records")
    (args.out / "bench.json").write_text(json.dumps(agree, indent=2, default=float) + "\n")
    print(json.dumps({k: v for k, v in agree.items() if k != "differing_jobs"}, indent=2))
    print(f"{len(far)} job(s) differ by more than 5 s; see {args.out}/bench.json and starts.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
