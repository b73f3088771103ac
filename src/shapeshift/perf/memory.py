"""Per-GPU and host memory of a plan, to decide which plans are feasible.

Constants and their sources:

* :data:`STATE_BYTES` = 16 bytes per parameter for mixed-precision Adam: fp16 parameters
  (2) and gradients (2), fp32 master parameters, momentum and variance (4 + 4 + 4).
  Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
  Models", SC'20, Sec. 3.1 ("2Ψ + 2Ψ + 12Ψ = 16Ψ").
* ZeRO-2 keeps the fp16 parameters whole and partitions gradients and optimizer states
  over the DP ranks: ``2 + 14/d`` bytes per parameter (same paper, Fig. 1, P_os+g).
* ZeRO-Offload keeps only the fp16 parameters on the GPU (2 bytes) and the gradients and
  optimizer states (14 bytes) in host memory. Ren et al., "ZeRO-Offload", ATC'21, Sec. 3.
* Activations of one transformer layer, 16-bit, per sample (Korthikanti et al., "Reducing
  Activation Recomputation in Large Transformer Models", MLSys'23, Eq. 1-2):
  ``s h (10 + 24/t + 5 a s / (h t))`` bytes with tensor parallelism t (34 + 5as/h at t=1).
  The ``5 a s/h`` attention-score term is dropped when a memory-efficient (flash)
  attention kernel is used (:data:`FLASH_ATTENTION`), as current trainers do.
* Gradient checkpointing keeps only each layer's input (``2 s h`` bytes per sample) plus
  one layer's full activations while it is recomputed (same paper, Sec. 4 "full recomputation").
* Pipeline (1F1B schedule): stage 0 holds activations of ``min(m, p)`` micro-batches for
  its ``l/p`` layers (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM", SC'21, Sec. 2.2).
* :data:`RESERVED_GB` = 2 GB per GPU for the CUDA context, NCCL buffers and allocator
  fragmentation (a typical figure for PyTorch + NCCL; an assumption, not a measurement).

Measured rows are not all feasible by this estimate (llama7 ZeRO-Offload at global batch 8
on one GPU evidently ran with smaller activations than estimated); the estimator errs on
the safe side for scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass

from shapeshift.model import ExecutionPlan, NodeSpec, ZeroMode
from shapeshift.perf.arch import ModelArch
from shapeshift.perf.rubick import A800_NODE

STATE_BYTES = 16.0
FP16_PARAM_BYTES = 2.0
PARTITIONED_BYTES = STATE_BYTES - FP16_PARAM_BYTES  # gradients + optimizer states
RESERVED_GB = 2.0
FLASH_ATTENTION = True


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Memory of one plan: per GPU (worst rank) and host memory of the whole job, in GB."""

    states_gb: float
    activations_gb: float
    gpu_gb: float
    host_gb: float
    gpu_capacity_gb: float
    host_capacity_gb: float

    @property
    def fits_gpu(self) -> bool:
        return self.gpu_gb <= self.gpu_capacity_gb

    @property
    def fits_host(self) -> bool:
        return self.host_gb <= self.host_capacity_gb

    @property
    def feasible(self) -> bool:
        return self.fits_gpu and self.fits_host


def layer_activation_bytes(arch: ModelArch, tp: int, flash_attention: bool = FLASH_ATTENTION) -> float:
    """Bytes of activations one sample leaves in one transformer layer (Korthikanti et al.)."""
    s, h, a = arch.seq_len, arch.hidden, arch.heads
    per_token = 10.0 + 24.0 / tp + (0.0 if flash_attention else 5.0 * a * s / (h * tp))
    return s * h * per_token


def state_bytes_per_param(plan: ExecutionPlan) -> float:
    """GPU bytes per (tp*pp-sharded) parameter for the plan's ZeRO mode."""
    if plan.zero is ZeroMode.OFFLOAD:
        return FP16_PARAM_BYTES
    if plan.zero is ZeroMode.DP:
        return FP16_PARAM_BYTES + PARTITIONED_BYTES / plan.dp
    return STATE_BYTES


def estimate_memory(
    arch: ModelArch,
    plan: ExecutionPlan,
    placement: tuple[int, ...] | None = None,
    node: NodeSpec = A800_NODE,
    host_mem_gb: float | None = None,
    flash_attention: bool = FLASH_ATTENTION,
) -> MemoryEstimate:
    """Estimate memory; ``host_mem_gb`` defaults to the memory of the nodes the job touches."""
    d, t, p, a, m = plan.dp, plan.tp, plan.pp, plan.grad_accum, plan.micro_batches
    states = arch.params / (t * p) * state_bytes_per_param(plan) / 1e9
    micro = arch.global_batch / (d * a * m)  # samples per micro-batch per GPU
    in_flight = min(m, p) if p > 1 else 1
    layers = arch.layers / p
    full = layer_activation_bytes(arch, t, flash_attention)
    checkpoints = layers * 2.0 * arch.seq_len * arch.hidden
    per_sample = checkpoints + full if plan.grad_ckpt else layers * full
    activations = in_flight * micro * per_sample / 1e9
    host = arch.params * PARTITIONED_BYTES / 1e9 if plan.zero is ZeroMode.OFFLOAD else 0.0
    nodes = len(placement) if placement else max(1, -(-plan.gpus // max(node.gpus, 1)))
    host_cap = host_mem_gb if host_mem_gb is not None else nodes * node.mem_gb
    return MemoryEstimate(states, activations, states + activations + RESERVED_GB, host, node.gpu_mem_gb, host_cap)


def fits_memory(
    arch: ModelArch,
    plan: ExecutionPlan,
    placement: tuple[int, ...] | None = None,
    node: NodeSpec = A800_NODE,
    host_mem_gb: float | None = None,
) -> bool:
    return estimate_memory(arch, plan, placement, node, host_mem_gb).feasible
