"""Time of the GPU sensitivity curve (1..64 GPUs, every plan), cold and cached.

    python benchmarks/bench_gpu_curve.py [--model gpt2] [--repeat 5]

The curve is what plan-aware policies consult for slopes; it is cached per fitted model
(``functools.lru_cache``), so a cached call should cost microseconds and a cold one the
plan enumeration and one vectorised prediction per GPU count.
"""

from __future__ import annotations

import argparse
import time

from shapeshift.perf.arch import get_arch
from shapeshift.perf.curves import gpu_curve
from shapeshift.perf.fitting import FittedModel
from shapeshift.perf.rubick import RubickParams


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cold, warm = [], []
    for k in range(args.repeat):
        model = FittedModel(get_arch(args.model), RubickParams(t_fwd=0.07 + 1e-6 * k, t_fwd_3d=0.07))
        t0 = time.perf_counter()
        gpu_curve(model, 64, 8)
        cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        gpu_curve(model, 64, 8)
        warm.append(time.perf_counter() - t0)
    print(f"{args.model} gpu_curve(64 GPUs): cold min {min(cold) * 1e3:.1f} ms, cached min {min(warm) * 1e6:.1f} us")


if __name__ == "__main__":
    main()
