"""Training a fused group of trials step by step, and evaluating it.

Why a step-wise object: the tuner interleaves a group's steps with the eager-transfer
target trial and asks the pruner between them (``shapeshift.tune.search``). Every trial
of a group sees the same batches and starts from the same weights (common random
numbers), so trials differ only in their hyper-parameters, as in a grid sweep on one seed.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from shapeshift.tune.fused_optim import FusedAdam, FusedSGD
from shapeshift.tune.fusion import fuse, trial_losses
from shapeshift.tune.mup import param_groups

#: Optimiser defaults when a hyper-parameter is not searched (torch's own defaults).
DEFAULTS = {"momentum": 0.0, "weight_decay": 0.0, "beta1": 0.9}


class FusedRun:
    """F trials of one model being trained together."""

    def __init__(self, template: nn.Module, configs: Sequence[Mapping[str, float]], *, optimizer: str, data: Any,
                 loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], batch_size: int, seed: int,
                 lr_mult: Mapping[str, float] | None = None, wd_mult: Mapping[str, float] | None = None):
        self.trials = len(configs)
        self.model = fuse([copy.deepcopy(template) for _ in configs])
        groups = param_groups(self.model.graph_module, dict(lr_mult or {}), dict(wd_mult or {}))
        hyper = {k: [float(c.get(k, DEFAULTS.get(k, 0.0))) for c in configs] for k in ("lr", "weight_decay")}
        if optimizer == "sgd":
            momentum = [float(c.get("momentum", DEFAULTS["momentum"])) for c in configs]
            self.optimizer: FusedSGD | FusedAdam = FusedSGD(groups, self.trials, momentum=momentum, **hyper)
        else:
            beta1 = [float(c.get("beta1", DEFAULTS["beta1"])) for c in configs]
            self.optimizer = FusedAdam(groups, self.trials, beta1=beta1, **hyper)
        self.data, self.loss, self.batch_size, self.seed = data, loss, batch_size, seed
        self.generator = torch.Generator().manual_seed(seed)
        self.steps_done = 0
        self.params = sum(p[0].numel() for p in self.model.parameters())

    def step(self, count: int = 1) -> None:
        for _ in range(count):
            x, y = self.data.batch(self.generator, self.batch_size)
            out = self.model(x.repeat(self.trials, *[1] * (x.dim() - 1)))
            losses = trial_losses(out, y.repeat(self.trials, *[1] * (y.dim() - 1)), self.trials, self.loss)
            self.optimizer.zero_grad(set_to_none=True)
            # a diverged trial gives NaN gradients to its own slice only; keep it out of the others
            torch.nan_to_num(losses, nan=0.0, posinf=0.0).sum().backward()
            self.optimizer.step()
            self.steps_done += 1

    def freeze(self, trial: int) -> None:
        """Stop one trial from learning (pruned); the group keeps its shape."""
        self.optimizer.set_trial(trial, lr=0.0)

    @torch.no_grad()
    def evaluate(self, batches: int) -> list[float]:
        """Mean validation loss per trial over ``batches`` fixed batches; inf if diverged."""
        generator = torch.Generator().manual_seed(self.seed + 10_000)
        totals = torch.zeros(self.trials, dtype=torch.float64)
        for _ in range(batches):
            x, y = self.data.batch(generator, self.batch_size, "valid")
            out = self.model(x.repeat(self.trials, *[1] * (x.dim() - 1)))
            totals += trial_losses(out, y.repeat(self.trials, *[1] * (y.dim() - 1)), self.trials, self.loss).double()
        return [v / batches if math.isfinite(v) else math.inf for v in totals.tolist()]

    def tokens_per_step(self) -> int:
        x, _ = self.data.batch(torch.Generator().manual_seed(0), self.batch_size)
        return x.numel()
