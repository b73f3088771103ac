"""What a goodput policy knows about a Pollux job: fitted throughput and reported noise.

Policies never see the ground truth (:mod:`.ground_truth`). They get, per application,
the throughput model of :mod:`.goodput` fitted on that application's ``placements.csv``
(``scalability.csv`` is held out) and, per job, the gradient statistics an AdaptDL job
reports for its current batch and epoch (the artifact's simulator hands the scheduler
exactly these: ``Job.update_params`` with ``get_grad_stats``).

On a cluster of several GPU types, the model and the per-GPU batch limits are those of the
type's own profile (``placements-<type>.csv``, :func:`.profiles.load_profile`), as the Sia
artifact keeps one model per job and type; :func:`single_gpu_throughput` is the 1-GPU
speed the artifact projects goodput across types with.

Both artifacts fit each *job's* model online from the configurations that job has run on
(:mod:`.online`, which ``pollux`` and ``sia`` use by default); the model fitted offline
here on an application's profile rows is what their ``goodput_model=offline`` uses
(fidelity table in ``docs/policies/goodput.md``).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shapeshift.model import BatchSpec, JobSpec
from shapeshift.perf.pollux.goodput import BatchLimits, GoodputGrid, PerfParams, best_batch, fit_perf_params
from shapeshift.perf.pollux.profiles import ApplicationProfile, app_name, load_profile, load_profiles

#: Where the Pollux profiles are looked for when a policy names no directory.
PROFILES_ENV = "SHAPESHIFT_POLLUX_PROFILES"


def default_profiles() -> Path:
    """``$SHAPESHIFT_POLLUX_PROFILES``, else the bundled profiles (``pollux-profiles``)."""
    from shapeshift.datasets import locate

    return locate(os.environ.get(PROFILES_ENV) or "pollux-profiles")


@functools.cache
def fitted_params(root: str, app: str, gpu_type: str | None = None) -> PerfParams:
    """The application's throughput model on ``gpu_type`` (its typed profile where there is
    one), fitted once per process (deterministic)."""
    profile = load_profile(root, app, gpu_type)
    assert profile is not None
    return fit_perf_params(profile.rows)


@functools.cache
def merged_params(root: str, app: str, gpu_types: tuple[str, ...]) -> PerfParams:
    """One throughput model fitted on the rows of every listed type's profile together:
    the Sia artifact's heterogeneity-unaware Pollux merges a job's observations across
    types (``job.py``, ``h_unaware``). Types without their own profile add the untyped
    one's rows (once)."""
    profiles = {load_profile(root, app, t) for t in gpu_types} or {load_profile(root, app, None)}
    ordered = sorted(profiles, key=lambda p: p.gpu_type or "")  # type: ignore[union-attr]
    rows = [row for profile in ordered for row in profile.rows]  # type: ignore[union-attr]
    return fit_perf_params(rows)


@functools.cache
def single_gpu_throughput(root: str, app: str, gpu_type: str | None) -> float:
    """Examples/s of one GPU of ``gpu_type`` as the Sia artifact rates a type
    (``cluster.py``, ``compute_throughputs``): the largest measured local batch over the
    largest step time among the 1-GPU rows of the type's ``placements`` file."""
    profile = load_profile(root, app, gpu_type)
    assert profile is not None
    rows = [r for r in profile.rows if r.replicas == 1] or profile.rows
    return max(r.local_bsz for r in rows) / max(r.step for r in rows)


@functools.lru_cache(maxsize=4096)
def _grid(
    params: PerfParams, limits: BatchLimits, adaptive: bool, gpn: int, max_r: int, cap_total: bool = True
) -> GoodputGrid:
    """Columns r = 1..max_r packed on ceil(r / gpn) nodes, then r = 1..max_r on one node."""
    r = np.arange(1, max_r + 1)
    nodes = np.concatenate([np.ceil(r / gpn), np.ones(max_r)])
    return GoodputGrid(params, limits, nodes, np.concatenate([r, r]), adaptive, cap_total)


@functools.lru_cache(maxsize=4096)
def _one(
    params: PerfParams, limits: BatchLimits, adaptive: bool, nodes: int, replicas: int, cap_total: bool = True
) -> GoodputGrid:
    """The grid of one (nodes, replicas) column: a job re-chooses its batch at every epoch
    end on the same GPUs with the same model, only its noise changing."""
    return GoodputGrid(params, limits, nodes, replicas, adaptive, cap_total)


@functools.lru_cache(maxsize=4096)
def _shapes(
    params: PerfParams,
    limits: BatchLimits,
    adaptive: bool,
    gpn: int,
    max_r: int,
    max_nodes: int,
    cap_total: bool = True,
) -> tuple[GoodputGrid, np.ndarray, np.ndarray]:
    """The grid of every (k nodes, r GPUs) that k nodes of ``gpn`` GPUs can hold, each
    node at least one GPU, and its k and r."""
    k, r = shape_pairs(gpn, max_r, max_nodes)
    return GoodputGrid(params, limits, k, r, adaptive, cap_total), k, r


def shape_pairs(gpn: int, max_r: int, max_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(k, r) for r = 1..max_r and ``ceil(r / gpn) <= k <= min(r, max_nodes)``."""
    r = np.arange(1, max_r + 1)
    k = np.arange(1, max_nodes + 1)
    kk, rr = np.meshgrid(k, r, indexing="ij")
    ok = (kk <= rr) & (kk * gpn >= rr)
    return kk[ok], rr[ok]


@dataclass(frozen=True)
class JobGoodput:
    """One job's goodput table: ``goodput(nodes, replicas)`` at the best batch for each."""

    params: PerfParams | None
    grad: tuple[float, float]
    limits: BatchLimits
    adaptive: bool
    #: :class:`~shapeshift.perf.pollux.goodput.GoodputGrid`'s ``cap_total``.
    cap_total: bool = True

    def best(self, nodes, replicas):  # type: ignore[no-untyped-def]
        """(goodput in examples/s at the initial batch, batch) per (nodes, replicas)."""
        if self.params is None:  # not a Pollux application: linear in replicas
            r = np.atleast_1d(np.asarray(replicas, float))
            return r.copy(), np.full(r.shape, self.limits.init, dtype=int)
        if isinstance(nodes, int) and isinstance(replicas, int):  # one column: its grid is reused
            return _one(self.params, self.limits, self.adaptive, nodes, replicas, self.cap_total).evaluate(self.grad)
        return best_batch(self.params, self.grad, self.limits, nodes, replicas, self.adaptive, self.cap_total)

    def table(self, gpn: int, max_r: int) -> tuple[np.ndarray, np.ndarray]:
        """Best goodput for r = 1..max_r GPUs packed (``ceil(r / gpn)`` nodes), then for
        r = 1..max_r on one node (the fair-share base); cached per application."""
        if self.params is None:
            r = np.arange(1, max_r + 1, dtype=float)
            return np.concatenate([r, r]), np.full(2 * max_r, self.limits.init, dtype=int)
        return _grid(self.params, self.limits, self.adaptive, gpn, max_r, self.cap_total).evaluate(self.grad)

    def by_shape(self, gpn: int, max_r: int, max_nodes: int) -> np.ndarray:
        """Best goodput ``out[k, r]`` on r GPUs spread over k nodes of ``gpn`` GPUs (0 where
        k nodes cannot hold r GPUs, or k or r is 0); cached per application."""
        out = np.zeros((max_nodes + 1, max_r + 1))
        if self.params is None:
            k, r = shape_pairs(gpn, max_r, max_nodes)
            out[k, r] = r
            return out
        grid, k, r = _shapes(self.params, self.limits, self.adaptive, gpn, max_r, max_nodes, self.cap_total)
        out[k, r] = grid.evaluate(self.grad)[0]
        return out


class GoodputKnowledge:
    """Fitted models per application under ``root``; ``job(...)`` builds a job's table."""

    def __init__(self, root: str | Path | None):
        from shapeshift.datasets import locate

        if root and not locate(root).is_dir():
            from shapeshift.errors import InputError

            raise InputError(f"Pollux profiles directory {root} not found", field="profiles")
        found = locate(root) if root else default_profiles()
        self.root = str(found.resolve()) if found is not None and found.is_dir() else None
        self.apps: dict[str, ApplicationProfile] = load_profiles(self.root) if self.root else {}

    def job(
        self,
        spec: JobSpec,
        batch_now: int | None,
        progress: float,
        gpu_type: str | None = None,
        merged: tuple[str, ...] | None = None,
        fitted: PerfParams | None = None,
    ) -> JobGoodput:
        """``spec``'s goodput table at ``progress`` (examples at its initial batch) on
        ``gpu_type``, with the noise it reports at ``batch_now`` (its current batch; its own
        size when not running). ``merged``: one model over these types' profiles together
        (:func:`merged_params`) with the untyped batch limits, for a policy blind to types.
        ``fitted``: the job's own model (:mod:`.online`) instead of the application's."""
        app = self.apps.get(app_name(spec.model))
        batch = spec.batch or BatchSpec(1)
        if app is None or spec.batch is None or self.root is None:
            return JobGoodput(None, (0.0, 0.0), BatchLimits(1, 1, 1, 1), False)
        typed = load_profile(self.root, app.name, None if merged else gpu_type) or app
        size = batch_now or batch.size
        epoch = app.epoch_of(progress / app.init_batch + 1e-9)
        grad = app.grad_stats(size, epoch)
        min_local, max_local = batch.min_local, batch.max_local
        if typed.gpu_type is not None:  # the type's own memory limits
            min_local, max_local = min(typed.min_local, typed.max_local), typed.max_local
        if batch.adaptive:
            limits = BatchLimits(batch.initial, batch.max_size, min_local, max_local)
        else:  # a fixed job evaluates its own batch only
            limits = BatchLimits(batch.size, batch.size, 1, max_local)
        if fitted is not None:
            params = fitted
        elif merged:
            params = merged_params(self.root, app.name, tuple(sorted(merged)))
        else:
            params = fitted_params(self.root, app.name, typed.gpu_type)
        return JobGoodput(params, grad, limits, batch.adaptive)

    def type_ratio(self, spec: JobSpec, gpu_type: str | None, source: str | None) -> float:
        """1-GPU throughput of ``spec``'s application on ``gpu_type`` over that on
        ``source`` (the Sia artifact's ``cluster_throughput_ratios``); 1 for other jobs."""
        app = self.apps.get(app_name(spec.model))
        if app is None or self.root is None:
            return 1.0
        return single_gpu_throughput(self.root, app.name, gpu_type) / single_gpu_throughput(
            self.root, app.name, source
        )
