"""Build and run the FGD authors' simulator on the same input as ``shapeshift fill``, and read its log.

The reference (hkust-adsl/kubernetes-scheduler-simulator, Go, Apache-2.0) is the source of
every rule in this package, so the strongest check of ``fill`` is its own run on the same
files. This module drives it the way its experiments/README.md does, outside this repository
(its build outputs and files never enter ours):

- ``go build -o bin/simon ./cmd`` with the vendored dependencies (``GOFLAGS=-mod=vendor``,
  no network), the module cache and build cache inside the checkout;
- ``data/pod_csv_to_yaml.py`` on *our* pod CSV, beside the committed node YAML, which is used
  only when our node CSV is byte-identical to the one it was made from;
- ``scripts/generate_config_and_run.py`` with the flags of
  experiments/run_scripts/generate_run_scripts.py (``-tune 1.3 -tuneseed S --shuffle-pod=true``
  and the policy's own flags).

The log is read directly rather than through their pandas analysis: after every pod event
``SchedulePods`` (pkg/simulator/simulator.go) logs one ``[Report] ... (origin)`` line (the
fragmented milli) and one ``[Alloc]`` line (used milli, total GPUs, arrived milli) from
``ClusterGpuFragReport`` (pkg/simulator/analysis.go); a dropped pod adds a ``failed to
schedule`` line. Those are the numbers their experiments/analysis scripts bin, so the result
goes through our ``report.curve``, which bins as they do.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shapeshift.errors import InputError
from shapeshift.gpushare.fill import Events

#: The reference's experiment directory per placement (experiments/run_scripts/generate_run_scripts.py).
REFERENCE_NAMES = {
    "random": "01-Random",
    "dot-product": "02-DotProd",
    "gpu-clustering": "03-GpuClustering",
    "gpu-packing": "04-GpuPacking",
    "best-fit": "05-BestFit",
    "fgd": "06-FGD",
}
#: The score-plugin flag and the extra flags that file passes per placement.
REFERENCE_FLAGS = {
    "random": ["-Random", "1000", "-gpusel", "random"],
    "dot-product": ["-DotProd", "1000", "-gpusel", "best", "-dimext", "merge", "-norm", "max"],
    "gpu-clustering": ["-GpuClustering", "1000"],
    "gpu-packing": ["-GpuPacking", "1000"],
    "best-fit": ["-BestFit", "1000"],
    "fgd": ["-FGD", "1000", "-gpusel", "FGD", "-dimext", "share", "-norm", "max"],
}
#: What the build and the runs need from the reference's tree. Its committed results are
#: left out: some of them are large files that a mirror may lack.
TREE_PATHS = ["go.mod", "go.sum", "Makefile", "cmd", "pkg", "vendor", "data", "scripts", "example"]
NODE_CSV = "openb_node_list_gpu_node.csv"
TIMING_FILE = "peer_timing.json"

_ALLOC = re.compile(r"\[Alloc\]; .*Used GPU Milli: (\d+); Total GPUs: (\d+); Arrived GPU Milli: (\d+)")
_REPORT = re.compile(r"\[Report\]; Frag amount: ([0-9.eE+-]+); .*\(origin\)")
_CREATE = re.compile(r"\[\d+\] attempt to create pod")
_FAILED = re.compile(r"\[\d+\] failed to schedule pod")


@dataclass(frozen=True, eq=False)
class ReferenceRun:
    """One run of the reference: its per-event measurements and what it cost."""

    workload: str
    placement: str
    seed: int
    total_gpus: int
    events: Events
    wall_seconds: float
    cpu_seconds: float
    log: Path


def go_missing_reason() -> str | None:
    """Why the reference cannot be built here, or None when ``go`` is on PATH."""
    if shutil.which("go") is None:
        return "go is not on PATH (Debian: apt-get install golang-go); the reference simulator is not built"
    return None


def check_outside(checkout: Path, repo: Path) -> None:
    """The reference's tree and build outputs must stay out of this repository."""
    c, r = checkout.resolve(), repo.resolve()
    if c == r or r in c.parents:
        raise InputError(f"--simulator {checkout} is inside this repository; pick a directory outside it")


def extract(repo: Path, checkout: Path) -> None:
    """Write the reference's tree at HEAD (``TREE_PATHS`` only) into ``checkout``; ``repo`` is
    a checkout or a bare git directory."""
    git_dir = repo / ".git" if (repo / ".git").exists() else repo
    checkout.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen(
        ["git", f"--git-dir={git_dir}", "archive", "HEAD", "--", *TREE_PATHS], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", str(checkout)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise RuntimeError(f"git archive of {git_dir} failed")


def go_env(checkout: Path) -> dict[str, str]:
    cache = checkout / ".peer-cache"
    return {
        **os.environ,
        "GOFLAGS": "-mod=vendor",
        "GOPROXY": "off",
        "GO111MODULE": "on",
        "GOCACHE": str(cache / "go-build"),
        "GOPATH": str(cache / "gopath"),
    }


def build(checkout: Path, nice: int = 19) -> Path:
    """``bin/simon`` in ``checkout``, built once from the vendored sources (several minutes)."""
    binary = checkout / "bin" / "simon"
    if not binary.exists():
        cmd = ["nice", "-n", str(nice), "go", "build", "-o", "bin/simon", "./cmd"]
        subprocess.run(cmd, cwd=checkout, env=go_env(checkout), check=True)
    return binary


def prepare_input(checkout: Path, pod_csv: Path, node_csv: Path) -> str:
    """The reference's input folder ``data/<workload>`` made from our files; returns its name."""
    theirs = checkout / "data" / "csv" / NODE_CSV
    if not theirs.exists() or theirs.read_bytes() != node_csv.read_bytes():
        raise InputError(
            f"{node_csv}: differs from the reference's {theirs}, from which its committed node YAML was made",
            field="--data",
        )
    workload = pod_csv.stem
    folder = checkout / "data" / workload
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(checkout / "data" / "node_yaml" / "openb_node_list_gpu_node.yaml", folder / f"{NODE_CSV[:-4]}.yaml")
    if not (folder / f"{workload}.yaml").exists():
        subprocess.run(
            [sys.executable, "pod_csv_to_yaml.py", str(pod_csv.resolve())], cwd=checkout / "data", check=True
        )
    return workload


def experiment_dir(checkout: Path, workload: str, placement: str, inflate: float, seed: int) -> Path:
    return checkout / "experiments" / "peer" / workload / REFERENCE_NAMES[placement] / f"{inflate:g}" / str(seed)


def run(
    checkout: Path,
    workload: str,
    placement: str,
    seed: int,
    *,
    inflate: float = 1.3,
    nice: int = 19,
    reuse: bool = False,
) -> ReferenceRun:
    """Run one placement and seed (``reuse``: read a finished run's log and timing instead)."""
    exp = experiment_dir(checkout, workload, placement, inflate, seed)
    timing = exp / TIMING_FILE
    if not (reuse and timing.exists()):
        exp.mkdir(parents=True, exist_ok=True)
        for old in exp.glob("*.log"):
            old.unlink()
        rel = exp.relative_to(checkout)
        cmd = ["nice", "-n", str(nice), sys.executable, "scripts/generate_config_and_run.py", "-d", str(rel)]
        cmd += ["-e", "-b", "-f", f"data/{workload}", *REFERENCE_FLAGS[placement]]
        cmd += ["-tune", f"{inflate:g}", "-tuneseed", str(seed), "--shuffle-pod=true", "-z", f"{rel}/snapshot/ds01"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(cmd, cwd=checkout, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        timing.write_text(json.dumps({"wall_seconds": wall, "cpu_seconds": cpu, "nice": nice}) + "\n")
    measured = json.loads(timing.read_text())
    logs = sorted(exp.glob("*.log"))
    if len(logs) != 1:
        raise RuntimeError(f"{exp}: expected one simulator log, found {len(logs)}")
    events, total_gpus = parse_log(logs[0])
    return ReferenceRun(
        workload, placement, seed, total_gpus, events, measured["wall_seconds"], measured["cpu_seconds"], logs[0]
    )


def parse_log(path: Path) -> tuple[Events, int]:
    """Per-event measurements from a reference log, and the cluster's GPU count."""
    arrived, used, frag, placed = [], [], [], []
    total = 0
    pending_frag: float | None = None
    started = failed = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if _CREATE.search(line):
                started, failed = True, False
            elif not started:
                continue  # reports before the first pod describe the empty cluster
            elif _FAILED.search(line):
                failed = True
            elif m := _REPORT.search(line):
                pending_frag = float(m.group(1))
            elif m := _ALLOC.search(line):
                if pending_frag is None:
                    raise RuntimeError(f"{path}: an [Alloc] line without its [Report] line before it")
                used.append(int(m.group(1)))
                total = int(m.group(2))
                arrived.append(int(m.group(3)))
                frag.append(pending_frag)
                placed.append(not failed)
                pending_frag = None
    if not arrived:
        raise RuntimeError(f"{path}: no [Alloc] lines; did the simulator run?")
    used_a = np.array(used, dtype=np.int64)
    events = Events(
        arrived_milli=np.array(arrived, dtype=np.int64),
        allocated_milli=used_a,
        fragmented_milli=np.array(frag, dtype=np.float64),
        idle_milli=total * 1000 - used_a,
        placed=np.array(placed, dtype=bool),
    )
    return events, total
