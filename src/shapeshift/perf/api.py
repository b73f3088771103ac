"""The small, stable question the scheduler asks: how fast, and does it fit?

``PerfModel`` holds fitted coefficients per model name (unfitted models fall back to the
documented defaults, flagged in the answer) and answers for (model, global batch, plan,
placement as GPUs per node, CPUs, node type).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from shapeshift.model import ExecutionPlan, NodeSpec
from shapeshift.perf.arch import get_arch
from shapeshift.perf.fitting import FittedModel
from shapeshift.perf.memory import MemoryEstimate, estimate_memory
from shapeshift.perf.rubick import A800_NODE, Config, RubickParams, iteration_time


@dataclass(frozen=True, slots=True)
class Prediction:
    iter_time: float  # seconds per iteration
    throughput: float  # samples per second at the global batch
    memory: MemoryEstimate
    fitted: bool  # False when default coefficients were used

    @property
    def feasible(self) -> bool:
        return self.memory.feasible


class PerfModel:
    """Iteration time and memory feasibility for any known model."""

    def __init__(self, fitted: Mapping[str, FittedModel] | None = None) -> None:
        self._fitted = dict(fitted or {})

    @classmethod
    def load(cls, paths: list[str | Path]) -> PerfModel:
        models = [FittedModel.load(p) for p in paths]
        return cls({m.model: m for m in models})

    def add(self, model: FittedModel) -> None:
        self._fitted[model.model] = model

    def predict(
        self,
        model: str,
        global_batch: int,
        plan: ExecutionPlan,
        placement: tuple[int, ...],
        cpus: float = 4.0,
        node: NodeSpec = A800_NODE,
    ) -> Prediction:
        fitted = self._fitted.get(model)
        arch = (fitted.arch if fitted else get_arch(model)).with_batch(global_batch)
        params = fitted.params if fitted else RubickParams()
        options = fitted.options if fitted else replace(FittedModel(arch, params).options)
        t = iteration_time(params, Config(arch, plan, tuple(placement), cpus, node), options)
        mem = estimate_memory(arch, plan, tuple(placement), node)
        return Prediction(t, global_batch / t, mem, fitted is not None)
