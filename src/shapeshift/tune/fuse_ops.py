"""Fused layers: F copies of one layer, each trial with its own weights, in one kernel.

Why: small trials leave a device idle; F of them stacked along a leading "trial"
dimension run as one batched kernel (Hydro, OSDI'23 §4.2 "Inter-trial fusion"; Hydro's
``hydro/fuse_ops/linear.py`` uses ``torch.baddbmm``, ``sparse.py`` offsets embedding
indices per trial, ``conv.py`` uses grouped convolution).

Layout: activations keep the model's own shapes with the trials concatenated on the
batch dimension, trial-major (``[F*B, ...]``). Every per-sample operation of the
original graph (reshapes that read their sizes from the tensor, attention, activations)
then runs unchanged; only parametrised layers look at F and view their input as
``[F, B*..., ...]``. Parameters keep torch's own layout with a leading F dimension, so
de-fusion is ``weight[i]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _stack(modules: list[nn.Module], name: str) -> nn.Parameter | None:
    tensors = [getattr(m, name) for m in modules]
    if tensors[0] is None:
        return None
    return nn.Parameter(torch.stack([t.detach().clone() for t in tensors]))


class FusedLinear(nn.Module):
    """F ``nn.Linear`` layers: ``y_f = x_f W_f^T + b_f`` as one ``baddbmm``."""

    def __init__(self, layers: list[nn.Linear]):
        super().__init__()
        self.trials = len(layers)
        self.weight = _stack(layers, "weight")  # [F, out, in]
        self.bias = _stack(layers, "bias")  # [F, out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(self.trials, -1, shape[-1])
        weight_t = self.weight.transpose(1, 2)
        out = torch.bmm(flat, weight_t) if self.bias is None else torch.baddbmm(self.bias.unsqueeze(1), flat, weight_t)
        return out.reshape(*shape[:-1], out.shape[-1])


class FusedLayerNorm(nn.Module):
    """F ``nn.LayerNorm`` layers over the last dimension, each with its own affine."""

    def __init__(self, layers: list[nn.LayerNorm]):
        super().__init__()
        self.trials = len(layers)
        self.normalized_shape = layers[0].normalized_shape
        self.eps = layers[0].eps
        self.weight = _stack(layers, "weight")
        self.bias = _stack(layers, "bias")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        out = F.layer_norm(x, self.normalized_shape, eps=self.eps).reshape(self.trials, -1, shape[-1])
        if self.weight is not None:
            out = out * self.weight.unsqueeze(1)
        if self.bias is not None:
            out = out + self.bias.unsqueeze(1)
        return out.reshape(shape)


class FusionContext:
    """Per-forward facts the fused layers share: the batch size of one trial.

    Set by ``FusedModel.forward``; only inputs that are not batched (positional indices
    from ``arange``) need it, to broadcast one row block per trial over that trial's
    samples.
    """

    def __init__(self) -> None:
        self.batch_per_trial = 1


class FusedEmbedding(nn.Module):
    """F ``nn.Embedding`` tables: trial f's indices are offset by f * num_embeddings into
    the stacked table, so one lookup serves all trials. A 1-D input (positions shared by
    every sample) is looked up in every trial's table and repeated over that trial's
    samples, which is what broadcasting did in the unfused model."""

    def __init__(self, layers: list[nn.Embedding], context: FusionContext):
        super().__init__()
        self.trials = len(layers)
        self.num_embeddings = layers[0].num_embeddings
        self.weight = _stack(layers, "weight")  # [F, V, d]
        self.context = context

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        table = self.weight.reshape(-1, self.weight.shape[-1])
        offsets = torch.arange(self.trials, device=idx.device) * self.num_embeddings
        if idx.dim() == 1:
            rows = F.embedding(idx.unsqueeze(0) + offsets.unsqueeze(1), table)  # [F, n, d]
            batch = self.context.batch_per_trial
            return rows.unsqueeze(1).expand(self.trials, batch, *rows.shape[1:]).reshape(-1, *rows.shape[1:])
        per_trial = idx.reshape(self.trials, -1) + offsets.unsqueeze(1)
        return F.embedding(per_trial, table).reshape(*idx.shape, -1)


class FusedConv2d(nn.Module):
    """F ``nn.Conv2d`` layers as one grouped convolution over the trials' channels."""

    def __init__(self, layers: list[nn.Conv2d]):
        super().__init__()
        first = layers[0]
        if first.groups != 1 or first.padding_mode != "zeros":
            raise ValueError("fusion supports Conv2d with groups=1 and zero padding")
        self.trials = len(layers)
        self.stride, self.padding, self.dilation = first.stride, first.padding, first.dilation
        self.weight = _stack(layers, "weight")  # [F, out, in, kh, kw]
        self.bias = _stack(layers, "bias")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fb, channels, height, width = x.shape
        batch = fb // self.trials
        grouped = x.reshape(self.trials, batch, channels, height, width).transpose(0, 1)
        grouped = grouped.reshape(batch, self.trials * channels, height, width)
        weight = self.weight.reshape(-1, *self.weight.shape[2:])
        bias = None if self.bias is None else self.bias.reshape(-1)
        out = F.conv2d(grouped, weight, bias, self.stride, self.padding, self.dilation, groups=self.trials)
        out = out.reshape(batch, self.trials, -1, *out.shape[2:]).transpose(0, 1)
        return out.reshape(fb, *out.shape[2:])
