"""Closing the loop live: what a plan-aware policy's performance model predicts for a
running job, next to what the job reports.

Plan-aware policies (rubick, sia) learn in the live controller exactly as in simulation:
``Knowledge.observe`` records each running configuration's speed from ``JobStatus.rate``
at the next decision and refits the model when its recent error exceeds the threshold.
The controller only has to feed it honest rates: a job that names a model starts with
rate 0 (unknown, so ``observe`` skips it) instead of a guess, its first measured
iteration time sets the rate and asks for a decision, and ``predicted_iter_time`` (the
current model's prediction for the job's plan and placement) is stored beside the
observed ``iter_time`` for ``shapeshift queue --perf``.
"""

from __future__ import annotations

import math
from typing import Any

from shapeshift.engine.contract import HasKnowledge
from shapeshift.model import Allocation


def predicted_iter_time(policy: Any, model_name: str, alloc: Allocation | None) -> float | None:
    """Seconds per iteration the policy's model predicts, or None without a model."""
    knowledge = policy.knowledge if isinstance(policy, HasKnowledge) else None
    if knowledge is None or not model_name or alloc is None or alloc.plan is None:
        return None
    from shapeshift.perf.ground_truth import placement_key
    from shapeshift.perf.rubick import Config

    mk = knowledge.knowledge(model_name)
    if mk is None:
        return None
    place = placement_key([r.gpus for _, r in alloc.placement])
    if not place:
        return None
    cpus = max(alloc.total.cpus, 1.0)
    try:
        value = float(mk.model.predict([Config(mk.arch, alloc.plan, place, cpus, mk.model.node)])[0])
    except (ValueError, ArithmeticError):
        return None
    return value if math.isfinite(value) and value > 0 else None
