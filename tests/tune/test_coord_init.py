"""Hydro's defaults in the shrinker (S = 8, zero readout and biases) and the activation L1
check, with expectations derived by hand from the rules (hydro/tune/tune_config.py
``scaling_num = 8``; hydro/scale/init.py ``reinitialize_model``; hydro/scale/coord_check.py
``l1`` = mean |x|)."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

from shapeshift.tune import DEFAULT_SCALE
from shapeshift.tune.coord import CoordRecord, activation_l1, coord_check, unstable_layers
from shapeshift.tune.models import TinyMLP
from shapeshift.tune.shrink import shrink

MLP_INPUT = (torch.zeros(3, 8),)


def test_default_scale_is_hydros_eight_and_the_cli_uses_it():
    from shapeshift.cli.tune_cmd import run_cmd

    assert DEFAULT_SCALE == 8
    assert inspect.signature(run_cmd).parameters["scale"].default == DEFAULT_SCALE


def test_readout_and_biases_start_at_zero_by_default():
    # Hydro zeroes the output layer's weight and bias and every bias; hidden weights keep
    # their random draw. A zero readout makes the surrogate's output exactly 0 on any input.
    torch.manual_seed(0)
    sur = shrink(TinyMLP(), MLP_INPUT, 4)
    gm = sur.module
    for param in (gm.out.weight, gm.out.bias, gm.inp.bias, gm.hidden.bias):
        assert torch.count_nonzero(param) == 0
    assert torch.count_nonzero(gm.hidden.weight) == gm.hidden.weight.numel()
    assert torch.count_nonzero(gm(torch.randn(5, 8))) == 0


def test_torch_init_keeps_the_default_draws():
    # torch_init=True: PyTorch's default draws, none of them exactly zero.
    torch.manual_seed(0)
    gm = shrink(TinyMLP(), MLP_INPUT, 4, torch_init=True).module
    for param in (gm.out.weight, gm.out.bias, gm.inp.bias, gm.hidden.bias):
        assert torch.count_nonzero(param) == param.numel()


def test_activation_l1_is_mean_absolute_output():
    # Linear 4 -> 2 with every weight 0.5 and bias (0, -4) on the all-ones input:
    # outputs 4*0.5 + 0 = 2 and 2 - 4 = -2, so mean |out| = 2. The LayerNorm of (2, -2)
    # is (1, -1) (mean 0, variance 4, eps 0): mean |out| = 1.
    model = nn.Sequential(nn.Linear(4, 2), nn.LayerNorm(2, eps=0.0))
    with torch.no_grad():
        model[0].weight.fill_(0.5)
        model[0].bias.copy_(torch.tensor([0.0, -4.0]))
    assert activation_l1(model, (torch.ones(1, 4),)) == pytest.approx({"0": 2.0, "1": 1.0})


def test_unstable_layers_by_spread_across_widths():
    # 'a' at step 0: 1.0, 1.5, 1.9 across widths (max/min 1.9 <= 2): stable.
    # 'b' at step 0: 1, 2, 4 (ratio 4 > 2): flagged. 'c' all zero: stable; 'd' zero beside
    # a non-zero value: infinitely spread.
    rows = [CoordRecord(s, 0, layer, v) for layer, values in
            {"a": (1.0, 1.5, 1.9), "b": (1.0, 2.0, 4.0), "c": (0.0, 0.0, 0.0), "d": (0.0, 1.0, 1.0)}.items()
            for s, v in zip((1, 2, 4), values, strict=True)]
    flagged = unstable_layers(rows)
    assert [(layer, step) for layer, step, _ in flagged] == [("b", 0), ("d", 0)]
    assert flagged[0][2] == pytest.approx(4.0)


def test_coord_check_readout_at_step_zero():
    # Hydro's zero readout outputs exactly 0 at step 0 at every width: never flagged there.
    # With PyTorch's draws and muP's readout (input x S, weight x sqrt(1/S)) the readout's
    # output at init has std proportional to S * sqrt(1/S) = sqrt(S) (its fan-in shrinks by S,
    # which the weight's 1/sqrt(fan_in) draw cancels), so S=8 against S=1 is ~2.8x: flagged.
    torch.manual_seed(0)
    x, y = torch.randn(64, 8), torch.randint(0, 4, (64,))
    runs = {}
    for torch_init in (False, True):
        runs[torch_init] = coord_check(TinyMLP(width=256), (x[:2],), lambda step: (x, y),
                                       nn.functional.cross_entropy, scales=(1, 8), steps=1, torch_init=torch_init)
    assert all(r.l1 == 0.0 for r in runs[False] if r.layer == "out" and r.step == 0)
    assert ("out", 0) not in [(layer, step) for layer, step, _ in unstable_layers(runs[False])]
    assert ("out", 0) in [(layer, step) for layer, step, _ in unstable_layers(runs[True])]
