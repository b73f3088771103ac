"""Iteration-time model of Rubick (Appendix A), vectorised over configurations.

``T_iter = T_cc + T_oo + k_const``:

* forward: ``T_fwd = t_fwd * (B/(d*a)) / t`` per accumulation step, and with pipelining
  ``t_fwd * g/p * (m+p-1)`` with ``g = B/(d*a*m)`` the micro-batch; backward
  ``T_bwd = k_bwd * T_fwd`` (+ one more ``T_fwd`` under gradient checkpointing);
* communication ``T = V / B``: ``V_dp = P * 2(d-1)/(d t p)``, ``V_tp = 4 * 2(t-1) b s h l/(d t)``,
  ``V_pp = 2 p b s h/(d t)`` (elements, 2 bytes each), over the bottleneck bandwidth of
  the GPUs involved;
* ``T_cc = a T_fwd + (a-1) T_bwd + f_ksync(T_bwd, T_dp) + a (T_tp + T_pp)`` (the paper's 3D
  and GA forms are the cases a = 1 and t = p = 1), with ``f_k(x, y) = (x^k + y^k)^(1/k)``;
* ``T_oo = T_opt = k_opt P / x`` (x = t p, times d under ZeRO-DP), or under ZeRO-Offload
  ``f_koff(T_dp, T_off) + f_kswap(k_opt_off P/(d c), T_off)`` with ``T_off = P/(d B_pcie)``
  and ``c`` the CPU threads of each training process (one per GPU), not the job's total
  (and then ``T_dp`` leaves ``T_cc``: the gradients stream to the host instead).

Four additions beyond the paper, each switchable so its effect can be measured:

* ``spread``: the DP all-reduce is hierarchical. A800 HGX nodes pair two GPUs per PCIe
  switch and one 100 Gb/s NIC (``inter_bw_gb_s`` = 12.5 GB/s per NIC), so a node
  holding ``k`` ranks of a group moves the inter-node share with ``max(1, k // 2)`` NICs
  (:func:`shapeshift.perf.topology.nics_used`; the busiest node sets the pace):
  ``T_dp = 2(d-1)/d V/B_intra + 2(n-1)/n V/(NICs B_inter)`` for a group over ``n`` nodes.
  4+4 is then much faster than 1x8, and 2+6 no faster than 2+2+2+2, as measured.
* ``split_forward``: Megatron (3D) and DeepSpeed (data-parallel) rows come from different
  frameworks, so the per-sample forward time is a separate parameter for each.
* ``stage_overhead``: ``k_stage`` seconds per pipeline stage boundary per step (the
  traces' PP rows run without micro-batching, so stages add latency, not overlap).
* ``host_contention``: under ZeRO-Offload every rank on a node runs its CPU Adam against
  the same host memory, so a rank's CPU optimizer step slows with the number of
  offloading ranks ``g`` on its node: ``k_opt_off P/(d c) x (1 + k_host (g - 1))``, taken
  on the most loaded node. Without it, the model over-predicts 1-GPU Offload runs and
  under-predicts full-node ones (t5: +27% and -27%).

Units: seconds, bytes, GB/s; ``P`` in billions of parameters for the ``k_opt`` terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from shapeshift.model import ExecutionPlan, NodeSpec, ZeroMode
from shapeshift.perf.arch import ModelArch
from shapeshift.perf.topology import plan_topology

#: Bytes per gradient element on the wire: fp16/bf16 mixed precision (Micikevicius et al. 2018).
GRAD_BYTES = 2.0
#: Bytes per activation element sent by TP all-reduces and PP sends (fp16).
ACT_BYTES = 2.0
#: Bytes per parameter crossing PCIe per iteration under ZeRO-Offload: fp16 gradients to
#: the host and fp16 parameters back (Ren et al., ZeRO-Offload, USENIX ATC 2021, Sec. 4).
OFFLOAD_BYTES = 4.0

#: The measurement cluster of the traces: A800-80GB, NVLink 400 GB/s, 8 x 100 Gb/s RDMA per
#: node (12.5 GB/s per GPU), PCIe 4.0 x16 (about 25 GB/s achievable), 96 vCPUs, 1,600 GB.
A800_NODE = NodeSpec(
    "a800",
    gpus=8,
    cpus=96,
    mem_gb=1600,
    gpu_type="A800",
    gpu_mem_gb=80.0,
    intra_bw_gb_s=400.0,
    inter_bw_gb_s=12.5,
    pcie_bw_gb_s=25.0,
)


@dataclass(frozen=True, slots=True)
class ParamSpec:
    name: str
    default: float
    lower: float
    upper: float


#: Fittable parameters, their documented defaults (used when data cannot identify them,
#: and as the centre of the fit's weak prior) and optimisation bounds. The first seven are
#: the paper's. Defaults are typical values of full-data fits on the Rubick traces
#: (bert, gpt2, t5, roberta, vit, llama7, llama30; see docs/perf-model.md).
PARAM_SPECS: tuple[ParamSpec, ...] = (
    ParamSpec("k_bwd", 1.5, 0.5, 6.0),  # backward / forward time; ~2 (twice the FLOPs)
    ParamSpec("k_sync", 1.5, 1.0, 30.0),  # overlap of backward and DP all-reduce; 1 = none, large = max()
    ParamSpec("k_opt", 0.01, 1e-6, 20.0),  # s per 1e9 parameters per optimizer shard (GPU Adam)
    ParamSpec("k_opt_off", 5.5, 1e-3, 2e3),  # s x CPU per 1e9 parameters (CPU Adam)
    ParamSpec("k_off", 1.2, 1.0, 30.0),  # overlap of DP comm and PCIe offload
    ParamSpec("k_swap", 2.0, 1.0, 30.0),  # overlap of CPU optimizer and PCIe swap
    ParamSpec("k_const", 0.15, 1e-5, 5.0),  # s per iteration, fixed (launch, data loading)
    ParamSpec("t_fwd", 5e-3, 1e-6, 20.0),  # s per sample, whole model, one GPU (data-parallel framework)
    ParamSpec("t_fwd_3d", 5e-3, 1e-6, 20.0),  # same for the 3D (Megatron) framework
    ParamSpec("k_net", 1.5, 0.25, 8.0),  # inter-node time / nominal (12.5 GB/s per NIC -> ~8 GB/s effective)
    ParamSpec("k_stage", 0.02, 1e-5, 2.0),  # s per pipeline stage boundary per step (PP without micro-batching)
    ParamSpec("k_host", 0.3, 1e-3, 4.0),  # CPU-optimizer slowdown per extra offloading rank on a node
)
PAPER_PARAMS = tuple(s.name for s in PARAM_SPECS[:7])
OFFLOAD_PARAMS = ("k_opt_off", "k_off", "k_swap")


@dataclass(frozen=True, slots=True)
class RubickParams:
    """Coefficients of one model; see :data:`PARAM_SPECS` for meaning and bounds."""

    k_bwd: float = 1.5
    k_sync: float = 1.5
    k_opt: float = 0.01
    k_opt_off: float = 5.5
    k_off: float = 1.2
    k_swap: float = 2.0
    k_const: float = 0.15
    t_fwd: float = 5e-3
    t_fwd_3d: float = 5e-3
    k_net: float = 1.5
    k_stage: float = 0.02
    k_host: float = 0.3

    def as_array(self) -> np.ndarray:
        return np.array([getattr(self, s.name) for s in PARAM_SPECS], dtype=float)

    @classmethod
    def from_array(cls, values: Sequence[float]) -> RubickParams:
        return cls(**{s.name: float(v) for s, v in zip(PARAM_SPECS, values, strict=True)})

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RubickParams:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown parameter(s) {sorted(unknown)}; expected {sorted(known)}")
        return cls(**{k: float(v) for k, v in data.items()})


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """Which extensions of the paper's formulation are on (all by default)."""

    spread: bool = True
    split_forward: bool = True
    stage_overhead: bool = True
    host_contention: bool = True


#: The default options (module-level so it can serve as an argument default).
DEFAULT_OPTIONS = ModelOptions()


@dataclass(frozen=True, slots=True)
class Config:
    """One question to the model: this job, this plan, on these GPUs per node, with these CPUs."""

    arch: ModelArch
    plan: ExecutionPlan
    placement: tuple[int, ...]
    cpus: float = 4.0  # CPU threads per training process (one process per GPU), not the job's total
    node: NodeSpec = A800_NODE


@dataclass(frozen=True)
class Features:
    """Parameter-independent terms of many configurations, as arrays (computed once)."""

    fwd_work: np.ndarray  # samples-equivalent of forward work per accumulation step
    is_3d: np.ndarray
    accum: np.ndarray
    gc: np.ndarray
    offload: np.ndarray
    t_dp_intra: np.ndarray  # s, DP gradient all-reduce, intra-node part (nominal bandwidth)
    t_dp_inter: np.ndarray  # s, DP gradient all-reduce, inter-node part (nominal bandwidth)
    t_tp: np.ndarray  # s, TP all-reduces per accumulation step
    t_pp: np.ndarray  # s, PP sends per accumulation step
    t_off: np.ndarray  # s, PCIe transfer under offload
    opt_scale: np.ndarray  # P_b / x for the GPU optimizer
    off_scale: np.ndarray  # P_b / (d c) for the CPU optimizer
    stages: np.ndarray  # p - 1 pipeline stage boundaries (0 when the stage term is off)
    host_share: np.ndarray  # g - 1 other offloading ranks on the busiest node (0 when off / not Offload)

    def __len__(self) -> int:
        return len(self.fwd_work)


def _dp_comm_times(cfg: Config, spread: bool) -> tuple[float, float]:
    """(intra-node, inter-node) seconds of the DP gradient all-reduce at nominal bandwidths."""
    plan, arch, node = cfg.plan, cfg.arch, cfg.node
    d = plan.dp
    if d <= 1:
        return 0.0, 0.0
    volume = GRAD_BYTES * arch.params / (plan.tp * plan.pp) / 1e9  # GB per rank
    ring = 2.0 * (d - 1) / d
    topo = plan_topology(d, plan.tp, plan.pp, cfg.placement)
    if not topo.dp.crosses:
        return ring * volume / node.intra_bw_gb_s, 0.0
    if not spread:
        return 0.0, ring * volume / node.inter_bw_gb_s
    return ring * volume / node.intra_bw_gb_s, topo.dp_inter_load * volume / node.inter_bw_gb_s


def config_terms(cfg: Config, options: ModelOptions) -> tuple[float, ...]:
    """Parameter-independent terms of one configuration (see :class:`Features`)."""
    plan, arch, node = cfg.plan, cfg.arch, cfg.node
    d, t, p, a, m = plan.dp, plan.tp, plan.pp, plan.grad_accum, plan.micro_batches
    batch = arch.global_batch / (d * a)  # samples per GPU per accumulation step
    fwd_work = batch / (m * t * p) * (m + p - 1)
    topo = plan_topology(d, t, p, cfg.placement)
    t_dp_intra, t_dp_inter = _dp_comm_times(cfg, options.spread)
    sh = arch.seq_len * arch.hidden
    t_tp = 0.0
    if t > 1:
        v_tp = 4 * 2 * (t - 1) / t * batch * sh * arch.layers * ACT_BYTES / 1e9
        t_tp = v_tp / (node.inter_bw_gb_s if topo.tp.crosses else node.intra_bw_gb_s)
    t_pp = 0.0
    if p > 1:
        v_pp = 2 * p * batch * sh / t * ACT_BYTES / 1e9
        t_pp = v_pp / (node.inter_bw_gb_s if topo.pp_crosses else node.intra_bw_gb_s)
    offload = plan.zero is ZeroMode.OFFLOAD
    t_off = OFFLOAD_BYTES * arch.params / (d * t * p) / 1e9 / node.pcie_bw_gb_s if offload else 0.0
    shards = t * p * (d if plan.zero is ZeroMode.DP else 1)
    opt_scale = arch.params_b / shards
    off_scale = arch.params_b / (d * t * p * max(cfg.cpus, 1e-9)) if offload else 0.0
    is_3d = float(t > 1 or p > 1) if options.split_forward else 0.0
    stages = float(p - 1) if options.stage_overhead else 0.0
    host_share = float(max(cfg.placement) - 1) if offload and options.host_contention else 0.0
    return (
        fwd_work,
        is_3d,
        float(a),
        float(plan.grad_ckpt),
        float(offload),
        t_dp_intra,
        t_dp_inter,
        t_tp,
        t_pp,
        t_off,
        opt_scale,
        off_scale,
        stages,
        host_share,
    )


_N_TERMS = 14


def build_features(configs: Sequence[Config], options: ModelOptions = DEFAULT_OPTIONS) -> Features:
    """Compute the parameter-independent terms of many configurations at once."""
    cols = np.array([config_terms(c, options) for c in configs], dtype=float).reshape(len(configs), _N_TERMS)
    return Features(*(cols[:, i].copy() for i in range(_N_TERMS)))


def soft_sum(x: np.ndarray, y: np.ndarray, k: float | np.ndarray) -> np.ndarray:
    """``f_k(x, y) = (x^k + y^k)^(1/k)``: k = 1 adds (no overlap), k -> inf takes the max.

    Computed as ``M * ((x/M)^k + (y/M)^k)^(1/k)`` with ``M = max(x, y)`` so large k
    cannot overflow; ``f_k(0, 0) = 0``.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    top = np.maximum(x, y)
    safe = np.where(top > 0, top, 1.0)
    return np.where(top > 0, safe * ((x / safe) ** k + (y / safe) ** k) ** (1.0 / k), 0.0)


@dataclass(frozen=True)
class Breakdown:
    """Predicted component times (s) of each configuration."""

    t_fwd: np.ndarray
    t_bwd: np.ndarray
    t_cc: np.ndarray
    t_oo: np.ndarray
    total: np.ndarray


def predict_breakdown(theta: np.ndarray, f: Features) -> Breakdown:
    """The model proper, over arrays: ``theta`` in :data:`PARAM_SPECS` order."""
    k_bwd, k_sync, k_opt, k_opt_off, k_off, k_swap, k_const, t_fwd, t_fwd_3d, k_net, k_stage, k_host = theta
    rate = np.where(f.is_3d > 0, t_fwd_3d, t_fwd)
    fwd = rate * f.fwd_work
    bwd = k_bwd * fwd + f.gc * fwd
    t_dp = f.t_dp_intra + k_net * f.t_dp_inter
    dp_in_cc = np.where(f.offload > 0, 0.0, t_dp)
    sync = soft_sum(bwd, dp_in_cc, k_sync)
    cc_offload = f.accum * (fwd + bwd)
    cc_plain = f.accum * fwd + (f.accum - 1) * bwd + sync
    cc = np.where(f.offload > 0, cc_offload, cc_plain) + f.accum * (f.t_tp + f.t_pp + k_stage * f.stages)
    t_opt_gpu = k_opt * f.opt_scale
    t_opt_cpu = k_opt_off * f.off_scale * (1.0 + k_host * f.host_share)
    oo_offload = soft_sum(t_dp, f.t_off, k_off) + soft_sum(t_opt_cpu, f.t_off, k_swap)
    oo = np.where(f.offload > 0, oo_offload, t_opt_gpu)
    return Breakdown(fwd, bwd, cc, oo, cc + oo + k_const)


def predict_times(theta: np.ndarray, f: Features) -> np.ndarray:
    return predict_breakdown(theta, f).total


def iteration_time(params: RubickParams, config: Config, options: ModelOptions = DEFAULT_OPTIONS) -> float:
    """Predicted seconds per iteration of one configuration."""
    return float(predict_times(params.as_array(), build_features([config], options))[0])
