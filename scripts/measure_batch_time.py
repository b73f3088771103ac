"""Measure one GPU's step time against the batch size, beside Pollux's compute model.

Pollux's throughput model (``shapeshift.perf.pollux.goodput``; Pollux, OSDI'21 §3.2)
takes the compute time of a step as linear in the per-GPU batch, ``T_grad(b) = alpha_c +
beta_c * b``; the goodput policies choose batch sizes with it. Its parameters come from
the Pollux artifact's profiles, measured on older GPUs. This script checks the form on
current hardware, for the six models of ``measure_colocation.py``:

    python scripts/measure_batch_time.py measure --out DIR    # on the GPU machine (torch, torchvision)
    python scripts/measure_batch_time.py compare DIR          # here (shapeshift)

``measure`` times each model at 1/8 to 8 times its batch in ``MODELS``: a few warm-up
steps, then the median of ``--steps`` steps, twice over (the second pass in reverse
order, so drift shows). A batch that runs out of GPU memory ends that model's series.
It writes ``DIR/batch.csv`` (``model,batch,pass,step_s``) and ``DIR/env.txt``.

``compare`` fits the model with the product's own fitter (``fit_perf_params``, single-GPU
rows, no synchronisation; it minimises the root-mean-square log error) and reports, per
model, the fitted ``alpha_c`` and ``beta_c`` and the error at each batch when that batch
is left out of the fit (so no reported error was fitted on its own batch).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from pathlib import Path

from measure_colocation import MODELS, build_training, check_model_names, write_environment

#: Batches tried, as multiples of the model's batch in ``MODELS``.
SCALES = (0.125, 0.25, 0.5, 1, 2, 4, 8)
WARMUP = 5


def batches_of(base: int) -> list[int]:
    """The batches tried for a model whose usual batch is ``base`` (at least 1 each)."""
    return sorted({max(1, round(base * scale)) for scale in SCALES})


def time_steps(name: str, batch: int, device: str, steps: int) -> float | None:
    """Median seconds of ``steps`` training steps at ``batch`` (each step ends
    synchronised, so each is timed alone; the median ignores a few disturbed steps);
    ``None`` when the batch does not fit in memory."""
    import torch

    training = None
    try:
        training = build_training(name, batch, device)
        for _ in range(WARMUP):
            training.step()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            training.step()
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    except torch.cuda.OutOfMemoryError:
        return None
    finally:
        del training
        if device != "cpu":
            torch.cuda.empty_cache()


def check_options(steps: int, models: list[str]) -> None:
    """Refuses options that cannot give a measurement (``ValueError``, naming the flag)."""
    if steps < 1:
        raise ValueError("--steps must be at least 1")
    check_model_names(models)


def measure(out: Path, device: str, steps: int, models: list[str], arguments: tuple[str, ...] = ()) -> None:
    """Times every model and batch (see the module docstring); ``arguments``: the command
    line's, recorded in ``env.txt``."""
    check_options(steps, models)
    import torch

    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    chosen = [(n, b) for n, b in MODELS if not models or n in models]
    fits: dict[str, list[int]] = {}
    with open(out / "batch.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["model", "batch", "pass", "step_s"])
        for pass_ in (1, 2):
            for name, base in chosen if pass_ == 1 else chosen[::-1]:
                # Pass 1 goes up and stops at the first batch out of memory; pass 2 goes
                # down over the batches pass 1 ran, skipping one that fails this time.
                sizes = batches_of(base) if pass_ == 1 else fits[name][::-1]
                done = []
                for batch in sizes:
                    seconds = time_steps(name, batch, device, steps)
                    if seconds is None:
                        print(f"{name} batch {batch}: out of memory", file=sys.stderr)
                        if pass_ == 1:
                            break
                        continue
                    writer.writerow([name, batch, pass_, f"{seconds:.6f}"])
                    file.flush()
                    done.append(batch)
                    print(f"{name:12s} batch {batch:5d} pass {pass_}: {seconds * 1e3:.2f} ms", file=sys.stderr)
                fits.setdefault(name, done)
    write_environment(out, device, "measure_batch_time.py", arguments)


def read(directory: Path) -> dict[str, dict[int, float]]:
    """Each model's step time by batch, the mean of its passes."""
    path = directory / "batch.csv"
    if not path.is_file():
        raise ValueError(f"{path}: no such file (run `measure --out {directory}` first)")
    times: dict[str, dict[int, list[float]]] = {}
    with open(path, newline="") as file:
        reader = csv.DictReader(file)
        missing = {"model", "batch", "step_s"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: no column {', '.join(sorted(missing))} (expected model,batch,pass,step_s)")
        for line, row in enumerate(reader, start=2):
            if not row["model"]:
                raise ValueError(f"{path}, line {line}: the model is empty")
            try:
                batch, seconds = int(row["batch"]), float(row["step_s"])
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{path}, line {line}: needs an integer batch and a number step_s") from None
            if batch < 1 or not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(f"{path}, line {line}: batch must be >= 1 and step_s a finite number > 0")
            times.setdefault(row["model"], {}).setdefault(batch, []).append(seconds)
    if not times:
        raise ValueError(f"{path}: no measurements in it")
    return {m: {b: statistics.fmean(t) for b, t in sorted(by.items())} for m, by in times.items()}


def fit_linear(times: dict[int, float]):  # type: ignore[no-untyped-def]
    """Pollux's parameters fitted to single-GPU step times (``fit_perf_params``)."""
    from shapeshift.perf.pollux.goodput import fit_perf_params
    from shapeshift.perf.pollux.profiles import Row

    return fit_perf_params([Row(1, 1, float(b), t, 0.0) for b, t in times.items()])


def left_out_errors(times: dict[int, float]) -> dict[int, float]:
    """Each batch's relative error (predicted / measured - 1) when it is left out of the fit."""
    errors = {}
    for batch in times:
        rest = {b: t for b, t in times.items() if b != batch}
        p = fit_linear(rest)
        errors[batch] = (p.alpha_c + p.beta_c * batch) / times[batch] - 1
    return errors


def compare(measured: dict[str, dict[int, float]]) -> str:
    """A markdown table: per model, the fitted parameters and the left-out errors."""
    lines = ["| model | batches | alpha_c (ms) | beta_c (ms per sample) | error left out, each batch | largest |",
             "|---|---|---|---|---|---|"]
    for model, times in measured.items():
        if len(times) < 3:
            lines.append(f"| {model} | {', '.join(map(str, times))} | - | - | too few batches to leave one out | - |")
            continue
        p = fit_linear(times)
        errors = left_out_errors(times)
        errors = {b: round(e, 2) + 0.0 for b, e in errors.items()}  # no "-0%"
        each = ", ".join(f"{b}: {e:+.0%}" for b, e in errors.items())
        worst = max(errors.values(), key=abs)
        lines.append(f"| {model} | {min(times)}-{max(times)} | {p.alpha_c * 1e3:.2f} | {p.beta_c * 1e3:.4f} | "
                     f"{each} | {worst:+.0%} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("measure", help="time each model's step at several batches (on the GPU machine)")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--device", default="cuda")
    run.add_argument("--steps", type=int, default=20)
    run.add_argument("--models", default="", help="comma-separated names from MODELS (default: all)")
    show = commands.add_parser("compare", help="Pollux's linear compute model fitted, with left-out errors")
    show.add_argument("directory", type=Path)
    args = parser.parse_args()
    if args.command == "measure":
        models = [m for m in args.models.split(",") if m]
        try:
            check_options(args.steps, models)
        except ValueError as error:
            parser.error(str(error))  # exit status 2, before anything runs
        measure(args.out, args.device, args.steps, models, tuple(sys.argv[1:]))
        return
    try:
        table = read(args.directory)
    except ValueError as error:
        parser.error(str(error))
    print(compare(table))


if __name__ == "__main__":
    main()
