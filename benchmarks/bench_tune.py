"""The CPU proof of surrogate-based tuning (Hydro): does the learning rate found on a muP
surrogate transfer to the full model, at what compute, and how much does fusion save?

    OMP_NUM_THREADS=1 python benchmarks/bench_tune.py [--steps 300] [--out DIR] [--torch-init] [--skip-fusion]

Model: ``tiny-lm`` (2-layer character transformer, width 128, context 64) on Python's
packaged pydoc topics (nothing downloaded). Optimiser Adam, batch 16. The grid is fixed
before any run: lr = 2^-13 ... 2^-5 (9 points, one grid step = a factor of 2).

1. Full-model sweep: each lr trained on the full model, one after another (the baseline
   "tune the full model directly").
2. Surrogate sweeps at width /4 and /8: the same grid through ``run_tuning`` (fused F=9,
   eager transfer at 50%), which also trains the chosen lr on the full model.
4. Control (``--only-control``): the same grid on a width-128/S model in standard
   parametrisation, to see what muP changes.
3. Fusion: F=8 trials of the /4 and /8 surrogates for ``--fusion-steps`` steps, fused
   vs eight plain torch runs one after another (torch.optim.Adam with the same muP groups).

Every trial is selected on the validation split (the last 10% of the text, fixed
batches); the full-model losses reported are on the same batches. Wall times are taken
on a shared 2-core machine and are inflated by other users' load; the FLOP counts
(6 x parameters x tokens) are not.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import time
from pathlib import Path

import torch

from shapeshift.tune.models import MODELS
from shapeshift.tune.mup import lr_multipliers, param_groups, scaled_groups
from shapeshift.tune.search import TuneSpec, run_tuning
from shapeshift.tune.shrink import shrink
from shapeshift.tune.space import Param, SearchSpace
from shapeshift.tune.trainer import FusedRun

GRID = [2.0**k for k in range(-13, -4)]


def full_sweep(steps: int, eval_batches: int, torch_init: bool = False) -> tuple[dict[float, float], float, float]:
    """The full model under the same initialisation rule as the tuner's target trial."""
    model = MODELS["tiny-lm"]
    torch.manual_seed(0)
    full = model.build()
    if not torch_init:
        full = shrink(full, model.example_inputs(), 1, seed=0).module
    data = model.data()
    losses, seconds, flops = {}, 0.0, 0.0
    for lr in GRID:
        run = FusedRun(full, [{"lr": lr}], optimizer="adam", data=data, loss=model.loss, batch_size=16, seed=0)
        begin = time.perf_counter()
        run.step(steps)
        seconds += time.perf_counter() - begin
        losses[lr] = run.evaluate(eval_batches)[0]
        flops += 6.0 * run.params * run.tokens_per_step() * steps
        print(f"  full lr=2^{int(math.log2(lr))}: {losses[lr]:.4f}", flush=True)
    return losses, seconds, flops


def surrogate_sweep(scale: int, steps: int, eval_batches: int, torch_init: bool = False):
    space = SearchSpace(params=(Param("lr", "grid", values=tuple(GRID)),), steps=steps, sampler="grid",
                        optimizer="adam", eval_batches=eval_batches, batch_size=16)
    return run_tuning(TuneSpec("tiny-lm", space, len(GRID), scale, fusion=len(GRID), torch_init=torch_init))


def standard_sweep(scale: int, steps: int, eval_batches: int) -> dict[float, float]:
    """Control: the same narrow model in standard parametrisation (TinyLM built at width
    128/S, plain Adam rates, 1/sqrt(d) attention, no readout multiplier)."""
    model = MODELS["tiny-lm"]
    torch.manual_seed(0)
    from shapeshift.tune.models import TinyLM

    narrow = TinyLM(width=128 // scale)
    run = FusedRun(narrow, [{"lr": lr} for lr in GRID], optimizer="adam", data=model.data(), loss=model.loss,
                   batch_size=16, seed=0)
    run.step(steps)
    return dict(zip(GRID, run.evaluate(eval_batches), strict=True))


def fusion_ratio(scale: int, trials: int, steps: int, repeats: int = 3) -> tuple[float, float]:
    """Median over ``repeats`` alternating measurements (the machine is shared)."""
    model = MODELS["tiny-lm"]
    torch.manual_seed(0)
    surrogate = shrink(model.build(), model.example_inputs(), scale)
    data = model.data()
    mult = lr_multipliers(surrogate, "adam")
    configs = [{"lr": lr} for lr in GRID[:trials]]
    fused_times, sequential_times = [], []
    for _ in range(repeats):
        fused = FusedRun(surrogate.module, configs, optimizer="adam", data=data, loss=model.loss, batch_size=16,
                         seed=0, lr_mult=mult)
        fused.step(2)  # warm-up outside the clock
        begin = time.perf_counter()
        fused.step(steps)
        fused_times.append(time.perf_counter() - begin)
        sequential = 0.0
        for config in configs:
            net = copy.deepcopy(surrogate.module)
            opt = torch.optim.Adam(scaled_groups(param_groups(net, mult), config["lr"]))
            gen = torch.Generator().manual_seed(0)
            x, y = data.batch(gen, 16)
            model.loss(net(x), y).backward()  # warm-up
            opt.zero_grad()
            begin = time.perf_counter()
            for _ in range(steps):
                x, y = data.batch(gen, 16)
                opt.zero_grad(set_to_none=True)
                model.loss(net(x), y).backward()
                opt.step()
            sequential += time.perf_counter() - begin
        sequential_times.append(sequential)
    return statistics.median(fused_times), statistics.median(sequential_times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--eval-batches", type=int, default=16)
    parser.add_argument("--fusion-steps", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only-fusion", action="store_true", help="skip the sweeps (part 3 only)")
    parser.add_argument("--only-control", action="store_true",
                        help="only the standard-parametrisation control sweeps (part 4)")
    parser.add_argument("--torch-init", action="store_true",
                        help="PyTorch's default initialisation instead of Hydro's zero readout and biases")
    parser.add_argument("--skip-fusion", action="store_true", help="leave out the fusion timing (part 3)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    report: dict = {"grid": GRID, "steps": args.steps}
    for scale in (4, 8) if args.only_fusion else ():
        fused_s, seq_s = fusion_ratio(scale, 8, args.fusion_steps)
        print(f"fusion /{scale}: F=8 fused {fused_s:.2f} s vs 8 sequential {seq_s:.2f} s -> {seq_s / fused_s:.2f}x")
    if args.only_fusion:
        return 0
    for scale in (4, 8) if args.only_control else ():
        losses = standard_sweep(scale, args.steps, args.eval_batches)
        best = min(losses, key=losses.get)
        print(f"standard parametrisation /{scale}: best lr 2^{int(math.log2(best))}; "
              + ", ".join(f"2^{int(math.log2(k))}: {v:.3f}" for k, v in losses.items()), flush=True)
    if args.only_control:
        return 0
    print("full-model sweep", flush=True)
    full, full_seconds, full_flops = full_sweep(args.steps, args.eval_batches, args.torch_init)
    best_full = min(full, key=full.get)
    report["full"] = {"losses": full, "best_lr": best_full, "seconds": full_seconds, "flops": full_flops}
    for scale in (4, 8):
        print(f"surrogate /{scale} sweep", flush=True)
        result = surrogate_sweep(scale, args.steps, args.eval_batches, args.torch_init)
        best = result.best_params["lr"]
        steps_off = abs(round(math.log2(best / best_full)))
        report[f"surrogate_{scale}"] = {
            "losses": {r.params["lr"]: r.surrogate_metric for r in result.rows}, "best_lr": best,
            "grid_steps_from_full_best": steps_off, "target_loss": result.target_metric,
            "full_best_loss": full[best_full], "surrogate_seconds": result.surrogate_seconds,
            "target_seconds": result.target_seconds, "surrogate_flops": result.surrogate_flops,
            "target_flops": result.target_flops, "target_restarts": result.target_restarts,
            "compute_fraction_flops": (result.surrogate_flops + result.target_flops) / full_flops,
            "compute_fraction_seconds": (result.surrogate_seconds + result.target_seconds) / full_seconds,
        }
        print(f"  best lr 2^{int(math.log2(best))} vs full 2^{int(math.log2(best_full))} ({steps_off} grid steps); "
              f"full model at it {result.target_metric:.4f} vs full best {full[best_full]:.4f}", flush=True)
    for scale in () if args.skip_fusion else (4, 8):
        fused_s, seq_s = fusion_ratio(scale, 8, args.fusion_steps)
        report[f"fusion_{scale}"] = {"fused_seconds": fused_s, "sequential_seconds": seq_s, "speedup": seq_s / fused_s}
        print(f"fusion /{scale}: F=8 fused {fused_s:.2f} s vs 8 sequential {seq_s:.2f} s -> {seq_s / fused_s:.2f}x",
              flush=True)
    text = json.dumps(report, indent=2, default=str)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_tune.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
