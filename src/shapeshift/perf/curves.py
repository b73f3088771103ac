"""Sensitivity curves: best feasible plan and throughput per amount of one resource.

A scheduler asks "what does one more GPU (or CPU) buy this job?" many times per round,
so curves are computed once per (fitted model, batch, resource, shape) and cached. All
candidate (plan, placement) pairs of a curve go through the vectorised model in one
call. The curve is made monotone: where more resource does not help, the point keeps the
previous best plan and placement (the extra resource would stay idle) and is marked flat.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from shapeshift.model import ExecutionPlan
from shapeshift.perf.fitting import FittedModel
from shapeshift.perf.memory import fits_memory
from shapeshift.perf.plans import enumerate_plans, packed_placement
from shapeshift.perf.rubick import Config


@dataclass(frozen=True, slots=True)
class CurvePoint:
    amount: int
    plan: ExecutionPlan | None
    placement: tuple[int, ...]
    throughput: float  # samples per second (0 when nothing fits)
    iter_time: float
    slope: float  # throughput gain over the previous amount, per unit of resource
    flat: bool


@dataclass(frozen=True)
class SensitivityCurve:
    model: str
    resource: str
    points: tuple[CurvePoint, ...]

    def throughput(self, amount: int) -> float:
        return self.points[amount - 1].throughput


def _envelope(model: FittedModel, resource: str, options: list[list[Config]]) -> SensitivityCurve:
    flat_cfgs = [c for opts in options for c in opts]
    times = model.predict(flat_cfgs) if flat_cfgs else np.zeros(0)
    points: list[CurvePoint] = []
    pos = 0
    best: CurvePoint | None = None
    batch = model.arch.global_batch
    for amount, opts in enumerate(options, start=1):
        seg = times[pos : pos + len(opts)]
        pos += len(opts)
        prev_thr = best.throughput if best else 0.0
        if len(opts) and (best is None or batch / seg.min() > best.throughput):
            i = int(np.argmin(seg))
            cfg = opts[i]
            thr = batch / float(seg[i])
            best = CurvePoint(amount, cfg.plan, cfg.placement, thr, float(seg[i]), thr - prev_thr, False)
            points.append(best)
        elif best is not None:
            points.append(CurvePoint(amount, best.plan, best.placement, best.throughput, best.iter_time, 0.0, True))
        else:
            points.append(CurvePoint(amount, None, (), 0.0, float("inf"), 0.0, True))
    return SensitivityCurve(model.model, resource, tuple(points))


@lru_cache(maxsize=256)
def gpu_curve(
    model: FittedModel, max_gpus: int = 64, gpus_per_node: int = 8, cpus_per_gpu: float = 4.0
) -> SensitivityCurve:
    """Best plan and throughput for 1..max_gpus GPUs, packed onto nodes of ``gpus_per_node``."""
    options: list[list[Config]] = []
    for n in range(1, max_gpus + 1):
        placement = packed_placement(n, gpus_per_node)
        cfgs = [
            Config(model.arch, plan, placement, cpus_per_gpu, model.node)  # threads per process
            for plan in enumerate_plans(model.arch, placement)
            if fits_memory(model.arch, plan, placement, model.node)
        ]
        options.append(cfgs)
    return _envelope(model, "gpus", options)


@lru_cache(maxsize=256)
def cpu_curve(model: FittedModel, placement: tuple[int, ...], max_cpus: int = 32) -> SensitivityCurve:
    """Best plan and throughput for 1..max_cpus CPU threads per GPU (per training process)
    with the GPUs fixed at ``placement``.

    Only ZeRO-Offload runs its optimizer on CPUs, so the curve rises only where an
    Offload plan is (or becomes) the best one.
    """
    plans = [p for p in enumerate_plans(model.arch, placement) if fits_memory(model.arch, p, placement, model.node)]
    options = [[Config(model.arch, p, placement, float(c), model.node) for p in plans] for c in range(1, max_cpus + 1)]
    return _envelope(model, "cpus", options)
