"""Which execution plans the reference trainer can run, and why not the others.

Checked before torch is even imported, so a job with an impossible plan fails in
milliseconds with a reason instead of after minutes of setup.
"""

from __future__ import annotations

from shapeshift.model import ExecutionPlan, ZeroMode


class UnsupportedPlan(ValueError):
    """The plan needs a parallelism the reference trainer does not implement."""


def check_plan(plan: ExecutionPlan, world_size: int, global_batch: int) -> int:
    """Validate ``plan`` for ``world_size`` processes; returns the per-rank micro-batch size."""
    if plan.tp > 1:
        raise UnsupportedPlan(f"plan {plan}: tp={plan.tp} needs tensor parallelism, which the reference trainer lacks")
    if plan.pp > 1 or plan.micro_batches > 1:
        raise UnsupportedPlan(f"plan {plan}: pipeline parallelism (pp, mb) is not implemented by the reference trainer")
    if plan.zero is ZeroMode.OFFLOAD:
        raise UnsupportedPlan(f"plan {plan}: ZeRO-Offload is not implemented; use zero=dp")
    if plan.dp != world_size:
        raise UnsupportedPlan(f"plan {plan}: dp={plan.dp} but {world_size} processes were launched")
    per_step = plan.dp * plan.grad_accum
    if global_batch % per_step:
        raise UnsupportedPlan(
            f"plan {plan}: global batch {global_batch} is not divisible by dp*ga = {per_step}, "
            "so the global batch could not be kept"
        )
    return global_batch // per_step
