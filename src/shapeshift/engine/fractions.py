"""Which GPUs of a node a job takes, when jobs may ask for a fraction of one GPU.

One rule, used by both the engine's GPU ledger (the truth) and a policy's scratch copy
of free resources (its plan), so the GPUs a policy expects a job to get are the GPUs the
engine gives it:

* a fractional job (``JobSpec.gpu_milli`` 1..999) takes the GPU with the *least* free
  share that still holds it, lowest index on ties: the tightest fit, which keeps idle
  GPUs idle for whole-GPU jobs (the FGD authors' simulator's ``gpuSelMethod: best``,
  ``pkg/simulator/plugin/open_gpu_share.go`` of hkust-adsl/kubernetes-scheduler-simulator);
* a whole-GPU job takes the lowest-numbered idle GPUs.

Free shares are kept in thousandths (``GPU_MILLI`` = an idle GPU), as integers, so sums
are exact. A slot past a node's last GPU holds -1.
"""

from __future__ import annotations

from collections.abc import Sequence

from shapeshift.model import GPU_MILLI


def choose_gpus(free: Sequence[int], count: int, milli: int | None) -> list[int] | None:
    """Indexes of the GPUs a job takes on a node whose GPUs have ``free`` thousandths
    free: one GPU for a fraction ``milli``, else ``count`` idle GPUs; ``None`` if they
    are not there."""
    if milli is not None:
        best = -1
        for gpu, left in enumerate(free):
            if left >= milli and (best < 0 or left < free[best]):
                best = gpu
        return None if best < 0 else [best]
    idle = [gpu for gpu, left in enumerate(free) if left == GPU_MILLI]
    return idle[:count] if len(idle) >= count else None
