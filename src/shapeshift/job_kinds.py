"""What kind of training a job is, beyond its resources: an adaptive batch size (goodput
policies, Pollux/Sia) or a fused-trial tuning job (Hydro). Frozen, self-validating, and
re-exported by ``shapeshift.model``; imports nothing from the rest of the package.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from shapeshift.invariants import _require


@dataclass(frozen=True, slots=True)
class BatchSpec:
    """A job's global batch size and, for adaptive jobs, the range it may be scaled in.

    ``size`` is the batch the user asked for (what a fixed-batch job always runs at);
    ``initial`` is the batch progress is counted at (Pollux, OSDI'21 §3.1: efficiency is
    relative to the initial batch ``m0``); ``max_size`` caps the global batch and
    ``min_local``/``max_local`` the per-GPU batch (above ``max_local`` the job accumulates
    gradients). ``adaptive``: a goodput policy picks the batch per allocation; a fixed
    batch is the workload's rule, which a policy following a source that tunes it anyway
    may override (``Allocation.batch_size``; Sia tunes NCF's).
    """

    size: int
    initial: int = 0
    max_size: int = 0
    min_local: int = 1
    max_local: int = 0
    adaptive: bool = False

    def __post_init__(self) -> None:
        for name, value in (("size", self.size), ("min_local", self.min_local)):
            _require(isinstance(value, int) and value >= 1, f"batch {name} must be an integer >= 1, got {value!r}")
        object.__setattr__(self, "initial", self.initial or self.size)
        object.__setattr__(self, "max_size", self.max_size or max(self.size, self.initial))
        object.__setattr__(self, "max_local", self.max_local or self.max_size)
        _require(self.initial <= self.max_size, f"batch initial {self.initial} exceeds max_size {self.max_size}")
        _require(self.size <= self.max_size, f"batch size {self.size} exceeds max_size {self.max_size}")
        _require(self.min_local <= self.max_local, "batch min_local exceeds max_local")

    def __str__(self) -> str:
        head = f"size={self.size},initial={self.initial},max={self.max_size},min_local={self.min_local}"
        return f"{head},max_local={self.max_local},adaptive={int(self.adaptive)}"

    @classmethod
    def parse(cls, text: str) -> BatchSpec:
        """Parse ``size=2048,initial=128,max=4096,min_local=32,max_local=512,adaptive=1``."""
        keys = {"size": "size", "initial": "initial", "max": "max_size", "min_local": "min_local"}
        keys.update(max_local="max_local", adaptive="adaptive")
        values: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, raw = (x.strip() for x in part.partition("="))
            _require(bool(sep) and key in keys, f"bad batch item {part!r}; expected key=value with keys {sorted(keys)}")
            _require(raw.isdigit(), f"batch {key} must be a non-negative integer, got {raw!r}")
            values[keys[key]] = bool(int(raw)) if key == "adaptive" else int(raw)
        _require("size" in values, "a batch needs size=N")
        return cls(**values)


@dataclass(frozen=True, slots=True)
class FusedTrials:
    """Fused-trial tuning job (``shapeshift.tune.squeeze``): trial_rate = one trial's steps/s on a GPU."""
    trials: int
    fused: int
    steps: int
    trial_rate: float

    def __post_init__(self) -> None:
        ok = min(self.trials, self.fused, self.steps) >= 1 and math.isfinite(self.trial_rate) and self.trial_rate > 0
        _require(ok, "tuning needs trials, fused and steps >= 1 and a finite trial_rate > 0")

    @property
    def duration(self) -> float:
        return math.ceil(self.trials / self.fused) * self.steps / self.trial_rate
