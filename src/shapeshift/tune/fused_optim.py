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
    """Shared bookkeeping: per-trial hyper-parameter tensors and their broadcast views.

    The views (a ``[F, 1, ...]`` tensor per hyper-parameter, group scale and parameter
    rank) are cached: recomputing them for every parameter at every step costs more than
    the update itself on small surrogates. ``set_trial`` clears the cache.
    """

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
        self._views: dict[tuple, torch.Tensor] = {}

    def set_trial(self, trial: int, **values: float) -> None:
        """Change one trial's hyper-parameters (e.g. lr=0 to freeze a pruned trial)."""
        for name, value in values.items():
            self.hyper[name][trial] = float(value)
        self._views.clear()

    def _view(self, name: str, param: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        key = (name, scale, param.dim(), param.dtype, param.device)
        view = self._views.get(key)
        if view is None:
            view = (self.hyper[name] * scale).to(param.dtype).to(param.device)
            view = self._views[key] = view.view(self.trials, *[1] * (param.dim() - 1))
        return view

    def _any(self, name: str) -> bool:
        return bool(torch.any(self.hyper[name] != 0))


class FusedSGD(_FusedOptimizer):
    """torch.optim.SGD per trial (momentum, dampening 0, no Nesterov)."""

    def __init__(self, params: Iterable, trials: int, lr: float | Sequence[float],
                 momentum: float | Sequence[float] = 0.0, weight_decay: float | Sequence[float] = 0.0):
        super().__init__(params, trials, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        decay, momentum_on = self._any("weight_decay"), self._any("momentum")
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad + self._view("weight_decay", p, group["wd_scale"]) * p if decay else p.grad
                if momentum_on:
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        buf = grad.clone()  # torch's first step: the buffer is the gradient itself
                    else:
                        buf = state["momentum_buffer"].mul_(self._view("momentum", p)).add_(grad)
                    state["momentum_buffer"] = buf
                    grad = buf
                p.sub_(self._view("lr", p, group["lr_scale"]) * grad)


class FusedAdam(_FusedOptimizer):
    """torch.optim.Adam per trial (L2 weight decay as in Adam, not AdamW)."""

    def __init__(self, params: Iterable, trials: int, lr: float | Sequence[float],
                 beta1: float | Sequence[float] = 0.9, beta2: float | Sequence[float] = 0.999,
                 eps: float = 1e-8, weight_decay: float | Sequence[float] = 0.0):
        super().__init__(params, trials, {"lr": lr, "beta1": beta1, "beta2": beta2, "weight_decay": weight_decay})
        self.eps = eps
        self.steps = 0

    @torch.no_grad()
    def step(self, closure=None):
        self.steps += 1
        # per-step factors, shared by every parameter: 1/(1-beta1^t) and 1/sqrt(1-beta2^t)
        self.hyper["_bias1"] = 1 / (1 - self.hyper["beta1"] ** self.steps)
        self.hyper["_bias2"] = 1 / (1 - self.hyper["beta2"] ** self.steps).sqrt()
        self.hyper["_one_minus_beta1"] = 1 - self.hyper["beta1"]
        self.hyper["_one_minus_beta2"] = 1 - self.hyper["beta2"]
        for key in [k for k in self._views if k[0] in ("_bias1", "_bias2", "_lr_bias1")]:
            del self._views[key]
        self.hyper["_lr_bias1"] = self.hyper["lr"] * self.hyper["_bias1"]
        decay = self._any("weight_decay")
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad + self._view("weight_decay", p, group["wd_scale"]) * p if decay else p.grad
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, self._view("_one_minus_beta1", p))
                exp_avg_sq.mul_(self._view("beta2", p)).add_(grad * grad * self._view("_one_minus_beta2", p))
                denom = (exp_avg_sq.sqrt() * self._view("_bias2", p)).add_(self.eps)
                p.sub_(self._view("_lr_bias1", p, group["lr_scale"]) * exp_avg / denom)
