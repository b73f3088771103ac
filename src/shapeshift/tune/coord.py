"""Activation L1 check of surrogates (muP's "coordinate check").

Why: a surrogate transfers only if it is really in muP. The check Hydro ships for this
(``get_coord_data`` in hydro/scale/coord_check.py, the ``mup`` package's coordinate check,
statistic ``l1`` = mean |x|) trains the model at several widths for a few steps at one
learning rate and records the mean absolute value of every layer's output at each step.
Under muP these sizes stay the same across widths; under a wrong parametrisation (a layer
given the wrong role, a missing readout multiplier, a wrong learning-rate multiplier) they
grow or shrink with the width, and the wrong layer is the one that moves.

Hydro does not run the check inside a tuning job (its ``TuneConfig`` has no switch for it;
the function is exported for users), and neither do we: ``coord_check`` records, and
``unstable_layers`` names the layers whose size moves across widths by more than a ratio.
That ratio (``DEFAULT_SPREAD``, 2) is ours: the source plots the curves and leaves the
verdict to the eye.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from shapeshift.tune.mup import lr_multipliers, param_groups, scaled_groups, weight_decay_multipliers
from shapeshift.tune.shrink import SCALABLE, shrink

#: Largest max/min ratio of a layer's mean |output| across widths still called stable (ours).
DEFAULT_SPREAD = 2.0


@dataclass(frozen=True)
class CoordRecord:
    """Mean |output| of one layer of the surrogate at width 1/``scale``, at training ``step``."""

    scale: int
    step: int
    layer: str
    l1: float


def activation_l1(module: nn.Module, inputs: tuple) -> dict[str, float]:
    """Mean absolute output of every parametrised layer of ``module`` on ``inputs``."""
    found: dict[str, float] = {}
    hooks = []
    for name, layer in module.named_modules():
        if isinstance(layer, SCALABLE):
            hooks.append(layer.register_forward_hook(
                lambda _m, _i, out, name=name: found.__setitem__(name, float(out.detach().abs().mean()))))
    try:
        with torch.no_grad():
            module(*inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return found


def coord_check(model: nn.Module, example_inputs: tuple, batches: Callable[[int], tuple[Any, Any]],
                loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *, scales: Sequence[int] = (1, 2, 4, 8),
                steps: int = 3, lr: float = 1e-2, optimizer: str = "adam", seed: int = 0,
                torch_init: bool = False) -> tuple[CoordRecord, ...]:
    """Train the surrogate of ``model`` at each scale for ``steps`` steps and record every
    layer's mean |output| on the step's batch before its update (``batches(step)`` gives the
    same ``(x, y)`` to every width, as in mup's check)."""
    if optimizer not in ("adam", "sgd"):
        raise ValueError(f"optimizer must be adam or sgd, got {optimizer!r}")
    records: list[CoordRecord] = []
    for scale in scales:
        surrogate = shrink(model, example_inputs, scale, seed=seed, torch_init=torch_init)
        module = surrogate.module
        groups = scaled_groups(param_groups(module, lr_multipliers(surrogate, optimizer),
                                            weight_decay_multipliers(surrogate, optimizer)), lr)
        opt = torch.optim.Adam(groups) if optimizer == "adam" else torch.optim.SGD(groups)
        for step in range(steps):
            x, y = batches(step)
            for layer, value in activation_l1(module, (x,)).items():
                records.append(CoordRecord(scale, step, layer, value))
            opt.zero_grad(set_to_none=True)
            loss(module(x), y).backward()
            opt.step()
    return tuple(records)


def unstable_layers(records: Iterable[CoordRecord], spread: float = DEFAULT_SPREAD) -> list[tuple[str, int, float]]:
    """``(layer, step, max/min)`` for every layer and step whose mean |output| differs across
    widths by more than ``spread`` (all-zero outputs count as stable; one zero among
    non-zeros as infinitely spread)."""
    by_key: dict[tuple[str, int], list[float]] = {}
    for r in records:
        by_key.setdefault((r.layer, r.step), []).append(r.l1)
    out = []
    for (layer, step), values in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        high, low = max(values), min(values)
        if high == 0:
            continue
        ratio = high / low if low > 0 else math.inf
        if ratio > spread:
            out.append((layer, step, ratio))
    return out
