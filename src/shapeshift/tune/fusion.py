"""Trial fusion: F models of one architecture become one ``FusedModel``; de-fusion gives
one trial's weights back.

Why: Hydro's inter-trial fusion (OSDI'23 §4.2; ``hydro/fx/fuse.py`` replaces each
supported module of the traced graph by its fused counterpart) turns F small trials into
one process with F times the work per kernel. We trace with torch.fx in the same way and
swap ``Linear``, ``LayerNorm``, ``Embedding`` and ``Conv2d`` for the layers in
``fuse_ops``; anything else with parameters (``BatchNorm``, which would mix the trials'
batch statistics) is refused with the reason.

Contract: the fused model takes the F trials' batches concatenated on dimension 0
(trial-major, ``fuse_batches``) and returns their outputs the same way; ``trial_losses``
splits a loss per trial. Summing those losses and stepping a fused optimiser
(``fused_optim``) equals stepping F separate models (tests/tune/test_fusion.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import fx, nn

from shapeshift.tune.fuse_ops import FusedConv2d, FusedEmbedding, FusedLayerNorm, FusedLinear, FusionContext


class FusionError(ValueError):
    """The models cannot be fused; the message says which layer and why."""


class FusedModel(nn.Module):
    """F trials in one graph; parameters carry a leading trial dimension."""

    def __init__(self, graph: fx.GraphModule, trials: int, context: FusionContext):
        super().__init__()
        self.graph_module = graph
        self.trials = trials
        self.context = context

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        batch = inputs[0].shape[0]
        if batch % self.trials:
            raise ValueError(f"fused batch of {batch} is not a multiple of {self.trials} trials")
        self.context.batch_per_trial = batch // self.trials
        return self.graph_module(*inputs)


def _trace(model: nn.Module) -> fx.GraphModule:
    if isinstance(model, fx.GraphModule):
        return model
    try:
        return fx.symbolic_trace(model)
    except Exception as exc:
        raise FusionError(f"torch.fx cannot trace {type(model).__name__}: {exc}") from exc


def fuse(models: Sequence[nn.Module]) -> FusedModel:
    """Fuse ``models`` (same architecture, different weights) into one model of F trials."""
    if not models:
        raise FusionError("nothing to fuse")
    graphs = [_trace(m) for m in models]
    template = graphs[0]
    shapes = [{n: tuple(p.shape) for n, p in g.named_parameters()} for g in graphs]
    if any(s != shapes[0] for s in shapes[1:]):
        raise FusionError("the models differ in their parameters' names or shapes; only one architecture fuses")
    context = FusionContext()
    fused_graph = fx.GraphModule(template, copy.deepcopy(template.graph))  # its own module tree
    per_model = [dict(g.named_modules()) for g in graphs]
    for node in template.graph.nodes:
        if node.op != "call_module":
            continue
        target = str(node.target)
        layers = [modules[target] for modules in per_model]
        first = layers[0]
        if not any(True for _ in first.parameters()):
            continue
        if isinstance(first, nn.Linear):
            fused: nn.Module = FusedLinear(layers)
        elif isinstance(first, nn.LayerNorm):
            if len(first.normalized_shape) != 1:
                raise FusionError(f"layer '{target}': LayerNorm over more than the last dimension is not fused")
            fused = FusedLayerNorm(layers)
        elif isinstance(first, nn.Embedding):
            if first.padding_idx is not None or first.max_norm is not None:
                raise FusionError(f"layer '{target}': Embedding with padding_idx or max_norm is not fused")
            fused = FusedEmbedding(layers, context)
        elif isinstance(first, nn.Conv2d):
            try:
                fused = FusedConv2d(layers)
            except ValueError as exc:
                raise FusionError(f"layer '{target}': {exc}") from exc
        else:
            raise FusionError(
                f"layer '{target}' is {type(first).__name__}, which fusion does not support "
                "(Linear, LayerNorm, Embedding, Conv2d)"
            )
        parent, _, leaf = target.rpartition(".")
        setattr(fused_graph.get_submodule(parent) if parent else fused_graph, leaf, fused)
    for name, _ in fused_graph.named_parameters():
        owner = fused_graph.get_submodule(name.rpartition(".")[0])
        if not isinstance(owner, FusedLinear | FusedLayerNorm | FusedEmbedding | FusedConv2d):
            raise FusionError(f"parameter '{name}' belongs to no fusable layer")
    return FusedModel(fused_graph, len(models), context)


def defuse(fused: FusedModel, trial: int) -> dict[str, torch.Tensor]:
    """The state dict of trial ``trial`` in the original models' parameter names."""
    if not 0 <= trial < fused.trials:
        raise IndexError(f"trial {trial} out of range 0..{fused.trials - 1}")
    return {name: tensor[trial].detach().clone() for name, tensor in fused.graph_module.state_dict().items()}


def fuse_batches(batches: Sequence[torch.Tensor]) -> torch.Tensor:
    """The fused model's input: the trials' batches concatenated, trial-major."""
    return torch.cat(list(batches), dim=0)


def trial_losses(output: torch.Tensor, target: torch.Tensor, trials: int,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """One loss per trial, shape ``[F]``: ``loss_fn`` applied to each trial's slice.

    Sum it before ``backward()``: each trial's parameters then receive exactly the
    gradient of that trial's own (mean) loss.
    """
    outs = output.reshape(trials, -1, *output.shape[1:])
    targets = target.reshape(trials, -1, *target.shape[1:])
    return torch.stack([loss_fn(outs[i], targets[i]) for i in range(trials)])
