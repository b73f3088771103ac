"""Enumerate the execution plans a model can run on a placement.

The global batch ``B`` never changes under reconfiguration, so every plan must split it
exactly: ``B = dp * micro-batch * grad_accum`` (and for pipelines ``micro-batch * m``
per DP replica).

* 3D parallelism: ``dp * tp * pp = GPUs``; ``tp`` divides the attention heads and every
  node's GPU count (TP groups are consecutive ranks and must stay inside a node); ``pp``
  divides the layers; ``m`` micro-batches, by default as many as the batch allows
  (one sample each), which is >= ``pp`` whenever the pipeline can be filled.
* Data-parallel family (``dp = GPUs``): plain DP, ZeRO-DP (ZeRO-2) or ZeRO-Offload, each
  with or without gradient checkpointing and with gradient accumulation ``a`` for every
  divisor ``a > 1`` of the per-GPU batch up to ``max_accum``.
"""

from __future__ import annotations

from shapeshift.model import ExecutionPlan, ZeroMode
from shapeshift.perf.arch import ModelArch


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_plans(
    arch: ModelArch,
    placement: tuple[int, ...],
    global_batch: int | None = None,
    max_accum: int = 8,
    include_3d: bool = True,
    include_dp: bool = True,
) -> list[ExecutionPlan]:
    """Every valid plan for ``arch`` at ``global_batch`` (default: the model's) on ``placement``."""
    if not placement or min(placement) < 1:
        raise ValueError(f"bad placement {placement!r}: every node needs at least one GPU")
    batch = global_batch or arch.global_batch
    gpus = sum(placement)
    plans: list[ExecutionPlan] = []
    if include_dp and batch % gpus == 0:
        per_gpu = batch // gpus
        for zero in ZeroMode:
            for gc in (False, True):
                for a in divisors(per_gpu):
                    if a <= max_accum:
                        plans.append(ExecutionPlan(dp=gpus, zero=zero, grad_accum=a, grad_ckpt=gc))
    if include_3d:
        for tp in divisors(gpus):
            if arch.heads % tp or any(g % tp for g in placement):
                continue
            for pp in divisors(gpus // tp):
                if (tp, pp) == (1, 1) or arch.layers % pp:
                    continue
                dp = gpus // (tp * pp)
                if batch % dp:
                    continue
                m = batch // dp if pp > 1 else 1
                plans.append(ExecutionPlan(dp=dp, tp=tp, pp=pp, micro_batches=m))
    return plans


def packed_placement(gpus: int, gpus_per_node: int) -> tuple[int, ...]:
    """Fewest nodes: full nodes first, the remainder on one more node (``12, 8 -> (8, 4)``)."""
    if gpus < 1 or gpus_per_node < 1:
        raise ValueError("gpus and gpus_per_node must be >= 1")
    full, rest = divmod(gpus, gpus_per_node)
    return (gpus_per_node,) * full + ((rest,) if rest else ())
