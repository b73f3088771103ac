"""Fit the Rubick coefficients to measured iteration times, and keep them fresh online.

The objective is the root mean squared log error (RMSLE) between predicted and measured
iteration time: relative errors matter equally for a 0.05 s and a 50 s job. All
parameters are positive and optimised in log space within the bounds of
:data:`~shapeshift.perf.rubick.PARAM_SPECS` by L-BFGS-B from several deterministic starts
(a data-driven guess and points of a plain (unscrambled) Halton sequence, computed here so no
library's sampler can change them); the best start wins and is polished until another
run improves the objective by less than :data:`CONVERGED`. Tolerances are explicit and
tight, and the coefficients are rounded to :data:`SIGNIFICANT` digits, so the fit, and
every figure downstream of it, is the same on any install.
Parameters the data cannot identify keep their defaults and the fit
says so in :attr:`FittedModel.notes`:

* the three ZeRO-Offload coefficients need at least 3 Offload rows;
* a forward time needs a row of its framework (with no 3D rows the 3D forward equals the
  data-parallel one and vice versa);
* ``k_sync`` needs a non-Offload row with DP > 1, ``k_opt`` a non-Offload row;
* ``k_net`` (effective inter-node bandwidth) needs a row whose DP group crosses nodes,
  ``k_stage`` a pipeline row, ``k_host`` Offload rows with two different numbers of
  offloading GPUs on their busiest node.

A small ridge pull (weight :data:`PRIOR_WEIGHT`) towards the starting guess in log
space keeps few-shot fits (7 rows, 9 parameters) from wandering along flat directions;
with many rows it is negligible.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shapeshift.model import NodeSpec, ZeroMode
from shapeshift.perf.arch import ModelArch, get_arch
from shapeshift.perf.measurements import Measurement
from shapeshift.perf.rubick import (
    A800_NODE,
    DEFAULT_OPTIONS,
    OFFLOAD_PARAMS,
    PARAM_SPECS,
    Config,
    Features,
    ModelOptions,
    RubickParams,
    build_features,
    predict_times,
)

MIN_POINTS = 7
#: L-BFGS-B tolerances, explicit so a library's defaults cannot move the answer.
LBFGSB_OPTIONS = {"ftol": 1e-13, "gtol": 1e-10, "maxiter": 3000, "maxcor": 20}
#: A polish run that improves the objective by less than this ends the fit.
CONVERGED = 1e-10
#: Significant digits kept of each fitted coefficient (far below what the data resolve).
SIGNIFICANT = 6
MIN_OFFLOAD_POINTS = 3
PRIOR_WEIGHT = 1e-2
FORMAT_VERSION = 1
_NAMES = [s.name for s in PARAM_SPECS]
_IDX = {n: i for i, n in enumerate(_NAMES)}
_LO = np.log([s.lower for s in PARAM_SPECS])
_HI = np.log([s.upper for s in PARAM_SPECS])


class FitError(ValueError):
    """Not enough (or unusable) data to fit."""


@dataclass(frozen=True)
class FittedModel:
    """Fitted coefficients of one model, with what they were fitted on; JSON round-trips."""

    arch: ModelArch
    params: RubickParams
    options: ModelOptions = DEFAULT_OPTIONS
    node: NodeSpec = A800_NODE
    n_points: int = 0
    rmsle: float = float("nan")
    free: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def model(self) -> str:
        return self.arch.name

    def config(self, m: Measurement) -> Config:
        return Config(self.arch, m.plan, m.placement, m.cpus, self.node)

    def predict(self, configs: Sequence[Config]) -> np.ndarray:
        """Iteration times (s) of many configurations at once."""
        if not configs:
            return np.zeros(0)
        return predict_times(self.params.as_array(), build_features(configs, self.options))

    def predict_measurements(self, rows: Sequence[Measurement]) -> np.ndarray:
        return self.predict([self.config(m) for m in rows])

    def to_dict(self) -> dict[str, Any]:
        a, n = self.arch, self.node
        return {
            "format": "shapeshift.perf.rubick",
            "version": FORMAT_VERSION,
            "model": a.name,
            "arch": {
                "params": a.params,
                "hidden": a.hidden,
                "layers": a.layers,
                "heads": a.heads,
                "seq_len": a.seq_len,
                "global_batch": a.global_batch,
            },
            "params": self.params.to_dict(),
            "options": asdict(self.options),
            "node": {
                "name": n.name,
                "gpus": n.gpus,
                "cpus": n.cpus,
                "mem_gb": n.mem_gb,
                "gpu_type": n.gpu_type,
                "gpu_mem_gb": n.gpu_mem_gb,
                "intra_bw_gb_s": n.intra_bw_gb_s,
                "inter_bw_gb_s": n.inter_bw_gb_s,
                "pcie_bw_gb_s": n.pcie_bw_gb_s,
            },
            "fit": {
                "n_points": self.n_points,
                "rmsle": None if math.isnan(self.rmsle) else self.rmsle,
                "free": list(self.free),
                "notes": list(self.notes),
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FittedModel:
        if data.get("format") != "shapeshift.perf.rubick":
            raise ValueError("not a shapeshift.perf.rubick parameter file (field 'format')")
        try:
            arch = ModelArch(name=str(data["model"]), **data["arch"])
            params = RubickParams.from_dict(data["params"])
            options = ModelOptions(**data.get("options", {}))
            node = NodeSpec(**data["node"]) if "node" in data else A800_NODE
            fit = data.get("fit", {})
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad parameter file: missing or bad field {exc}") from None
        return cls(
            arch,
            params,
            options,
            node,
            int(fit.get("n_points", 0)),
            math.nan if fit.get("rmsle") is None else float(fit["rmsle"]),
            tuple(fit.get("free", ())),
            tuple(fit.get("notes", ())),
        )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> FittedModel:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def _initial_guess(rows: Sequence[Measurement], f: Features) -> np.ndarray:
    """Defaults, with forward times scaled so the fastest-forward rows are roughly matched."""
    theta = RubickParams().as_array()
    y = np.array([r.iter_time for r in rows])
    for name, mask in (("t_fwd", f.is_3d == 0), ("t_fwd_3d", f.is_3d > 0)):
        if mask.any():
            # about 55% of an iteration is forward + backward (1 + k_bwd = 3 forward times)
            est = np.median(0.55 * y[mask] / (3.0 * f.fwd_work[mask]))
            theta[_IDX[name]] = float(np.clip(est, PARAM_SPECS[_IDX[name]].lower, PARAM_SPECS[_IDX[name]].upper))
    if not (f.is_3d > 0).any():
        theta[_IDX["t_fwd_3d"]] = theta[_IDX["t_fwd"]]
    if not (f.is_3d == 0).any():
        theta[_IDX["t_fwd"]] = theta[_IDX["t_fwd_3d"]]
    return theta


def _free_parameters(rows: Sequence[Measurement], f: Features, options: ModelOptions) -> tuple[list[str], list[str]]:
    free: list[str] = []
    notes: list[str] = []
    offload = [r for r in rows if r.plan.zero is ZeroMode.OFFLOAD]
    plain = [r for r in rows if r.plan.zero is not ZeroMode.OFFLOAD]
    free.append("k_bwd")
    if any(r.plan.dp > 1 for r in plain):
        free.append("k_sync")
    else:
        notes.append("k_sync kept at its default: no non-Offload row with DP > 1")
    if plain:
        free.append("k_opt")
    else:
        notes.append("k_opt kept at its default: no non-Offload row")
    if len(offload) >= MIN_OFFLOAD_POINTS:
        free.extend(OFFLOAD_PARAMS)
    else:
        notes.append(
            f"{', '.join(OFFLOAD_PARAMS)} kept at their defaults: {len(offload)} ZeRO-Offload row(s), "
            f"{MIN_OFFLOAD_POINTS} needed"
        )
    free.append("k_const")
    has_3d, has_dp = bool((f.is_3d > 0).any()), bool((f.is_3d == 0).any())
    if has_dp:
        free.append("t_fwd")
    if has_3d and options.split_forward:
        free.append("t_fwd_3d")
    if options.split_forward and not (has_3d and has_dp):
        notes.append("one framework only: the 3D and data-parallel forward times are tied")
    if (f.t_dp_inter > 0).any():
        free.append("k_net")
    else:
        notes.append("k_net kept at its default: no row whose DP group crosses nodes")
    if (f.stages > 0).any():
        free.append("k_stage")
    if "k_opt_off" in free and len(set(f.host_share[f.offload > 0].tolist())) >= 2:
        free.append("k_host")
    elif options.host_contention:
        notes.append("k_host kept at its default: no two Offload rows with different GPUs per node")
    return free, notes


@dataclass
class _Objective:
    f: Features
    log_y: np.ndarray
    base: np.ndarray  # log theta, fixed values and prior centre
    free_idx: np.ndarray
    tie_3d: bool  # t_fwd_3d follows t_fwd
    tie_dp: bool  # t_fwd follows t_fwd_3d
    prior: float = PRIOR_WEIGHT
    _cache: dict[str, Any] = field(default_factory=dict)

    def theta(self, z: np.ndarray) -> np.ndarray:
        log_theta = self.base.copy()
        log_theta[self.free_idx] = z
        if self.tie_3d:
            log_theta[_IDX["t_fwd_3d"]] = log_theta[_IDX["t_fwd"]]
        if self.tie_dp:
            log_theta[_IDX["t_fwd"]] = log_theta[_IDX["t_fwd_3d"]]
        return np.exp(log_theta)

    def rmsle(self, z: np.ndarray) -> float:
        pred = predict_times(self.theta(z), self.f)
        return float(np.sqrt(np.mean((np.log(np.maximum(pred, 1e-12)) - self.log_y) ** 2)))

    def __call__(self, z: np.ndarray) -> float:
        pull = self.prior * float(np.mean((z - self.base[self.free_idx]) ** 2))
        return self.rmsle(z) + pull


def fit(
    measurements: Sequence[Measurement],
    arch: ModelArch | None = None,
    options: ModelOptions = DEFAULT_OPTIONS,
    node: NodeSpec = A800_NODE,
    starts: int = 6,
    seed: int = 0,
    prior: float = PRIOR_WEIGHT,
    warm_start: RubickParams | None = None,
    max_iterations: int | None = None,
) -> FittedModel:
    """Fit one model's coefficients to its measurements (RMSLE, bounded, multi-start).

    ``warm_start`` begins from known coefficients instead of the data-driven guess, and
    ``max_iterations`` caps each L-BFGS-B run: an online refit starts close to its answer
    and must fit inside one scheduling decision."""
    # scipy's optimizer costs ~0.7 s to import; only fitting needs it.
    from scipy.optimize import minimize

    rows = list(measurements)
    if len(rows) < MIN_POINTS:
        raise FitError(f"need at least {MIN_POINTS} measurements to fit, got {len(rows)}")
    names = {r.model for r in rows}
    if arch is None:
        if len(names) != 1:
            raise FitError(f"measurements mix models {sorted(names)}; fit one model at a time")
        arch = get_arch(next(iter(names)))
    configs = [Config(arch, r.plan, r.placement, r.cpus, node) for r in rows]
    f = build_features(configs, options)
    log_y = np.log([r.iter_time for r in rows])
    free, notes = _free_parameters(rows, f, options)
    guess = _initial_guess(rows, f)
    has_3d, has_dp = bool((f.is_3d > 0).any()), bool((f.is_3d == 0).any())
    objective = _Objective(
        f,
        log_y,
        np.log(guess),
        np.array([_IDX[n] for n in free]),
        tie_3d=not (options.split_forward and has_3d) and has_dp,
        tie_dp=not has_dp,
        prior=prior,
    )
    lo, hi = _LO[objective.free_idx], _HI[objective.free_idx]
    start = warm_start.as_array() if warm_start is not None else guess
    z0 = np.clip(np.log(np.maximum(start[objective.free_idx], 1e-12)), lo, hi)
    candidates = [z0]
    if starts > 1:
        spread = np.minimum(hi - lo, 6.0)  # explore +-3 e-folds around the guess, within bounds
        for u in halton(starts - 1, len(free), skip=1 + 16 * seed):
            candidates.append(np.clip(z0 + (u - 0.5) * spread, lo, hi))
    bounds = list(zip(lo, hi, strict=True))
    limits = dict(LBFGSB_OPTIONS)
    if max_iterations is not None:
        limits["maxiter"] = max_iterations
    best = None
    for z in candidates:
        res = minimize(objective, z, method="L-BFGS-B", bounds=bounds, options=limits)
        if best is None or res.fun < best.fun - 1e-15:
            best = res
    assert best is not None
    x, fun = best.x, float(best.fun)
    if max_iterations is None:
        # convergence check: polish from the best point until a run no longer improves it
        for _ in range(5):
            res = minimize(objective, x, method="L-BFGS-B", bounds=bounds, options=limits)
            if not float(res.fun) < fun - CONVERGED:
                break
            x, fun = res.x, float(res.fun)
        else:
            notes.append("the fit did not settle within 5 polishing runs")
    theta = np.array([float(f"{v:.{SIGNIFICANT}g}") for v in objective.theta(x)])
    params = RubickParams.from_array(theta)
    z_final = np.log(theta[objective.free_idx])
    return FittedModel(arch, params, options, node, len(rows), objective.rmsle(z_final), tuple(free), tuple(notes))


def halton(n: int, d: int, skip: int = 1) -> np.ndarray:
    """The first ``n`` points (after ``skip``) of the ``d``-dimensional Halton sequence in
    [0, 1): radical inverses in the first ``d`` primes. Pure arithmetic, so the fit's start
    points never depend on a library version."""
    primes: list[int] = []
    k = 2
    while len(primes) < d:
        if all(k % p for p in primes):
            primes.append(k)
        k += 1
    out = np.zeros((n, d))
    for i in range(n):
        for j, base in enumerate(primes):
            index, f, r = i + skip, 1.0, 0.0
            while index > 0:
                f /= base
                r += f * (index % base)
                index //= base
            out[i, j] = r
    return out


def abs_pct_errors(model: FittedModel, rows: Sequence[Measurement]) -> np.ndarray:
    """|predicted - measured| / measured, per row."""
    pred = model.predict_measurements(rows)
    meas = np.array([r.iter_time for r in rows])
    return np.abs(pred - meas) / meas


class OnlineModel:
    """Keeps a fitted model in step with new measurements of a running job.

    ``observe`` records a measurement and tracks the running error (mean absolute
    percentage error over the last ``window`` observations); when it exceeds
    ``threshold`` and enough points exist, the model is refitted on everything observed
    plus the seed measurements. Refits are what cost; the threshold keeps them rare.
    """

    def __init__(
        self,
        model: FittedModel,
        seed_measurements: Sequence[Measurement] = (),
        threshold: float = 0.10,
        window: int = 5,
    ) -> None:
        if threshold <= 0:
            raise ValueError("threshold must be > 0")
        self.model = model
        self.threshold = threshold
        self.window = window
        self.measurements: list[Measurement] = list(seed_measurements)
        self.recent_errors: list[float] = []
        self.refits = 0

    @property
    def running_error(self) -> float:
        return float(np.mean(self.recent_errors)) if self.recent_errors else 0.0

    def observe(self, measurement: Measurement) -> bool:
        """Record one measurement; return True when it triggered a refit."""
        err = float(abs_pct_errors(self.model, [measurement])[0])
        self.measurements.append(measurement)
        self.recent_errors = [*self.recent_errors, err][-self.window :]
        if self.running_error <= self.threshold or len(self.measurements) < MIN_POINTS:
            return False
        self.model = fit(self.measurements, self.model.arch, self.model.options, self.model.node)
        self.refits += 1
        self.recent_errors = list(abs_pct_errors(self.model, self.measurements[-self.window :]))
        return True
