"""Costs of starting, stopping and changing jobs.

Every preemption or reconfiguration is a checkpoint-and-restore: the job holds its
GPUs but makes no progress for the restore penalty. Policies that preempt freely
look great in simulators that forget this, so it is on by default (30 s).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


def helios_restore_penalty(gpus: int) -> float:
    """The Helios simulator's checkpoint rule: 7 s for 1 GPU, 30 s up to 8, 60 s above."""
    if gpus <= 1:
        return 7.0
    return 30.0 if gpus <= 8 else 60.0


NAMED_PENALTIES: dict[str, Callable[[int], float]] = {"helios": helios_restore_penalty}


@dataclass(frozen=True)
class Overheads:
    """``launch_delay`` applies to every launch; ``restore_penalty`` (seconds, or a rule by
    GPU count) to every relaunch after a preemption and to every reconfiguration."""

    launch_delay: float = 0.0
    restore_penalty: float | str = 30.0
    #: Pause when only an adaptive job's batch size changes (same GPUs). AdaptDL changes
    #: the batch in place, without a restart (Pollux artifact ``simulator/simulator.py``,
    #: ``Job.step`` re-optimises the batch between epochs at no cost), hence 0.
    rebatch_penalty: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.launch_delay) and self.launch_delay >= 0):
            raise ValueError("launch_delay must be a finite number of seconds >= 0")
        if not (math.isfinite(self.rebatch_penalty) and self.rebatch_penalty >= 0):
            raise ValueError("rebatch_penalty must be a finite number of seconds >= 0")
        if isinstance(self.restore_penalty, str):
            if self.restore_penalty not in NAMED_PENALTIES:
                raise ValueError(
                    f"unknown restore penalty rule {self.restore_penalty!r}; use seconds or one of "
                    f"{', '.join(sorted(NAMED_PENALTIES))}"
                )
        elif not (math.isfinite(self.restore_penalty) and self.restore_penalty >= 0):
            raise ValueError("restore_penalty must be a finite number of seconds >= 0")

    def restore(self, gpus: int) -> float:
        if isinstance(self.restore_penalty, str):
            return NAMED_PENALTIES[self.restore_penalty](gpus)
        return float(self.restore_penalty)

    @classmethod
    def parse_penalty(cls, text: str) -> float | str:
        """``"30"`` -> 30.0, ``"helios"`` -> ``"helios"`` (for the CLI)."""
        try:
            return float(text)
        except ValueError:
            return text
