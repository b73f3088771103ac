"""How a training job is parallelised: ``ExecutionPlan`` and its ZeRO modes.

Re-exported by ``shapeshift.model``, where every other domain type lives; kept apart so
that module stays small. Imports only ``shapeshift.invariants``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from shapeshift.invariants import ModelError, _require


class ZeroMode(enum.StrEnum):
    """Which ZeRO stage the data-parallel group uses."""

    NONE = "none"
    DP = "dp"  # ZeRO-2: optimizer states and gradients partitioned over data-parallel ranks
    OFFLOAD = "offload"  # ZeRO-Offload: states and the optimizer step live on the host CPU


_PLAN_KEYS = {"dp", "tp", "pp", "zero", "ga", "gc", "mb"}


@dataclass(frozen=True, slots=True)
class ExecutionPlan:
    """How a training job is parallelised on its GPUs.

    ``dp * tp * pp`` is the number of GPUs. The global batch size is a property of the
    job, not of the plan: a reconfiguration changes the plan but keeps
    ``global batch = dp * micro-batch * grad_accum``.
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: ZeroMode = ZeroMode.NONE
    grad_accum: int = 1
    grad_ckpt: bool = False
    micro_batches: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "zero", ZeroMode(self.zero))
        for name in ("dp", "tp", "pp", "grad_accum", "micro_batches"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ModelError(f"plan {name} must be an integer >= 1, got {value!r}")

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def family(self) -> str:
        """Coarse plan family, the unit in which profiling coverage is counted."""
        if self.tp > 1 or self.pp > 1:
            return "3d"
        if self.zero is ZeroMode.OFFLOAD:
            return "zero-offload"
        if self.zero is ZeroMode.DP:
            return "zero-dp"
        if self.grad_ckpt:
            return "gc"
        return "ga" if self.grad_accum > 1 else "dp"

    def __str__(self) -> str:
        return (
            f"dp={self.dp},tp={self.tp},pp={self.pp},zero={self.zero.value},"
            f"ga={self.grad_accum},gc={int(self.grad_ckpt)},mb={self.micro_batches}"
        )

    @classmethod
    def parse(cls, text: str) -> ExecutionPlan:
        """Parse ``dp=2,tp=4,zero=offload,ga=2,gc=1`` (any subset of keys; the rest default)."""
        values: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, raw = part.partition("=")
            key = key.strip().lower()
            _require(
                bool(sep) and key in _PLAN_KEYS,
                f"bad plan item {part!r}; expected key=value with keys {sorted(_PLAN_KEYS)}",
            )
            raw = raw.strip()
            if key == "zero":
                _require(raw in {z.value for z in ZeroMode}, f"bad zero mode {raw!r}; expected none, dp or offload")
                values["zero"] = ZeroMode(raw)
            elif key == "gc":
                _require(raw in {"0", "1", "true", "false"}, f"bad gc value {raw!r}; expected 0 or 1")
                values["grad_ckpt"] = raw in {"1", "true"}
            else:
                _require(raw.isdigit(), f"plan {key} must be a positive integer, got {raw!r}")
                values[{"ga": "grad_accum", "mb": "micro_batches"}.get(key, key)] = int(raw)
        return cls(**values)

    @classmethod
    def data_parallel(cls, gpus: int) -> ExecutionPlan:
        return cls(dp=gpus)
