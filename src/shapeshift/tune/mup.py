"""muP per-parameter learning rates for a surrogate (Tensor Programs V, Table 8).

Why: under muP the learning rate a user tunes is the *base* model's; each surrogate
parameter trains at that rate times a width-dependent multiplier. With the full model as
the base shape, the surrogate's width multiplier is m = 1/S, and the rules are those of
the ``mup`` package's optimisers (``mup/optim.py``):

* Adam / AdamW (``MuAdam``): matrix-like parameters (two width dimensions: hidden
  weights) train at lr / m; everything else at lr. Coupled weight decay is multiplied by
  m for those parameters (decoupled decay, AdamW's, is left alone).
* SGD (``MuSGD``): vector-like parameters (one width dimension: input weights, biases,
  LayerNorm, the readout's weight) train at lr * m, weight decay / m; matrix-like ones at
  lr divided by their fan-in/fan-out multiplier ratio, which is 1 when both widths shrink
  by the same S.

Hydro's own ``hydro/scale/optim.py`` follows the same Adam rule; for SGD it also scales
matrix-like rates by S, which we do not copy (``mup`` is the documented reference).
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from shapeshift.tune.shrink import Surrogate

OPTIMIZERS = ("adam", "adamw", "sgd")


def lr_multipliers(surrogate: Surrogate, optimizer: str) -> dict[str, float]:
    """Learning-rate multiplier per parameter name for ``optimizer`` (adam, adamw, sgd)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    m = 1.0 / surrogate.scale
    out: dict[str, float] = {}
    for name, dims in surrogate.width_dims.items():
        if optimizer in ("adam", "adamw"):
            out[name] = 1 / m if dims == 2 else 1.0
        else:
            out[name] = m if dims == 1 else 1.0
    return out


def weight_decay_multipliers(surrogate: Surrogate, optimizer: str) -> dict[str, float]:
    """Coupled weight-decay multiplier per parameter (AdamW's decoupled decay: all 1)."""
    m = 1.0 / surrogate.scale
    out: dict[str, float] = {}
    for name, dims in surrogate.width_dims.items():
        if optimizer == "adam":
            out[name] = m if dims == 2 else 1.0
        elif optimizer == "sgd":
            out[name] = 1 / m if dims == 1 else 1.0
        else:
            out[name] = 1.0
    return out


def param_groups(module: nn.Module, lr_mult: dict[str, float] | None = None,
                 wd_mult: dict[str, float] | None = None) -> list[dict]:
    """Parameters grouped by (lr multiplier, weight-decay multiplier), in a stable order.

    Each group carries ``lr_scale`` and ``wd_scale``; the fused optimisers (and
    ``scaled_groups`` for plain torch optimisers) multiply the trial's rates by them.
    Parameters not named in the maps (the full model) get 1.
    """
    groups: dict[tuple[float, float], list[nn.Parameter]] = {}
    for name, param in module.named_parameters():
        key = ((lr_mult or {}).get(name, 1.0), (wd_mult or {}).get(name, 1.0))
        groups.setdefault(key, []).append(param)
    return [{"params": params, "lr_scale": lr, "wd_scale": wd} for (lr, wd), params in groups.items()]


def scaled_groups(groups: Iterable[dict], lr: float, weight_decay: float = 0.0) -> list[dict]:
    """Param groups with absolute ``lr``/``weight_decay`` for a plain torch optimiser."""
    return [{"params": g["params"], "lr": lr * g["lr_scale"], "weight_decay": weight_decay * g["wd_scale"]}
            for g in groups]
