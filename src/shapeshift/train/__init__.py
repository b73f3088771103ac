"""Reference trainer: a small GPT-style language model that runs any execution plan it
supports (DP over gloo, gradient accumulation, gradient checkpointing, ZeRO-DP) and
survives reconfiguration through plan-independent checkpoints.

torch is imported lazily (it is the optional ``train`` extra), so ``shapeshift.train``
and its plan checks import without it.
"""

from shapeshift.train.plans import UnsupportedPlan, check_plan

__all__ = ["UnsupportedPlan", "check_plan"]
