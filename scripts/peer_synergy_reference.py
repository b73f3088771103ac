"""Run Synergy's own simulator (msr-fiddle/synergy ``simulator/``) on a replay trace.

    python scripts/peer_synergy_reference.py --synergy SYNERGY_CHECKOUT --trace TRACE \\
        --mode fair|tune [--static] --out PEER.csv

Meant for a checkout of Synergy outside this repository (docs/peer-agreement.md). Its
code runs unchanged; this driver only stubs modules that simulation never calls (the
gRPC deployment runtime, ``cvxpy`` for the OPT solver, ``numa``), restores
``collections.Mapping`` (removed in Python 3.10) and records each job's first
allocation and finish time. It builds ``runner.Runner`` as ``runner.py``'s ``benchmark``
does for ``FIFO+fair`` / ``FIFO+tune`` (seed 42, placement on, 300 s rounds) on
``configs/deployment.ini`` (4 servers x 8 GPUs, 24 CPUs, 500 GB) and writes
``job_id, model, arrival, start, finish, jct``.
"""

from __future__ import annotations

import argparse
import collections
import collections.abc
import logging
import os
import random
import sys
import types
from pathlib import Path
from typing import Any

_STUBS = (
    "cvxpy",
    "grpc",
    "numa",
    "deployment",
    "deployment.runtime",
    "deployment.runtime.rpc",
    "deployment.runtime.rpc.scheduler_server",
    "deployment.runtime.rpc.scheduler_client",
    "deployment.helper",
)


def _stub_unused_modules() -> None:
    collections.Mapping = collections.abc.Mapping  # type: ignore[attr-defined]
    for name in _STUBS:
        module = types.ModuleType(name)
        module.__path__ = []  # type: ignore[attr-defined]
        module.get_self_ip = lambda: "127.0.0.1"  # type: ignore[attr-defined]
        sys.modules[name] = module
    rpc = sys.modules["deployment.runtime.rpc"]
    rpc.scheduler_server = sys.modules["deployment.runtime.rpc.scheduler_server"]  # type: ignore[attr-defined]
    rpc.scheduler_client = sys.modules["deployment.runtime.rpc.scheduler_client"]  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--synergy", required=True, type=Path, help="a checkout of msr-fiddle/synergy")
    parser.add_argument("--trace", required=True, type=Path)
    parser.add_argument("--mode", required=True, choices=("fair", "tune"))
    parser.add_argument("--static", action="store_true", help="the static trace (first round at t=1)")
    parser.add_argument("--config", default="configs/deployment.ini")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    trace, out = args.trace.resolve(), args.out.resolve()
    home = (args.synergy / "simulator").resolve()
    _stub_unused_modules()
    os.chdir(home)
    sys.path.insert(0, str(home))
    logging.basicConfig(level=logging.WARNING)
    import jobs.job as synergy_job  # type: ignore[import-not-found]
    import runner as synergy_runner  # type: ignore[import-not-found]

    started: dict[int, float] = {}
    finished: dict[int, float] = {}
    allocate, finish = synergy_job.Job.allocate, synergy_runner.Runner.finish_job

    def record_start(job: Any, *a: Any, **kw: Any) -> Any:
        started.setdefault(job.job_id, synergy_runner.Scheduler.runner.time)
        return allocate(job, *a, **kw)

    def record_finish(runner: Any, job: Any) -> None:
        finished[job.job_id] = runner.time
        finish(runner, job)

    synergy_job.Job.allocate = record_start
    synergy_runner.Runner.finish_job = record_finish
    random.seed(42)
    sim = synergy_runner.Runner(
        cluster_job_log=None, scheduler="FIFO", fair=args.mode == "fair", tune=args.mode == "tune", opt=False,
        placement=True, static=args.static, config_file=args.config, trace=str(trace), exponential=True,
        series_id_filter=(0, 100),
    )  # fmt: skip
    sim.run_simulation()
    with out.open("w") as fh:
        fh.write("job_id,model,arrival,start,finish,jct\n")
        for job in sorted(sim.finished_jobs, key=lambda j: j.job_id):
            i = job.job_id
            fh.write(f"{i},{job.job_model.model_name},{job.job_arrival_time},{started[i]},{finished[i]},")
            fh.write(f"{finished[i] - job.job_arrival_time}\n")
    jct = [finished[j.job_id] - j.job_arrival_time for j in sim.finished_jobs]
    print(f"FIFO+{args.mode}: {len(jct)} of {len(sim.workload.jobs)} jobs; average JCT {sum(jct) / len(jct):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
