"""Model shrinker: trace a PyTorch model with torch.fx, divide its hidden widths by S, and
re-parametrise the narrow copy in muP so that its best hyper-parameters transfer to the
full model.

Why: Hydro tunes on *surrogates* (Hu's thesis, chapter 3; Hydro, OSDI'23, §4.1 "Model
Scaling"). A surrogate is only useful if its optimum sits where the full model's does,
which holds under the Maximal Update Parametrisation (Yang et al., "Tensor Programs V",
Table 8, as the `mup` package implements it). The full model is the *base shape*, so at
width multiplier 1 it trains in standard parametrisation (with the initialisation below),
and the surrogate runs at width multiplier m = 1/S.

Roles (as Hydro's ``hydro/scale/scale.py`` ``scale_model``, but found from the graph
rather than from the node's position):
* input layers (every ``Embedding``; a ``Linear``/``Conv2d`` no parametrised layer feeds)
  scale only their outputs;
* output layers (a ``Linear`` that feeds no parametrised layer) scale only their inputs,
  and become muP readouts: input multiplied by 1/m (``mup.layer.MuReadout``);
* every other ``Linear``/``Conv2d``/``LayerNorm`` scales all its widths;
* initialisation is Hydro's (thesis §3.4.1, ``hydro/scale/init.py``): the readout's
  weight and bias and every bias are zero. With ``torch_init=True`` (ours) they keep
  PyTorch's default draws, the readout's weight and bias and the hidden biases multiplied
  by sqrt(m) (``MuReadout._rescale_parameters``, ``mup.shape.rescale_linear_bias``);
* ``F.scaled_dot_product_attention`` is scaled by sqrt(d_base)/d instead of 1/sqrt(d):
  muP's 1/d rule, anchored so that the base model is unchanged.

We implement these rules rather than calling ``mup`` because mup 1.0 needs the model
rewritten with ``MuReadout`` and pulls in torchvision and seaborn; the rules are short.

What cannot be shrunk is refused with a ``ShrinkError`` that says why: a module type the
shrinker does not know (``nn.MultiheadAttention`` fixes 1/sqrt(d) internally), a free
``nn.Parameter``, weights that do not look like PyTorch's default initialisation (a custom
initialisation, or a trained model, would silently be replaced), widths that S does not
divide or that fall below ``min_width``, and graphs that bake a width in as a constant.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

#: Modules the shrinker knows how to rebuild narrower.
SCALABLE = (nn.Linear, nn.Conv2d, nn.LayerNorm, nn.Embedding)

#: Hydro refuses widths below 2 (``_valid_check(min_limit=2)`` in hydro/scale/scale.py).
DEFAULT_MIN_WIDTH = 2

#: Relative deviation of a weight's standard deviation from PyTorch's default beyond which
#: we call the initialisation custom. Checked only on tensors of >= 256 elements, where the
#: sample std of a default init is within a few percent of its expectation.
INIT_TOLERANCE = 0.25


class ShrinkError(ValueError):
    """The model cannot be shrunk; the message says which layer and why."""


@dataclass(frozen=True)
class LayerRole:
    """How one parametrised layer scales: which of its dimensions are hidden widths."""

    role: str  # "input" | "hidden" | "output"
    in_scales: bool
    out_scales: bool


@dataclass(frozen=True)
class Surrogate:
    """A shrunk, muP-parametrised copy of a model.

    ``width_dims`` maps every parameter name to the number of its dimensions that scale
    with width (muP's "infinite" dimensions: 2 = matrix-like, 1 = vector-like, 0 = fixed);
    ``lr_multipliers`` (shapeshift.tune.mup) turns that into per-parameter learning rates.
    """

    module: fx.GraphModule
    scale: int
    roles: dict[str, LayerRole]
    width_dims: dict[str, int]


def _trace(model: nn.Module) -> fx.GraphModule:
    try:
        return fx.symbolic_trace(model)
    except Exception as exc:  # torch.fx raises many types; all mean "not traceable"
        raise ShrinkError(f"torch.fx cannot trace {type(model).__name__}: {exc}") from exc


def _parametrised_nodes(gm: fx.GraphModule) -> dict[fx.Node, nn.Module]:
    """Every call_module node whose module has parameters, checked to be one we know."""
    modules = dict(gm.named_modules())
    found: dict[fx.Node, nn.Module] = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            attr = gm
            for part in str(node.target).split("."):
                attr = getattr(attr, part)
            if isinstance(attr, nn.Parameter):
                raise ShrinkError(
                    f"free parameter '{node.target}': its width role is unknown; wrap it in nn.Linear/nn.Embedding"
                )
        if node.op != "call_module":
            continue
        module = modules[str(node.target)]
        if not any(True for _ in module.parameters(recurse=True)):
            continue
        if isinstance(module, nn.MultiheadAttention):
            raise ShrinkError(
                f"layer '{node.target}' is nn.MultiheadAttention, which fixes attention at 1/sqrt(d); muP needs 1/d: "
                "write attention with F.scaled_dot_product_attention"
            )
        if not isinstance(module, SCALABLE):
            raise ShrinkError(
                f"layer '{node.target}' is {type(module).__name__}, which the shrinker does not know "
                f"(supported: {', '.join(t.__name__ for t in SCALABLE)})"
            )
        if any(other is module for other in found.values()):
            raise ShrinkError(f"layer '{node.target}' is called twice (tied weights); its width role is ambiguous")
        found[node] = module
    return found


def _roles(gm: fx.GraphModule, layers: dict[fx.Node, nn.Module]) -> dict[fx.Node, LayerRole]:
    """Input layers have no parametrised layer upstream; output layers none downstream."""
    fed: dict[fx.Node, bool] = {}  # does a parametrised layer lie upstream of (or at) this node?
    for node in gm.graph.nodes:
        fed[node] = node in layers or any(fed[arg] for arg in node.all_input_nodes)
    feeds: dict[fx.Node, bool] = {}
    for node in reversed(list(gm.graph.nodes)):
        feeds[node] = any(user in layers or feeds[user] for user in node.users)
    roles: dict[fx.Node, LayerRole] = {}
    for node, module in layers.items():
        upstream = any(fed[arg] for arg in node.all_input_nodes)
        downstream = feeds[node]
        if isinstance(module, nn.Embedding) or (not upstream and isinstance(module, nn.Linear | nn.Conv2d)):
            if not downstream:
                raise ShrinkError(f"layer '{node.target}' is both the input and the output layer: no hidden width")
            roles[node] = LayerRole("input", in_scales=False, out_scales=True)
        elif not downstream:
            if not isinstance(module, nn.Linear):
                raise ShrinkError(f"output layer '{node.target}' is {type(module).__name__}; muP readouts are Linear")
            roles[node] = LayerRole("output", in_scales=True, out_scales=False)
        else:
            roles[node] = LayerRole("hidden", in_scales=True, out_scales=True)
    return roles


def _default_std(module: nn.Module) -> dict[str, float]:
    """Expected std of each parameter under PyTorch's default reset_parameters()."""
    if isinstance(module, nn.Embedding):
        return {"weight": 1.0}
    if isinstance(module, nn.Linear | nn.Conv2d):
        fan_in = module.weight[0].numel()
        return {"weight": 1 / math.sqrt(3 * fan_in), "bias": 1 / math.sqrt(3 * fan_in)}
    return {}


def _check_default_init(name: str, module: nn.Module) -> None:
    if isinstance(module, nn.LayerNorm):
        ok = (module.weight is None or bool(torch.all(module.weight == 1))) and (
            module.bias is None or bool(torch.all(module.bias == 0))
        )
        if not ok:
            raise ShrinkError(f"layer '{name}' (LayerNorm) is not at its default initialisation (ones and zeros)")
        return
    for pname, expected in _default_std(module).items():
        param = getattr(module, pname, None)
        if param is None or param.numel() < 256:
            continue
        std = float(param.detach().float().std())
        if abs(std - expected) > INIT_TOLERANCE * expected:
            raise ShrinkError(
                f"layer '{name}' {pname} has std {std:.4g}, PyTorch's default gives {expected:.4g}: custom "
                "initialisation (or a trained model); the surrogate would be re-initialised differently, so shrink "
                "the model as constructed, or pass allow_custom_init=True"
            )


def _narrow(value: int, scale: int, name: str, what: str, min_width: int) -> int:
    if value % scale:
        raise ShrinkError(f"layer '{name}' {what}={value} is not divisible by the scale {scale}")
    if value // scale < min_width:
        raise ShrinkError(f"layer '{name}' {what}={value} would shrink to {value // scale} < min_width {min_width}")
    return value // scale


def _rebuild(name: str, module: nn.Module, role: LayerRole, scale: int, min_width: int) -> nn.Module:
    """A narrower module of the same type at PyTorch's default initialisation."""
    def w(value: int, what: str, scales: bool) -> int:
        return _narrow(value, scale, name, what, min_width) if scales else value

    if isinstance(module, nn.Linear):
        return nn.Linear(w(module.in_features, "in_features", role.in_scales),
                         w(module.out_features, "out_features", role.out_scales), bias=module.bias is not None)
    if isinstance(module, nn.Conv2d):
        if module.groups != 1:
            raise ShrinkError(f"layer '{name}' is a grouped convolution (groups={module.groups}); not supported")
        return nn.Conv2d(w(module.in_channels, "in_channels", role.in_scales),
                         w(module.out_channels, "out_channels", role.out_scales), module.kernel_size,
                         stride=module.stride, padding=module.padding, dilation=module.dilation,
                         bias=module.bias is not None, padding_mode=module.padding_mode)
    if isinstance(module, nn.Embedding):
        if module.max_norm is not None or module.padding_idx is not None:
            raise ShrinkError(f"layer '{name}' Embedding with max_norm or padding_idx is not supported")
        return nn.Embedding(module.num_embeddings, w(module.embedding_dim, "embedding_dim", True))
    assert isinstance(module, nn.LayerNorm)
    if len(module.normalized_shape) != 1:
        raise ShrinkError(
            f"layer '{name}' LayerNorm over {len(module.normalized_shape)} dims; only the last is supported")
    return nn.LayerNorm(w(module.normalized_shape[0], "normalized_shape", True), eps=module.eps,
                        elementwise_affine=module.elementwise_affine, bias=module.bias is not None)


def mup_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, *, base_head_dim):
    """F.scaled_dot_product_attention with muP's 1/d scale, equal to 1/sqrt(d) at the base width."""
    del scale
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                          is_causal=is_causal, scale=math.sqrt(base_head_dim) / query.shape[-1])


def _set(gm: fx.GraphModule, target: str, module: nn.Module) -> None:
    parent, _, leaf = target.rpartition(".")
    setattr(gm.get_submodule(parent) if parent else gm, leaf, module)


def _width_dims(module: nn.Module, role: LayerRole) -> dict[str, int]:
    if isinstance(module, nn.Embedding | nn.LayerNorm):
        return {pname: 1 for pname, _ in module.named_parameters()}
    dims = {"weight": int(role.in_scales) + int(role.out_scales)}
    if module.bias is not None:
        dims["bias"] = int(role.out_scales)
    return dims


def shrink(model: nn.Module, example_inputs: tuple, scale: int, *, seed: int = 0,
           min_width: int = DEFAULT_MIN_WIDTH, allow_custom_init: bool = False,
           torch_init: bool = False) -> Surrogate:
    """Return the muP surrogate of ``model`` with hidden widths divided by ``scale``.

    Initialisation follows Hydro (thesis §3.4.1; ``reinitialize_model`` in
    hydro/scale/init.py): the output layer's weight and bias and every Linear/Conv2d bias
    start at zero (the ``mup`` package offers the same readout as
    ``MuReadout(readout_zero_init=True)``), so every width starts from the same output.
    ``torch_init=True`` (ours) keeps PyTorch's default draws instead, muP-rescaled.

    ``example_inputs`` (a tuple of tensors the model accepts) are run through both graphs:
    they give the base attention head width and prove that the narrow graph computes.
    Raises ShrinkError with the reason when the model cannot be shrunk.
    """
    if not isinstance(scale, int) or scale < 1:
        raise ShrinkError(f"scale must be a positive integer, got {scale!r}")
    gm = copy.deepcopy(_trace(model))
    layers = _parametrised_nodes(gm)
    roles = _roles(gm, layers)
    if not allow_custom_init:
        for node, module in layers.items():
            _check_default_init(str(node.target), module)
    try:
        ShapeProp(gm).propagate(*example_inputs)
    except Exception as exc:
        raise ShrinkError(f"the model does not run on the example inputs: {exc}") from exc
    m = 1.0 / scale
    torch.manual_seed(seed)
    width_dims: dict[str, int] = {}
    role_by_name: dict[str, LayerRole] = {}
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is F.scaled_dot_product_attention:
            base_head_dim = int(node.args[0].meta["tensor_meta"].shape[-1])
            node.target = mup_attention
            node.kwargs = {**node.kwargs, "base_head_dim": base_head_dim}
        if node not in layers:
            continue
        name, role = str(node.target), roles[node]
        narrow = _rebuild(name, layers[node], role, scale, min_width)
        with torch.no_grad():
            if role.role == "output":
                narrow.weight.mul_(0.0 if not torch_init else math.sqrt(m))
                if narrow.bias is not None:
                    narrow.bias.mul_(0.0 if not torch_init else math.sqrt(m))
            elif isinstance(narrow, nn.Linear | nn.Conv2d) and narrow.bias is not None:
                if not torch_init:
                    narrow.bias.zero_()
                elif role.role == "hidden":
                    narrow.bias.mul_(math.sqrt(m))
        _set(gm, name, narrow)
        if role.role == "output" and scale != 1:
            with gm.graph.inserting_before(node):
                scaled = gm.graph.call_function(torch.mul, (node.args[0], float(scale)))
            node.update_arg(0, scaled)
        role_by_name[name] = role
        for pname, dims in _width_dims(narrow, role).items():
            width_dims[f"{name}.{pname}"] = dims
    gm.recompile()
    try:
        ShapeProp(copy.deepcopy(gm)).propagate(*example_inputs)
    except Exception as exc:
        raise ShrinkError(
            f"the shrunk graph does not run ({exc}); a width may be baked in as a constant "
            "(use x.size(-1) rather than a number in view/reshape)"
        ) from exc
    return Surrogate(module=gm, scale=scale, roles=role_by_name, width_dims=width_dims)
