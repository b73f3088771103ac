"""Fusion planner: how many trials fit one device, which trials fuse, and on which slot.

Why: fusing more trials than a device holds fails, fusing fewer wastes it. Hydro profiles
one training step at F=1 and F=2 and, memory being affine in F, takes
``F = floor((capacity - m1) / (m2 - m1))`` (``HydroPlanner.obtain_memory_bounded_plan``
in ``hydro/tune/planner.py``; OSDI'23 §4.3). Trials fuse only with trials of the same
batch size (Hydro keeps one plan per batch size: ``obtain_memory_bounded_plan_per_batch``),
and the fused groups are spread over the slots the scheduler granted.

Memory is measured with ``torch.cuda.max_memory_allocated`` on a GPU. On a CPU, where
PyTorch keeps no allocator statistics, it is counted: parameters, gradients and
optimiser state (``state_copies`` tensors per parameter, 2 for Adam) plus every tensor
autograd saves for the backward pass, which is what grows with F.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn


class PlanError(ValueError):
    """No fusion plan exists (the model does not fit, or the inputs are inconsistent)."""


def _tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def step_memory_bytes(model: nn.Module, inputs: tuple, loss: Callable[[torch.Tensor], torch.Tensor],
                      state_copies: int = 2) -> int:
    """Bytes one training step needs: measured on CUDA, counted on CPU (see module doc)."""
    params = list(model.parameters())
    if params and params[0].is_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        loss(model(*inputs)).backward()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        model.zero_grad(set_to_none=True)
        return int(peak + state_copies * sum(_tensor_bytes(p) for p in params))
    saved: dict[tuple[int, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[(t.untyped_storage().data_ptr(), t.storage_offset())] = _tensor_bytes(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = loss(model(*inputs))
    out.backward()
    model.zero_grad(set_to_none=True)
    param_ptrs = {(p.untyped_storage().data_ptr(), p.storage_offset()) for p in params}
    activations = sum(b for key, b in saved.items() if key not in param_ptrs)
    return int((2 + state_copies) * sum(_tensor_bytes(p) for p in params) + activations)


def max_fusion(memory_one: float, memory_two: float, capacity: float) -> int:
    """Largest F with ``m1 + (F-1)(m2-m1) <= capacity`` (Hydro's affine rule)."""
    for name, value in (("memory at F=1", memory_one), ("memory at F=2", memory_two), ("capacity", capacity)):
        if not math.isfinite(value) or value <= 0:
            raise PlanError(f"{name} must be a positive finite number, got {value}")
    if memory_one > capacity:
        raise PlanError(f"one trial needs {memory_one:.3g} bytes, more than the device's {capacity:.3g}")
    per_trial = memory_two - memory_one
    if per_trial <= 0:
        raise PlanError(
            f"memory did not grow from F=1 ({memory_one:.3g}) to F=2 ({memory_two:.3g}); cannot extrapolate")
    return max(1, math.floor((capacity - memory_one) / per_trial) + 1)


@dataclass(frozen=True)
class FusedGroup:
    """Trials that train as one fused model on one slot."""

    slot: int
    batch_size: int
    trials: tuple[int, ...]


def plan_groups(batch_sizes: Mapping[int, int], limits: Mapping[int, int] | int, slots: int) -> list[FusedGroup]:
    """Group trials (id -> batch size) by batch size into fused groups of at most the
    batch size's fusion limit, balanced in size, and spread them over ``slots``.

    Spreading is longest-processing-time-first with a group's cost taken as trials x batch
    size (the examples it processes per step), so slots end at about the same time.
    """
    if slots < 1:
        raise PlanError(f"slots must be at least 1, got {slots}")
    by_batch: dict[int, list[int]] = {}
    for trial, batch in sorted(batch_sizes.items()):
        by_batch.setdefault(batch, []).append(trial)
    groups: list[tuple[int, tuple[int, ...]]] = []
    for batch, trials in sorted(by_batch.items()):
        limit = limits if isinstance(limits, int) else limits.get(batch, 0)
        if limit < 1:
            raise PlanError(f"no fusion limit for batch size {batch}")
        count = math.ceil(len(trials) / limit)
        size, extra = divmod(len(trials), count)
        start = 0
        for index in range(count):
            end = start + size + (1 if index < extra else 0)
            groups.append((batch, tuple(trials[start:end])))
            start = end
    load = [0] * slots
    placed: list[FusedGroup] = []
    for batch, trials in sorted(groups, key=lambda g: (-g[0] * len(g[1]), g[1])):
        slot = min(range(slots), key=lambda s: (load[s], s))
        load[slot] += batch * len(trials)
        placed.append(FusedGroup(slot, batch, trials))
    return sorted(placed, key=lambda g: (g.slot, g.trials))


def plan_fusion(measure: Callable[[int], int], capacity: float, candidates: Sequence[int] = (1, 2)) -> int:
    """Measure memory at F=1 and F=2 with ``measure(F)`` and return the largest F that fits."""
    one, two = (measure(f) for f in candidates)
    return max_fusion(one, two, capacity)
