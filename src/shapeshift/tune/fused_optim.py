"""Optimisers for fused models: each trial steps with its own learning rate, momentum
and weight decay.

Why: fused trials differ exactly in their hyper-parameters (Hydro ``hydro/optim/sgd.py``
and ``adam.py`` keep them as per-trial tensors). Every parameter of a fused model has a
leading trial dimension, so a per-trial value is a tensor of shape ``[F]`` broadcast over
the rest. The update formulas are torch.optim.SGD's and torch.optim.Adam's, so one
fused step equals F separate torch steps to float tolerance.

Param groups may carry ``lr_scale`` / ``wd_scale`` (muP multipliers from
``shapeshift.tune.mup.param_groups``); a trial's effective rate for a group is
``lr[f] * lr_scale``. Setting a trial's lr to 0 (``set_trial``) freezes it, which is how
a pruned trial stops learning inside its group.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch


def _per_trial(values: float | Sequence[float], trials: int, name: str) -> torch.Tensor:
    if isinstance(values, int | float):
        values = [float(values)] * trials
    tensor = torch.tensor([float(v) for v in values], dtype=torch.float64)
    if tensor.numel() != trials:
        raise ValueError(f"{name} has {tensor.numel()} values for {trials} trials")
    if not torch.isfinite(tensor).all():
        raise ValueError(f"{name} must be finite")
    return tensor


class _FusedOptimizer(torch.optim.Optimizer):
    """Shared bookkeeping: per-trial hyper-parameter tensors and their broadcast."""

    def __init__(self, params: Iterable, trials: int, hyper: dict[str, float | Sequence[float]]):
        groups = list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            group.setdefault("lr_scale", 1.0)
            group.setdefault("wd_scale", 1.0)
        super().__init__(groups, {})
        self.trials = trials
        self.hyper = {name: _per_trial(value, trials, name) for name, value in hyper.items()}

    def set_trial(self, trial: int, **values: float) -> None:
        """Change one trial's hyper-parameters (e.g. lr=0 to freeze a pruned trial)."""
        for name, value in values.items():
            self.hyper[name][trial] = float(value)

    def _view(self, name: str, param: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return (self.hyper[name] * scale).to(param.dtype).view(self.trials, *[1] * (param.dim() - 1))


class FusedSGD(_FusedOptimizer):
    """torch.optim.SGD per trial (momentum, dampening 0, no Nesterov)."""

    def __init__(self, params: Iterable, trials: int, lr: float | Sequence[float],
                 momentum: float | Sequence[float] = 0.0, weight_decay: float | Sequence[float] = 0.0):
        super().__init__(params, trials, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):  # noqa: D102 - torch's signature
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad + self._view("weight_decay", p, group["wd_scale"]) * p
                momentum = self._view("momentum", p)
                state = self.state[p]
                if "momentum_buffer" not in state:
                    buf = grad.clone()  # torch's first step: the buffer is the gradient itself
                else:
                    buf = state["momentum_buffer"].mul_(momentum).add_(grad)
                state["momentum_buffer"] = buf
                # torch uses the gradient directly when momentum is 0; buf equals grad then
                p.sub_(self._view("lr", p, group["lr_scale"]) * buf)


class FusedAdam(_FusedOptimizer):
    """torch.optim.Adam per trial (L2 weight decay as in Adam, not AdamW)."""

    def __init__(self, params: Iterable, trials: int, lr: float | Sequence[float],
                 beta1: float | Sequence[float] = 0.9, beta2: float | Sequence[float] = 0.999,
                 eps: float = 1e-8, weight_decay: float | Sequence[float] = 0.0):
        super().__init__(params, trials, {"lr": lr, "beta1": beta1, "beta2": beta2, "weight_decay": weight_decay})
        self.eps = eps

    @torch.no_grad()
    def step(self, closure=None):  # noqa: D102 - torch's signature
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad + self._view("weight_decay", p, group["wd_scale"]) * p
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                beta1, beta2 = self._view("beta1", p), self._view("beta2", p)
                state["exp_avg"].mul_(beta1).add_((1 - beta1) * grad)
                state["exp_avg_sq"].mul_(beta2).add_((1 - beta2) * grad * grad)
                step = state["step"]
                bias1 = 1 - self._view("beta1", p) ** step
                bias2_sqrt = (1 - self._view("beta2", p) ** step).sqrt()
                denom = state["exp_avg_sq"].sqrt() / bias2_sqrt + self.eps
                p.sub_(self._view("lr", p, group["lr_scale"]) / bias1 * state["exp_avg"] / denom)
