"""Parameters every plan-aware policy accepts (where its knowledge comes from)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shapeshift.policies.framework.registry import PolicyParams
from shapeshift.policies.planaware.knowledge import Knowledge


class PlanAwareParams(PolicyParams):
    """``traces``: directory of ``<model>/placements.csv`` profiling rows or a bundled data set
    (default ``$SHAPESHIFT_RUBICK_TRACES`` or the bundled ``rubick-a800-tables``); the policy fits on
    ``sample`` 7 of them per model (planner's choice or seeded random rows) and refits
    online when its recent relative error exceeds ``refit_threshold``."""

    traces: str | None = None
    sample: Literal["planner", "random"] = "planner"
    seed: int = 0
    refit_threshold: float = Field(0.15, gt=0)
    restore_penalty: float = Field(78.0, ge=0)

    def knowledge(self) -> Knowledge:
        return Knowledge(self.traces, self.sample, self.seed, self.refit_threshold)
