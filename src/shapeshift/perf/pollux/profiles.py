"""One Pollux application's measured profiles: step times, gradient statistics, epochs.

The Pollux artifact (petuum/adaptdl, branch ``osdi21-artifact``, ``simulator/``) ships
per application ``placements.csv`` (step and sync time per placement and local batch),
``scalability.csv`` (larger placements by node and replica count) and
``validation-<batch>.csv`` (per epoch: progress in steps at the initial batch, the
iteration reached at that batch, the validation metric and the gradient statistics
``grad_sqr``/``grad_var``). This module answers what the artifact's ``Application``
answers (``simulator/applications.py``), by the same interpolations:

* step/sync time: linear in the local batch within a measured placement (placements are
  compared as the smallest rotation of their per-node counts), else linear over
  (nodes, replicas, local batch) on both tables (``get_throughput``); a local batch
  outside the measured range is clamped to it (the artifact would stop with an error);
* gradient statistics at a batch and epoch: linear between the two validated batch
  sizes around it (``get_grad_stats``);
* epoch boundaries: epoch ``e`` starts at the smallest progress any validation run
  reached at its ``e``-th row (``get_progress``); a job is done after ``max_epochs``.

Progress here is in *examples at the initial batch size* (the artifact's progress, which
counts steps at the initial batch, times that batch).
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from shapeshift.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

#: Training length (epochs) and per-GPU batch cap per application, as the artifact's
#: ``APPLICATIONS`` table configures them (``simulator/applications.py``).
APPLICATIONS: dict[str, dict[str, int | None]] = {
    "bert": {"max_epochs": 2, "max_local_bsz": None},
    "cifar10": {"max_epochs": 100, "max_local_bsz": None},
    "deepspeech2": {"max_epochs": 80, "max_local_bsz": None},
    "imagenet": {"max_epochs": 90, "max_local_bsz": None},
    "ncf": {"max_epochs": 10, "max_local_bsz": None},
    "yolov3": {"max_epochs": 50, "max_local_bsz": 8},
}
#: Per-GPU batch caps below what a type's profile measured, as the Sia artifact sets them
#: (``sia-simulator/applications.py``, ``Application.__init__``: DeepSpeech2 on the RTX 2080Ti).
MEMORY_LIMITS: dict[tuple[str, str], int] = {("deepspeech2", "rtx"): 57}
#: Model names of Pollux jobs carry this namespace, so ``pollux/bert`` never picks up
#: another source's ``bert`` (the Rubick catalog entry).
NAMESPACE = "pollux/"


def typed_file(kind: str, gpu_type: str | None) -> str:
    """``placements-<type>.csv`` for a GPU type, ``placements.csv`` for none."""
    return f"{kind}-{gpu_type}.csv" if gpu_type else f"{kind}.csv"


def app_name(model: str) -> str:
    """``pollux/cifar10`` -> ``cifar10``; a bare name is returned unchanged."""
    return model.removeprefix(NAMESPACE)


def canonical_placement(placement: tuple[int, ...]) -> str:
    """Per-node GPU counts as the artifact keys them: the smallest rotation, as digits."""
    p = tuple(g for g in placement if g > 0)
    return "".join(map(str, min(p[i:] + p[:i] for i in range(len(p)))))


@dataclass(frozen=True)
class Row:
    """One measured step: ``step`` and ``sync`` seconds at ``local_bsz`` on a placement."""

    nodes: int
    replicas: int
    local_bsz: float
    step: float
    sync: float
    placement: str = ""


#: The columns each profile table must have (the artifact's ``applications.py`` reads them).
PLACEMENT_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")
SCALABILITY_COLUMNS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
VALIDATION_COLUMNS = ("progress", "grad_sqr", "grad_var")


def read_table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """One profile table, refused with its path and the missing column or the bad value
    named (never a traceback): the columns a Pollux profile needs, every number finite."""
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read this Pollux profile table: {exc}", path=str(path)) from None
    for column in columns:
        if column not in table.columns:
            raise InputError("a Pollux profile table needs this column", path=str(path), field=column)
        if column == "placement":  # per-node GPU counts as digits: only present
            bad = table[column].isna()
        else:
            values = pd.to_numeric(table[column], errors="coerce")
            bad = values.isna() | ~np.isfinite(values)
        if bad.any():
            line = int(np.flatnonzero(bad.to_numpy())[0]) + 2  # 1-based, after the header
            raise InputError("not a finite number", path=str(path), line=line, field=column)
    return table


class ApplicationProfile:
    """Measured behaviour of one application (see the module docstring)."""

    def __init__(self, directory: Path, name: str | None = None, gpu_type: str | None = None):
        self.name = name or directory.name
        self.gpu_type = gpu_type
        settings = APPLICATIONS.get(self.name, {})
        placements = read_table(directory / typed_file("placements", gpu_type), PLACEMENT_COLUMNS)
        scalability = read_table(directory / typed_file("scalability", gpu_type), SCALABILITY_COLUMNS)
        self.rows: list[Row] = [
            Row(len(str(p)), sum(int(c) for c in str(p)), float(b), float(s), float(y), str(p))
            for p, b, s, y in zip(
                placements["placement"],
                placements["local_bsz"],
                placements["step_time"],
                placements["sync_time"],
                strict=True,
            )
        ]
        self.scalability_rows: list[Row] = [
            Row(int(n), int(r), float(b), float(s), float(y))
            for n, r, b, s, y in zip(
                scalability["num_nodes"],
                scalability["num_replicas"],
                scalability["local_bsz"],
                scalability["step_time"],
                scalability["sync_time"],
                strict=True,
            )
        ]
        self.validation = {
            int(p.stem.split("-")[-1]): read_table(p, VALIDATION_COLUMNS)
            for p in sorted(directory.glob("validation-*.csv"), key=lambda p: int(p.stem.split("-")[-1]))
            if p.stem.split("-")[-1].isdigit()
        }
        if not self.validation:
            raise InputError(
                "no validation-<batch>.csv here: a Pollux profile needs at least one (the gradient "
                "statistics and epochs at that batch size)",
                path=str(directory),
            )
        self.batch_sizes = sorted(self.validation)
        self.init_batch = self.batch_sizes[0]
        self.max_batch = self.batch_sizes[-1]
        self.min_local = int(min(r.local_bsz for r in self.rows))
        # The application table's per-GPU cap is the Pollux simulator's (untyped profiles);
        # the Sia artifact builds its typed applications without one, so a type's limit is
        # the largest local batch it measured (``applications.py``, ``Application.__init__``:
        # ``max_local_bsz or self.placements.local_bsz.max()``; YOLOv3 16/32/8 on aws/dgx-ext/rtx).
        table_cap = settings.get("max_local_bsz") if gpu_type is None else None
        self.max_local = int(table_cap or max(r.local_bsz for r in self.rows))
        if (self.name, gpu_type) in MEMORY_LIMITS:
            self.max_local = min(self.max_local, MEMORY_LIMITS[self.name, gpu_type])
        self.max_epochs = int(settings.get("max_epochs") or min(len(v) for v in self.validation.values()))
        self._grad = {
            b: (v["grad_sqr"].to_numpy(float), v["grad_var"].to_numpy(float)) for b, v in self.validation.items()
        }
        progress = [v["progress"].to_numpy(float) for v in self.validation.values()]
        # boundaries[e] = progress (init-batch steps) at which epoch e starts; e = 0..max_epochs
        self.boundaries = [0.0] + [float(min(p[e - 1] for p in progress)) for e in range(1, self.max_epochs + 1)]
        self._by_placement: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        grouped: dict[str, list[Row]] = {}
        for r in self.rows:
            grouped.setdefault(canonical_placement(tuple(int(c) for c in r.placement)), []).append(r)
        for key, rows in grouped.items():
            rows.sort(key=lambda r: r.local_bsz)
            self._by_placement[key] = (
                np.array([r.local_bsz for r in rows]),
                np.array([r.step for r in rows]),
                np.array([r.sync for r in rows]),
            )
        self._nd = None

    # ------------------------------------------------------------- throughput
    def step_sync(self, placement: tuple[int, ...], local_bsz: float) -> tuple[float, float]:
        """Measured (step, sync) seconds of one optimiser step without accumulation."""
        return self._step_sync(canonical_placement(placement), local_bsz)

    def local_cap(self, placement: tuple[int, ...]) -> int:
        """The largest per-GPU batch a job runs on ``placement``.

        Untyped (the Pollux simulator): the application's limit, ``max_local``. Typed (the
        Sia artifact's ``placements-<type>.csv``): the largest local batch measured on that
        placement, else on any larger configuration of ``scalability-<type>.csv``, and no
        more than the largest measured on any placement of as many GPUs
        (``Application.get_max_local_bsz`` and the correction in ``Job.update_local_bsz``,
        ``sia-simulator/applications.py`` and ``job.py``). There the type-wide limit
        (``max_local``, DeepSpeech2 at most 57 on ``rtx``) bounds only what the scheduler
        assumes of a job, not the batch the job runs at.
        """
        if self.gpu_type is None:
            return self.max_local
        return self._local_cap(canonical_placement(placement))

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one profile per application, kept for the run
    def _local_cap(self, key: str) -> int:
        nodes, replicas = len(key), sum(int(c) for c in key)
        found = self._by_placement.get(key)
        if found is not None:
            cap = float(found[0][-1])
        else:
            larger = [r.local_bsz for r in self.scalability_rows if r.nodes >= nodes and r.replicas >= replicas]
            cap = max(larger) if larger else float(self.max_local)
        same = [r.local_bsz for r in self.rows if r.replicas == replicas]
        return int(min(cap, max(same)) if same else cap)

    def measured(self, placement: tuple[int, ...], local_bsz: float) -> bool:
        """False when the placement was measured but not at this local batch (the artifact's
        interpolation would fail there); unmeasured placements are interpolated."""
        found = self._by_placement.get(canonical_placement(placement))
        return found is None or bool(found[0][0] <= local_bsz <= found[0][-1])

    @functools.lru_cache(maxsize=65536)  # noqa: B019 - one profile per application, kept for the run
    def _step_sync(self, key: str, local_bsz: float) -> tuple[float, float]:
        found = self._by_placement.get(key)
        if found is not None:
            x, step, sync = found
            b = min(max(local_bsz, x[0]), x[-1])
            return float(np.interp(b, x, step)), float(np.interp(b, x, sync))
        nodes, replicas = min(len(key), 16), sum(int(c) for c in key)
        b = min(max(local_bsz, self.min_local), max(r.local_bsz for r in self.rows))
        step, sync = self._interpolator()([[nodes, replicas, b]])[0]
        if not (math.isfinite(step) and math.isfinite(sync)):
            step, sync = self._nearest(nodes, replicas, b)
        return float(step), float(sync)

    def _interpolator(self):  # type: ignore[no-untyped-def]
        if self._nd is None:
            from scipy.interpolate import LinearNDInterpolator

            means: dict[tuple[int, int, float], list[tuple[float, float]]] = {}
            for r in self.rows:
                means.setdefault((r.nodes, r.replicas, r.local_bsz), []).append((r.step, r.sync))
            pts = [
                (*k, float(np.mean([v[0] for v in vs])), float(np.mean([v[1] for v in vs]))) for k, vs in means.items()
            ]
            pts += [(r.nodes, r.replicas, r.local_bsz, r.step, r.sync) for r in self.scalability_rows]
            arr = np.array(pts, dtype=float)
            self._points = arr
            self._nd = LinearNDInterpolator(arr[:, :3], arr[:, 3:])
        return self._nd

    def _nearest(self, nodes: int, replicas: int, local_bsz: float) -> tuple[float, float]:
        """Outside the measured hull: the closest measured configuration (scaled coordinates)."""
        arr = self._points
        scale = np.maximum(arr[:, :3].max(axis=0), 1.0)
        d = (((arr[:, :3] - [nodes, replicas, local_bsz]) / scale) ** 2).sum(axis=1)
        i = int(np.argmin(d))
        return float(arr[i, 3]), float(arr[i, 4])

    # ------------------------------------------------------------- efficiency
    def epoch_of(self, progress_steps: float) -> int:
        """The epoch a job is in at ``progress_steps`` (init-batch steps)."""
        return min(bisect.bisect_right(self.boundaries, progress_steps) - 1, self.max_epochs - 1)

    def grad_stats(self, batch_size: float, epoch: int) -> tuple[float, float]:
        """(grad_sqr, grad_var) measured at ``batch_size`` in ``epoch`` (interpolated over batch)."""
        sizes = self.batch_sizes
        b = min(max(batch_size, sizes[0]), sizes[-1])
        hi = bisect.bisect_left(sizes, b)
        upper = sizes[hi]
        lower = upper if upper == b else sizes[hi - 1]
        e = min(epoch, len(self._grad[lower][0]) - 1, len(self._grad[upper][0]) - 1)
        ls, lv = self._grad[lower][0][e], self._grad[lower][1][e]
        if lower == upper:
            return float(ls), float(lv)
        us, uv = self._grad[upper][0][e], self._grad[upper][1][e]
        w = (b - lower) / (upper - lower)
        return float(ls + w * (us - ls)), float(lv + w * (uv - lv))

    @property
    def total_steps(self) -> float:
        """Progress (init-batch steps) at which a job has trained ``max_epochs`` epochs."""
        return self.boundaries[self.max_epochs]


def efficiency(grad_sqr: float, grad_var: float, batch_size: float, init_batch: float) -> float:
    """Pollux statistical efficiency of ``batch_size`` relative to ``init_batch`` (OSDI'21
    §3.1; artifact ``goodput.py``, ``GoodputFunction.efficiency``): with the
    gradient noise scale ``B = init_batch * grad_var / grad_sqr``,
    ``E = (B + init_batch) / (B + batch_size)``; 1 at the initial batch."""
    scale = batch_size / init_batch
    denom = grad_var / scale + grad_sqr
    gain = (grad_var + grad_sqr) / denom if denom > 0 else 1.0
    return gain / scale


@functools.cache
def load_profile(root: str, app: str, gpu_type: str | None) -> ApplicationProfile | None:
    """``app``'s profile on ``gpu_type``: its ``placements-<type>.csv`` and
    ``scalability-<type>.csv`` where both exist (the Sia artifact's layout,
    ``sia-simulator/traces/<app>/``), else the untyped one; None for an unknown application."""
    untyped = load_profiles(root).get(app)
    if untyped is None or not gpu_type:
        return untyped
    directory = Path(root) / app
    if not all((directory / typed_file(k, gpu_type)).is_file() for k in ("placements", "scalability")):
        return untyped
    return ApplicationProfile(directory, app, gpu_type)


def typed_profiles(root: str, app: str) -> tuple[str, ...]:
    """GPU types with their own profile of ``app`` under ``root`` (sorted)."""
    directory = Path(root) / app
    found = {p.stem.removeprefix("placements-") for p in directory.glob("placements-*.csv")}
    return tuple(sorted(t for t in found if (directory / typed_file("scalability", t)).is_file()))


@functools.cache
def load_profiles(root: str) -> dict[str, ApplicationProfile]:
    """Every application under ``root`` (one directory each), by bare name."""
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"Pollux profiles directory {root} not found")
    return {d.name: ApplicationProfile(d) for d in sorted(base.iterdir()) if (d / "placements.csv").is_file()}
