"""A dependency-free demo job: ``python -m shapeshift.client.demo --iterations N --iter-time S``.

It does what a real training script does with the client library, minus the training:
resumes from its checkpoint, checks its lease every iteration, reports progress and
iteration times, logs a line per step (``step 3/30 loss ... it/s``), checkpoints and
exits with ``PREEMPTED_EXIT`` when the lease is revoked.
The runtime tests and the fidelity benchmark use it because it starts in milliseconds.
With ``--marker FILE`` it appends one line when it finishes, so a test can count completions.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from shapeshift.client import PREEMPTED_EXIT, Lease, WorkerEnv, flush, report
from shapeshift.client.progress import log_step, should_log


def _checkpoint(directory: str) -> Path | None:
    return Path(directory) / "demo-step" if directory else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shapeshift.client.demo")
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--iter-time", type=float, default=0.1)
    parser.add_argument("--marker", default="")
    parser.add_argument("--fail-at", type=int, default=-1, help="exit 1 at this step on the first attempt")
    args = parser.parse_args(argv)
    env = WorkerEnv.from_env()
    ckpt = _checkpoint(env.checkpoint_dir)
    step = int(ckpt.read_text()) if ckpt is not None and ckpt.exists() else 0
    lease = Lease(env, poll_interval=0.2)
    while step < args.iterations:
        if lease.revoked:
            if ckpt is not None and env.rank == 0:
                ckpt.write_text(str(step))
            flush()
            return PREEMPTED_EXIT
        started = time.perf_counter()
        time.sleep(args.iter_time)
        step += 1
        if step == args.fail_at and env.attempt <= 1:
            return 1
        if ckpt is not None and env.rank == 0:
            tmp = ckpt.with_suffix(".tmp")
            tmp.write_text(str(step))
            os.replace(tmp, ckpt)
        iter_time = time.perf_counter() - started
        report(step, iter_time=iter_time, loss=1.0 / step)
        if should_log(step, args.iterations):
            log_step(step, args.iterations, 1.0 / step, iter_time)
    flush()
    if args.marker and env.rank == 0:
        with open(args.marker, "a") as f:
            f.write(f"done {env.job_id} attempt={env.attempt}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
