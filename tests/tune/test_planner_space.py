"""Planner arithmetic (Hydro's affine memory rule) and search-space errors with key paths."""

from __future__ import annotations

import pytest
import torch

from shapeshift.errors import InputError
from shapeshift.tune.fusion import fuse
from shapeshift.tune.models import TinyMLP
from shapeshift.tune.planner import PlanError, max_fusion, plan_groups, step_memory_bytes
from shapeshift.tune.space import parse_space


def test_max_fusion_is_the_affine_rule():
    # m1 = 10, m2 = 13 -> 3 per extra trial; capacity 40: 10 + (F-1)*3 <= 40 -> F = 11
    assert max_fusion(10, 13, 40) == 11
    assert max_fusion(10, 13, 10) == 1
    with pytest.raises(PlanError, match="more than the device"):
        max_fusion(50, 60, 40)
    with pytest.raises(PlanError, match="did not grow"):
        max_fusion(10, 10, 40)


def test_groups_by_batch_size_balanced_and_spread():
    # 5 trials of batch 16 with limit 2 -> 3 groups of sizes 2,2,1; 2 trials of batch 32 -> 1 group.
    # LPT by trials x batch: {32:2}=64, {16:2}=32, {16:2}=32, {16:1}=16 over 2 slots:
    # 64 -> slot 0; 32 -> slot 1; 32 -> slot 1 (load 32 < 64); 16 -> slot 0 (64 = 64, lower index).
    sizes = {0: 16, 1: 16, 2: 16, 3: 16, 4: 16, 5: 32, 6: 32}
    groups = plan_groups(sizes, 2, slots=2)
    assert [(g.slot, g.batch_size, g.trials) for g in groups] == [
        (0, 16, (4,)), (0, 32, (5, 6)), (1, 16, (0, 1)), (1, 16, (2, 3))]


def test_cpu_memory_grows_with_fused_trials():
    # parameters, gradients and two Adam states double with F, and so do saved activations
    x = torch.randn(4, 8)
    one = step_memory_bytes(fuse([TinyMLP()]), (x,), lambda out: out.sum())
    two = step_memory_bytes(fuse([TinyMLP(), TinyMLP()]), (torch.cat([x, x]),), lambda out: out.sum())
    params = sum(p.numel() for p in TinyMLP().parameters()) * 4
    assert two - one >= 4 * params  # at least one more set of weights, grads and two states


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("space:\n  lr: {type: loguniform, low: -1, high: 0.1}\n", "space.lr.low"),
        ("space:\n  lr: {type: uniform, low: 0.1, high: 0.01}\n", "space.lr.high"),
        ("space:\n  lr: {type: grid, values: []}\n", "space.lr.values"),
        ("space:\n  lr: {type: grid, values: [0.1, .nan]}\n", "space.lr.values.1"),
        ("space:\n  lrr: {type: grid, values: [0.1]}\n", "space.lrr"),
        ("space:\n  lr: {type: normal, low: 1, high: 2}\n", "space.lr.type"),
        ("optimizer: lion\nspace:\n  lr: {type: grid, values: [0.1]}\n", "optimizer"),
        ("steps: 0\nspace:\n  lr: {type: grid, values: [0.1]}\n", "steps"),
        ("sampler: grid\nspace:\n  lr: {type: uniform, low: 0.1, high: 1}\n", "sampler"),
        ("space:\n  lr: {type: grid, values: [0.1]}\n  momentum: {type: grid, values: [0.9]}\n", "space.momentum"),
        ("space: {}\n", "space"),
    ],
)
def test_bad_space_names_the_key_path(text, field):
    with pytest.raises(InputError) as info:
        parse_space(text, "space.yaml")
    assert info.value.field == field
    assert info.value.line is not None


def test_good_space():
    space = parse_space("optimizer: sgd\nsampler: grid\nspace:\n  lr: {type: grid, values: [0.1, 0.2]}\n"
                        "  momentum: {type: choice, values: [0.0, 0.9]}\n")
    assert space.grid() == {"lr": [0.1, 0.2], "momentum": [0.0, 0.9]}
