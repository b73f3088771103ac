"""The shrinker's widths, muP factors and refusals, derived by hand from the rules in
shapeshift/tune/shrink.py and mup.py (Tensor Programs V Table 8, mup's MuReadout/MuAdam/MuSGD)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from shapeshift.tune.models import TinyLM, TinyMLP
from shapeshift.tune.mup import lr_multipliers, weight_decay_multipliers
from shapeshift.tune.shrink import ShrinkError, shrink

MLP_INPUT = (torch.zeros(3, 8),)


def test_mlp_widths_roles_and_readout():
    # TinyMLP 8 -> 32 -> 32 -> 4 at S=4: input layer keeps 8 inputs, hidden 32x32 -> 8x8,
    # output keeps 4 outputs; its input is multiplied by S = 1/m = 4.
    sur = shrink(TinyMLP(), MLP_INPUT, 4)
    gm = sur.module
    assert (gm.inp.in_features, gm.inp.out_features) == (8, 8)
    assert (gm.hidden.in_features, gm.hidden.out_features) == (8, 8)
    assert (gm.out.in_features, gm.out.out_features) == (8, 4)
    assert {n: r.role for n, r in sur.roles.items()} == {"inp": "input", "hidden": "hidden", "out": "output"}
    muls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.mul]
    assert len(muls) == 1 and muls[0].args[1] == 4.0
    assert sur.module(torch.randn(5, 8)).shape == (5, 4)


def test_mup_init_rescaling():
    # torch_init=True (ours): weight ~ U(+-1/sqrt(fan_in)) => std 1/sqrt(3*fan_in). The readout is
    # multiplied by sqrt(m) = 1/2 at S=4, so its weight std is 1/sqrt(3*8)/2; a hidden bias
    # U(+-1/sqrt(8)) * 1/2 stays within +-1/sqrt(32) (the base model's bound).
    torch.manual_seed(0)
    sur = shrink(TinyMLP(inputs=8, width=1024, outputs=256), MLP_INPUT, 4, torch_init=True)
    out_std = float(sur.module.out.weight.detach().std())
    assert out_std == pytest.approx(1 / math.sqrt(3 * 256) / 2, rel=0.05)
    assert float(sur.module.hidden.bias.detach().abs().max()) <= 1 / math.sqrt(1024) + 1e-7


def test_lr_multipliers_adam_and_sgd():
    # m = 1/4. Adam: matrix-like (hidden weight) lr x 4, the rest x 1.
    # SGD: vector-like (input weight, biases of width-sized outputs, readout weight) lr x 1/4,
    # the readout bias (no width dimension) and the square hidden weight x 1.
    sur = shrink(TinyMLP(), MLP_INPUT, 4)
    adam = lr_multipliers(sur, "adam")
    assert adam["hidden.weight"] == 4.0
    assert adam["inp.weight"] == adam["out.weight"] == adam["hidden.bias"] == 1.0
    sgd = lr_multipliers(sur, "sgd")
    assert sgd["inp.weight"] == sgd["out.weight"] == sgd["hidden.bias"] == 0.25
    assert sgd["hidden.weight"] == sgd["out.bias"] == 1.0
    assert weight_decay_multipliers(sur, "adam")["hidden.weight"] == 0.25


def test_attention_scale_is_one_over_d_anchored_at_base():
    # Base head width 64/4 = 16; at S=4 the head width is 4, so the scale is sqrt(16)/4 = 1
    # (1/d rule), where standard attention would use 1/sqrt(4) = 0.5.
    sur = shrink(TinyLM(width=64, context=16), (torch.zeros(1, 8, dtype=torch.long),), 4)
    nodes = [n for n in sur.module.graph.nodes if n.op == "call_function" and n.kwargs.get("base_head_dim")]
    assert len(nodes) == 2 and all(n.kwargs["base_head_dim"] == 16 for n in nodes)
    assert sur.module.tokens.embedding_dim == 16 and sur.module.head.in_features == 16
    assert sur.module(torch.zeros(2, 8, dtype=torch.long)).shape == (2, 8, 96)


def test_scale_one_is_the_model_itself():
    torch.manual_seed(3)
    model = TinyMLP()
    sur = shrink(model, MLP_INPUT, 1)
    assert all(v == 1.0 for v in lr_multipliers(sur, "adam").values())
    assert sur.module.hidden.weight.shape == model.hidden.weight.shape


class Custom(TinyMLP):
    def __init__(self):
        super().__init__(width=64)
        nn.init.normal_(self.hidden.weight, std=1.0)


class WithMHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.att = nn.MultiheadAttention(16, 2)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        h = self.inp(x)
        return self.out(self.att(h, h, h)[0])


class FreeParam(TinyMLP):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(32))

    def forward(self, x):
        return self.out(torch.relu(self.hidden(torch.relu(self.inp(x)))) * self.gain)


@pytest.mark.parametrize(
    ("model", "scale", "reason"),
    [
        (Custom(), 4, "custom initialisation"),
        (TinyMLP(width=32), 32, "min_width"),  # 32/32 = 1 < 2
        (TinyMLP(width=30), 4, "not divisible"),
        (WithMHA(), 2, "MultiheadAttention"),
        (FreeParam(), 2, "free parameter 'gain'"),
        (nn.Sequential(nn.Linear(8, 4)), 2, "no hidden width"),
    ],
)
def test_refusals_name_the_reason(model, scale, reason):
    with pytest.raises(ShrinkError, match=reason):
        shrink(model, MLP_INPUT, scale)


def test_custom_init_can_be_accepted():
    assert shrink(Custom(), MLP_INPUT, 4, allow_custom_init=True).module.hidden.in_features == 16
