"""Measure what a preemption costs a training job: checkpoint, new process, restore.

The simulator charges every relaunch after a preemption (and every reconfiguration) a
*restore penalty*: seconds in which the job holds its GPUs and makes no progress (30 s by
default; Helios' rule gives a 1-GPU job 7 s; Sia's artifact 25-250 s per application).
This script measures that pause on a real GPU for the six models of
``measure_colocation.py``, one GPU each:

    python scripts/measure_restart.py measure --out DIR      # on the GPU machine
    python scripts/measure_restart.py compare DIR            # here, or there

For each model and repeat, a first process trains ``--steps`` steps and saves the model
and optimizer state (``torch.save``, then ``fsync``: the stop side of a preemption). A
second process is then launched, as a scheduler would relaunch the job: it imports torch,
initialises CUDA, builds the model, loads the checkpoint and trains ``--steps`` steps. The
*pause* is what the restart cost in seconds of lost progress: the time from launching the
second process to its last step, less ``steps`` times its steady step time (the median
of its last 20 steps), so the interpreter's start and a slow first step (kernel
selection, lazy CUDA modules) count as well. Written: ``DIR/restart.csv`` (one row per
restart, each phase in seconds) and ``DIR/env.txt``. ``--device cpu`` runs the tiny
stand-ins, to check the harness.

What is not measured here: a job on several GPUs or nodes (process-group set-up, a
checkpoint shared across ranks), the old process's exit and the wait for a new
allocation, and data loading (the jobs train on synthetic batches).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure_colocation import MODELS, build_training, check_model_names, write_environment

#: Steady step time: the median of this many last steps.
STEADY = 20
FIELDS = ["model", "repeat", "checkpoint_mb", "save_s", "import_s", "cuda_s", "build_s", "load_s", "first_step_s",
          "steady_step_s", "launch_to_last_step_s", "pause_s"]


def life(name: str, batch: int, device: str, checkpoint: Path, steps: int, restore: bool, launched: float) -> dict:
    """One process's life: imports, CUDA, model, (checkpoint,) ``steps`` steps (, save).
    Times are ``time.time()`` readings, comparable with the parent's ``launched``."""
    marks = {"launched": launched}
    import torch

    if device != "cpu" and name in ("resnet18", "resnet50", "mobilenetv2"):
        import torchvision  # noqa: F401  (an import the job pays on every start)
    marks["imported"] = time.time()
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    if device != "cpu":
        torch.zeros(1, device=device)
        sync()
    marks["cuda"] = time.time()
    torch.manual_seed(0)
    training = build_training(name, batch, device)
    sync()
    marks["built"] = time.time()
    if restore:
        state = torch.load(checkpoint, map_location=device)
        training.model.load_state_dict(state["model"])
        training.optimizer.load_state_dict(state["optimizer"])
        sync()
    marks["loaded"] = time.time()
    step_ends = []
    for _ in range(steps):
        training.step()
        step_ends.append(time.time())
    if not restore:
        with open(checkpoint, "wb") as file:
            torch.save({"model": training.model.state_dict(), "optimizer": training.optimizer.state_dict()}, file)
            file.flush()
            os.fsync(file.fileno())
        marks["saved"] = time.time()
    return {"marks": marks, "step_ends": step_ends}


class ChildFailed(RuntimeError):
    """A job process exited with an error (its stderr is the message)."""


#: Seconds one job process may take before the measurement gives up on it.
CHILD_TIMEOUT = 600


def _launch(name: str, batch: int, device: str, checkpoint: Path, steps: int, restore: bool) -> dict:
    """Runs ``life`` in a new Python process, as a scheduler would start the job."""
    launched = time.time()
    args = [sys.executable, __file__, "life", name, str(batch), device, str(checkpoint), str(steps),
            "1" if restore else "0", repr(launched)]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired as error:
        raise ChildFailed(f"{name}: the job process ran over {CHILD_TIMEOUT} s") from error
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]  # the error, without the traceback
        raise ChildFailed(f"{name}: the job process exited with status {done.returncode}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def phases(first: dict, second: dict, steps: int) -> dict[str, float]:
    """The restart's phases in seconds, from the two lives' marks (see the docstring)."""
    m, ends = second["marks"], second["step_ends"]
    gaps = [b - a for a, b in zip(ends[-STEADY - 1 : -1], ends[-STEADY:], strict=True)]
    steady = statistics.median(gaps)
    return {
        "save_s": first["marks"]["saved"] - first["step_ends"][-1],
        "import_s": m["imported"] - m["launched"],
        "cuda_s": m["cuda"] - m["imported"],
        "build_s": m["built"] - m["cuda"],
        "load_s": m["loaded"] - m["built"],
        "first_step_s": ends[0] - m["loaded"],
        "steady_step_s": steady,
        "launch_to_last_step_s": ends[-1] - m["launched"],
        "pause_s": ends[-1] - m["launched"] - steps * steady,
    }


def check_options(steps: int, repeats: int, models: list[str]) -> None:
    """Refuses options that cannot give a measurement (``ValueError``, naming the flag)."""
    if steps <= STEADY:
        raise ValueError(f"--steps must be more than {STEADY}: the steady step time is the median of the last {STEADY}")
    if repeats < 1:
        raise ValueError("--repeats must be at least 1")
    check_model_names(models)


def measure(
    out: Path, device: str, steps: int, repeats: int, models: list[str], arguments: tuple[str, ...] = ()
) -> None:
    """Checkpoints and restarts each model ``repeats`` times; each row is written to
    ``out/restart.csv`` as soon as it is measured, so a failure keeps the rows before it.
    ``arguments``: the command line's, recorded in ``env.txt``."""
    check_options(steps, repeats, models)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch, open(out / "restart.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, FIELDS)
        writer.writeheader()
        for repeat in range(1, repeats + 1):
            for name, batch in MODELS:
                if models and name not in models:
                    continue
                checkpoint = Path(scratch) / f"{name}.pt"
                first = _launch(name, batch, device, checkpoint, steps, restore=False)
                second = _launch(name, batch, device, checkpoint, steps, restore=True)
                row = {"model": name, "repeat": repeat, "checkpoint_mb": checkpoint.stat().st_size / 2**20}
                row.update(phases(first, second, steps))
                writer.writerow({k: (f"{v:.6f}" if isinstance(v, float) else v) for k, v in row.items()})
                file.flush()
                print(f"{name:12s} repeat {repeat}: pause {row['pause_s']:.2f} s", file=sys.stderr)
    write_environment(out, device, "measure_restart.py", arguments)


def compare(directory: Path) -> str:
    """A markdown table of the measured pauses (mean over repeats) beside the simulator's
    restore penalties for a 1-GPU job. ``ValueError`` when there is nothing to show."""
    path = directory / "restart.csv"
    if not path.is_file():
        raise ValueError(f"{path}: no such file (run `measure --out {directory}` first)")
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    if not rows:
        raise ValueError(f"{path}: no measurements in it")
    names = list(dict.fromkeys(r["model"] for r in rows))
    shown = ["checkpoint_mb", "save_s", "import_s", "cuda_s", "build_s", "load_s", "first_step_s", "pause_s"]
    lines = ["| model | " + " | ".join(shown) + " | pause, each repeat |", "|---" * (len(shown) + 2) + "|"]
    for name in names:
        mine = [r for r in rows if r["model"] == name]
        means = [statistics.fmean(float(r[f]) for r in mine) for f in shown]
        each = " / ".join(f"{float(r['pause_s']):.2f}" for r in mine)
        lines.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in means) + f" | {each} |")
    pauses = [float(r["pause_s"]) for r in rows]
    saves = [float(r["save_s"]) for r in rows]
    lines.append("")
    lines.append(f"pause: {min(pauses):.2f}-{max(pauses):.2f} s (mean {statistics.fmean(pauses):.2f}); "
                 f"save: {min(saves):.2f}-{max(saves):.2f} s; simulator for a 1-GPU job: default 30 s, "
                 "restore_penalty=helios 7 s")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "life":  # the child process: no argparse start-up cost
        name, batch, device, checkpoint, steps, restore, launched = sys.argv[2:9]
        result = life(name, int(batch), device, Path(checkpoint), int(steps), restore == "1", float(launched))
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("measure", help="checkpoint and restart each model (on the GPU machine)")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--device", default="cuda")
    run.add_argument("--steps", type=int, default=60)
    run.add_argument("--repeats", type=int, default=2)
    run.add_argument("--models", default="", help="comma-separated names from MODELS (default: all)")
    show = commands.add_parser("compare", help="the measured pauses as a table")
    show.add_argument("directory", type=Path)
    args = parser.parse_args()
    if args.command == "measure":
        models = [m for m in args.models.split(",") if m]
        try:
            check_options(args.steps, args.repeats, models)
        except ValueError as error:
            parser.error(str(error))  # exit status 2, before anything runs
        try:
            measure(args.out, args.device, args.steps, args.repeats, models, tuple(sys.argv[1:]))
        except ChildFailed as error:
            raise SystemExit(f"measure_restart: {error}") from None
    else:
        try:
            print(compare(args.directory))
        except ValueError as error:
            parser.error(str(error))


if __name__ == "__main__":
    main()
