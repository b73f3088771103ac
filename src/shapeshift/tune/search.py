"""The tuning loop: optuna proposes, surrogates train fused, the target transfers eagerly.

Why each piece (Hydro, OSDI'23 §3 and §4; Hu's thesis ch. 3):
* search is optuna's (its samplers and pruners), not ours: the study asks for as many
  trials as one round of fused groups holds and is told every trial's validation loss;
* trials train on the muP surrogate (``shrink``), fused ``F`` at a time (``fuse``, with F
  from the planner), grouped by batch size and spread over ``slots``;
* eager transfer (``TuneConfig.eager_transfer`` in hydro/tune/tune_config.py, default
  0.5): once that fraction of the surrogate trials has finished, the best configuration
  so far starts on the full model as the *target trial*; when a better configuration
  appears later, the target restarts with it. The target occupies a slot of its own and
  advances one step for every step a surrogate group takes (a lock-step model of two
  slots, which keeps the run deterministic); after the search it runs to completion.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import optuna
import torch

from shapeshift.tune.models import MODELS, TuneModel
from shapeshift.tune.mup import lr_multipliers, weight_decay_multipliers
from shapeshift.tune.planner import plan_groups
from shapeshift.tune.shrink import shrink
from shapeshift.tune.space import SearchSpace
from shapeshift.tune.trainer import FusedRun


@dataclass(frozen=True)
class TuneSpec:
    """One tuning job: what to tune, on which surrogate, fused how far."""

    model: str
    space: SearchSpace
    trials: int
    scale: int
    fusion: int  # trials per fused group (the planner's F, or the user's)
    slots: int = 1
    #: Ours, off: keep PyTorch's default init of the readout and biases (Hydro zeroes them).
    torch_init: bool = False


@dataclass(frozen=True)
class TrialRow:
    trial: int
    group: int
    slot: int
    params: dict[str, float]
    surrogate_metric: float
    state: str  # complete | pruned
    target_metric: float | None = None


@dataclass(frozen=True)
class TuneResult:
    rows: tuple[TrialRow, ...]
    best_params: dict[str, float]
    target_metric: float
    target_restarts: int
    target_steps_wasted: int
    surrogate_seconds: float
    target_seconds: float
    surrogate_flops: float
    target_flops: float
    fusion: int
    groups: int
    notes: tuple[str, ...] = field(default=())


def _sampler(space: SearchSpace) -> optuna.samplers.BaseSampler:
    if space.sampler in ("grid", "random"):
        return optuna.samplers.RandomSampler(seed=space.seed)
    return optuna.samplers.TPESampler(seed=space.seed)


def _pruner(space: SearchSpace) -> optuna.pruners.BasePruner:
    return {"none": optuna.pruners.NopPruner(), "median": optuna.pruners.MedianPruner(),
            "asha": optuna.pruners.SuccessiveHalvingPruner()}[space.pruner]


def _suggest(trial: optuna.Trial, space: SearchSpace) -> dict[str, float]:
    params: dict[str, float] = {}
    for p in space.params:
        if p.kind in ("grid", "choice"):
            params[p.name] = trial.suggest_categorical(p.name, list(p.values))
        else:
            params[p.name] = trial.suggest_float(p.name, p.low, p.high, log=p.kind == "loguniform")
    return params


class _Target:
    """The eager-transfer target trial on the full model."""

    def __init__(self, spec: TuneSpec, model: TuneModel, data, full: torch.nn.Module):
        self.spec, self.model, self.data, self.full = spec, model, data, full
        self.run: FusedRun | None = None
        self.params: dict[str, float] | None = None
        self.trial: int | None = None
        self.restarts = 0
        self.wasted = 0
        self.steps_total = 0
        self.seconds = 0.0

    def start(self, trial: int, params: dict[str, float]) -> None:
        if self.run is not None:
            self.restarts += 1
            self.wasted += self.run.steps_done
        space = self.spec.space
        self.run = FusedRun(self.full, [params], optimizer=space.optimizer, data=self.data, loss=self.model.loss,
                            batch_size=int(params.get("batch_size", space.batch_size)), seed=space.seed)
        self.params, self.trial = dict(params), trial

    def advance(self, steps: int) -> None:
        if self.run is None:
            return
        steps = min(steps, self.goal - self.run.steps_done)
        begin = time.perf_counter()
        self.run.step(steps)
        self.seconds += time.perf_counter() - begin
        self.steps_total += steps

    @property
    def goal(self) -> int:
        return self.spec.space.target_steps or self.spec.space.steps


def run_tuning(spec: TuneSpec, progress: Callable[[int, int], None] | None = None) -> TuneResult:
    """Tune ``spec.model`` on its width-/``scale`` surrogate; see the module docstring."""
    space = spec.space
    model = MODELS[spec.model]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    torch.manual_seed(space.seed)
    full = model.build()
    surrogate = shrink(full, model.example_inputs(), spec.scale, seed=space.seed, torch_init=spec.torch_init)
    if not spec.torch_init:
        # The target starts as Hydro starts every prepared model, full or scaled
        # (``reinitialize_model`` in hydro/train/utils.py): zero readout and biases.
        full = shrink(full, model.example_inputs(), 1, seed=space.seed).module
    lr_mult = lr_multipliers(surrogate, space.optimizer)
    wd_mult = weight_decay_multipliers(surrogate, space.optimizer)
    data = model.data()
    study = optuna.create_study(direction="minimize", sampler=_sampler(space), pruner=_pruner(space))
    if space.sampler == "grid":
        # optuna's GridSampler stops the study from inside tell(), which ask-and-tell refuses;
        # enqueuing the grid points (in order, cycled) is optuna's way to fix trial parameters.
        grid = space.grid() or {}
        points = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
        for index in range(spec.trials):
            study.enqueue_trial(points[index % len(points)])
    target = _Target(spec, model, data, full)
    rows: list[TrialRow] = []
    flops = 0.0
    seconds = 0.0
    group_index = 0
    transfer_at = math.ceil(space.eager_transfer * spec.trials)
    while len(rows) < spec.trials:
        wave = min(spec.trials - len(rows), spec.fusion * spec.slots)
        asked = [study.ask() for _ in range(wave)]
        params = {t.number: _suggest(t, space) for t in asked}
        by_number = {t.number: t for t in asked}
        batch_sizes = {n: int(p.get("batch_size", space.batch_size)) for n, p in params.items()}
        for group in plan_groups(batch_sizes, spec.fusion, spec.slots):
            run = FusedRun(surrogate.module, [params[n] for n in group.trials], optimizer=space.optimizer,
                           data=data, loss=model.loss, batch_size=group.batch_size, seed=space.seed,
                           lr_mult=lr_mult, wd_mult=wd_mult)
            pruned: set[int] = set()
            checkpoints = 4 if space.pruner != "none" else 1
            begin = time.perf_counter()
            for part in range(1, checkpoints + 1):
                run.step(space.steps * part // checkpoints - run.steps_done)
                if part < checkpoints:
                    for i, number in enumerate(group.trials):
                        if number in pruned:
                            continue
                        value = run.evaluate(space.eval_batches)[i]
                        by_number[number].report(value, run.steps_done)
                        if by_number[number].should_prune():
                            pruned.add(number)
                            run.freeze(i)
            metrics = run.evaluate(space.eval_batches)
            seconds += time.perf_counter() - begin
            flops += 6.0 * run.params * run.tokens_per_step() * space.steps * len(group.trials)
            for i, number in enumerate(group.trials):
                state = "pruned" if number in pruned else "complete"
                if state == "pruned":
                    study.tell(number, state=optuna.trial.TrialState.PRUNED)
                else:
                    study.tell(number, metrics[i])
                rows.append(TrialRow(number, group_index, group.slot, params[number], metrics[i], state))
            group_index += 1
            target.advance(space.steps)
            done = sum(1 for r in rows if r.state == "complete")
            if len(rows) >= transfer_at and done and target.trial != study.best_trial.number:
                target.start(study.best_trial.number, study.best_trial.params)
            if progress:
                progress(len(rows), spec.trials)
    if not any(r.state == "complete" for r in rows):
        raise ValueError("every trial was pruned; nothing to transfer")
    if target.run is None or target.trial != study.best_trial.number:
        target.start(study.best_trial.number, study.best_trial.params)
    target.advance(target.goal)
    target_metric = target.run.evaluate(space.eval_batches)[0]
    rows = [TrialRow(**{**r.__dict__, "target_metric": target_metric}) if r.trial == target.trial else r
            for r in rows]
    target_flops = 6.0 * target.run.params * target.run.tokens_per_step() * target.steps_total
    return TuneResult(tuple(sorted(rows, key=lambda r: r.trial)), dict(study.best_trial.params), target_metric,
                      target.restarts, target.wasted, seconds, target.seconds, flops, target_flops, spec.fusion,
                      group_index)


#: Device memory the planner fits trials into when none is given: 16 GiB, a V100-16GB
#: (the smallest GPU of Hydro's evaluation). On a CPU this is an assumption, not a measurement.
DEFAULT_DEVICE_MEMORY = 16 * 2**30


def auto_fusion(model_name: str, space: SearchSpace, scale: int, trials: int,
                capacity: float = DEFAULT_DEVICE_MEMORY, *, torch_init: bool = False) -> int:
    """Hydro's planner: measure one fused step of the surrogate at F=1 and F=2 (largest
    batch size searched) and take the largest F that fits ``capacity``, at most ``trials``."""
    from shapeshift.tune.planner import max_fusion, step_memory_bytes

    model = MODELS[model_name]
    torch.manual_seed(space.seed)
    surrogate = shrink(model.build(), model.example_inputs(), scale, seed=space.seed, torch_init=torch_init)
    batch = max([space.batch_size, *[int(v) for p in space.params if p.name == "batch_size" for v in p.values]])
    data = model.data()
    states = 1 if space.optimizer == "sgd" else 2
    memory = []
    for fused in (1, 2):
        run = FusedRun(surrogate.module, [{"lr": 0.0}] * fused, optimizer=space.optimizer, data=data,
                       loss=model.loss, batch_size=batch, seed=space.seed)
        x, y = data.batch(torch.Generator().manual_seed(0), batch)
        memory.append(step_memory_bytes(
            run.model, (x.repeat(fused, *[1] * (x.dim() - 1)),),
            lambda out, y=y, f=fused: model.loss(out, y.repeat(f, *[1] * (y.dim() - 1))), states))
    return min(trials, max_fusion(memory[0], memory[1], capacity))
