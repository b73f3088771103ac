"""A fused step equals F separate steps (Hydro §4.2's correctness premise), in float64 so
the tolerance is tight; de-fusion returns each trial's own weights."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from shapeshift.tune.fused_optim import FusedAdam, FusedSGD
from shapeshift.tune.fusion import FusionError, defuse, fuse, fuse_batches, trial_losses
from shapeshift.tune.models import TinyLM, lm_loss
from shapeshift.tune.mup import lr_multipliers, param_groups, scaled_groups
from shapeshift.tune.shrink import shrink

TRIALS = 3
LRS = [1e-3, 3e-3, 1e-2]
MOMENTA = [0.0, 0.5, 0.9]


def _surrogates():
    example = (torch.zeros(1, 8, dtype=torch.long),)
    return [shrink(TinyLM(width=32, context=8, layers=1), example, 2, seed=i) for i in range(TRIALS)]


def _run(optimizer: str, steps: int = 3):
    surs = _surrogates()
    mult = lr_multipliers(surs[0], optimizer)
    models = [s.module.double() for s in surs]
    separate = [copy.deepcopy(m) for m in models]
    fused = fuse(models)
    if optimizer == "adam":
        fopt = FusedAdam(param_groups(fused.graph_module, mult), TRIALS, lr=LRS)
        opts = [torch.optim.Adam(scaled_groups(param_groups(m, mult), lr))
                for m, lr in zip(separate, LRS, strict=True)]
    else:
        fopt = FusedSGD(param_groups(fused.graph_module, mult), TRIALS, lr=LRS, momentum=MOMENTA)
        opts = [torch.optim.SGD(scaled_groups(param_groups(m, mult), lr), momentum=mo)
                for m, lr, mo in zip(separate, LRS, MOMENTA, strict=True)]
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        xs = [torch.randint(0, 96, (2, 8), generator=gen) for _ in range(TRIALS)]
        ys = [torch.randint(0, 96, (2, 8), generator=gen) for _ in range(TRIALS)]
        losses = trial_losses(fused(fuse_batches(xs)), fuse_batches(ys), TRIALS, lm_loss)
        fopt.zero_grad()
        losses.sum().backward()
        fopt.step()
        for i, (model, opt) in enumerate(zip(separate, opts, strict=True)):
            opt.zero_grad()
            loss = lm_loss(model(xs[i]), ys[i])
            loss.backward()
            opt.step()
            assert losses[i].item() == pytest.approx(loss.item(), abs=1e-10)
    return fused, separate


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_fused_steps_equal_separate_steps(optimizer):
    fused, separate = _run(optimizer)
    for i, model in enumerate(separate):
        trial = defuse(fused, i)
        for name, ref in model.state_dict().items():
            torch.testing.assert_close(trial[name], ref, rtol=0, atol=1e-10)


def test_fused_conv_matches_separate():
    torch.manual_seed(0)
    convs = [nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3)) for _ in range(2)]
    fused = fuse(convs)
    xs = [torch.randn(2, 3, 6, 6) for _ in range(2)]
    out = fused(fuse_batches(xs))
    for i, conv in enumerate(convs):
        torch.testing.assert_close(out[2 * i:2 * i + 2], conv(xs[i]), rtol=1e-5, atol=1e-5)


def test_batchnorm_is_refused():
    models = [nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)) for _ in range(2)]
    with pytest.raises(FusionError, match="BatchNorm1d"):
        fuse(models)


def test_different_architectures_are_refused():
    with pytest.raises(FusionError, match="one architecture"):
        fuse([nn.Linear(4, 4), nn.Linear(4, 5)])


def test_frozen_trial_does_not_move():
    surs = _surrogates()
    fused = fuse([s.module for s in surs])
    opt = FusedSGD(param_groups(fused.graph_module), TRIALS, lr=LRS)
    opt.set_trial(1, lr=0.0)
    before = defuse(fused, 1)
    x = torch.randint(0, 96, (TRIALS * 2, 8))
    trial_losses(fused(x), x, TRIALS, lm_loss).sum().backward()
    opt.step()
    after = defuse(fused, 1)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not torch.equal(defuse(fused, 0)["head.weight"], surs[0].module.head.weight.detach())
