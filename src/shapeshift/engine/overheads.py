"""Costs of starting, stopping and changing jobs.

Every preemption or reconfiguration is a checkpoint-and-restore: the job holds its
GPUs but makes no progress for the restore penalty. Policies that preempt freely
look great in simulators that forget this, so it is on by default (30 s).

A named rule may also depend on the job's model: ``sia-artifact`` charges the restart
delays the Sia artifact's calibrated simulator measured per application, on every start
as that simulator does (below); ``sia-artifact-30`` is the same rule with every
application's delay set to 30 s, as the artifact's homogeneous and uncalibrated settings
(and the Pollux simulator) set them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shapeshift.model import Allocation


def helios_restore_penalty(gpus: int) -> float:
    """The Helios simulator's checkpoint rule: 7 s for 1 GPU, 30 s up to 8, 60 s above."""
    if gpus <= 1:
        return 7.0
    return 30.0 if gpus <= 8 else 60.0


#: Seconds a Pollux-profile job makes no progress after each start, relaunch or
#: reconfiguration in the Sia artifact (``sia-simulator/applications.py``, ``rescale_time``
#: per application; 30 s for any other job, the ``or 30`` of ``job.py`` ``reallocate``).
SIA_ARTIFACT_DELAYS: dict[str, float] = {
    "pollux/cifar10": 50.0,
    "pollux/deepspeech2": 25.0,
    "pollux/bert": 120.0,
    "pollux/yolov3": 80.0,
    "pollux/imagenet": 250.0,
    "pollux/ncf": 15.0,
}
SIA_ARTIFACT_DEFAULT_DELAY = 30.0


def sia_artifact_delay(_gpus: int, model: str) -> float:
    """The Sia artifact's restart delay of ``model``'s application (calibrated setting)."""
    return SIA_ARTIFACT_DELAYS.get(model, SIA_ARTIFACT_DEFAULT_DELAY)


def sia_artifact_uniform_delay(_gpus: int, _model: str) -> float:
    """The Sia artifact's restart delay with every ``rescale_time`` at 30 s."""
    return SIA_ARTIFACT_DEFAULT_DELAY


def _by_gpus(rule: Callable[[int], float]) -> Callable[[int, str], float]:
    return lambda gpus, _model: rule(gpus)


#: Named restore-penalty rules: seconds from (GPU count, model name).
NAMED_PENALTIES: dict[str, Callable[[int, str], float]] = {
    "helios": _by_gpus(helios_restore_penalty),
    "sia-artifact": sia_artifact_delay,
    "sia-artifact-30": sia_artifact_uniform_delay,
}
#: Rules charged on every start, a first one included, once: the Sia artifact's
#: ``Job.reallocate`` restarts its countdown whenever a placement changes, from none too,
#: so a relaunch after a preemption costs one delay, not a launch plus a restore.
EVERY_START = frozenset({"sia-artifact", "sia-artifact-30"})


@dataclass(frozen=True)
class Overheads:
    """``launch_delay`` applies to every launch; ``restore_penalty`` (seconds, or a named
    rule by GPU count and model) to every relaunch after a preemption and to every
    reconfiguration; a rule in :data:`EVERY_START` to every start instead (first starts
    included), once."""

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

    def restore(self, gpus: int, model: str = "") -> float:
        """The pause of a reconfiguration to ``gpus`` GPUs of a job of ``model``."""
        if isinstance(self.restore_penalty, str):
            return NAMED_PENALTIES[self.restore_penalty](gpus, model)
        return float(self.restore_penalty)

    def start(self, gpus: int, model: str, relaunch: bool) -> float:
        """The pause of a launch: ``launch_delay``, plus the restore penalty after a
        preemption (``relaunch``), or for an every-start rule its delay on every launch."""
        if isinstance(self.restore_penalty, str) and self.restore_penalty in EVERY_START:
            return self.launch_delay + self.restore(gpus, model)
        return self.launch_delay + (self.restore(gpus, model) if relaunch else 0.0)

    def move(
        self, before: Allocation, after: Allocation, model: str, node_types: Sequence[str] = (),
        countdown: float = 0.0,
    ) -> float:
        """The pause of moving a running job from ``before`` to ``after``: the restore
        penalty, except that an every-start rule charges nothing new when the job stays
        on the same GPU type with the same GPUs per node, in node order: the job's
        ``countdown`` (what is left of its pause) goes on. The Sia artifact restarts a
        job's countdown only when its placement changes (``job.py``, ``Job.reallocate``),
        and its placement is that tuple of counts within one GPU type, not the nodes: a
        move to other nodes of the same shape and type leaves it running there, while a
        move to another type always restarts (``Job.migrate``). ``node_types`` gives
        each node's GPU type by node index (none: one type)."""
        every_start = isinstance(self.restore_penalty, str) and self.restore_penalty in EVERY_START
        if every_start and _shape(before, node_types) == _shape(after, node_types):
            return max(countdown, 0.0)
        return self.restore(after.gpus, model)

    @classmethod
    def parse_penalty(cls, text: str) -> float | str:
        """``"30"`` -> 30.0, ``"helios"`` -> ``"helios"`` (for the CLI)."""
        try:
            return float(text)
        except ValueError:
            return text


def _shape(alloc: Allocation, node_types: Sequence[str] = ()) -> tuple[tuple[str, int], ...]:
    """GPU type and GPUs per node of ``alloc``, in node order."""
    return tuple(
        (node_types[node] if node_types else "", res.gpus)
        for node, res in sorted(alloc.placement, key=lambda part: part[0])
    )
