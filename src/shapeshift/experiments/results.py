"""The tidy results table: one row per run, its labels and axis values, then every
``summary.json`` metric.

Rows follow the experiment's run order (not completion order) and values are read back
from the run directories, so the same experiment gives byte-identical tables whatever
the number of workers and whether runs were cached; only the wall-time columns
(``WALL_TIME_COLUMNS``) measure the machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from shapeshift.analysis.aggregate import mean_ci95
from shapeshift.analysis.metrics import WALL_TIME_KEYS
from shapeshift.errors import InputError
from shapeshift.experiments.cache import is_finished
from shapeshift.experiments.expand import RunPlan

WALL_TIME_COLUMNS = WALL_TIME_KEYS
#: summary.json keys already present as labels (``policy`` there is the registry name).
_SHADOWED = {"policy", "workload", "run_id", "seed"}


def collect_rows(out: Path, plans: list[RunPlan], ids: list[str]) -> list[dict[str, Any]]:
    rows = []
    for plan, rid in zip(plans, ids, strict=True):
        run_dir = out / "runs" / rid
        if not is_finished(run_dir):
            continue
        summary = json.loads((run_dir / "summary.json").read_text())
        row: dict[str, Any] = {"run_id": rid, **plan.labels()}
        row.update({k: v for k, v in summary.items() if k not in _SHADOWED})
        rows.append(row)
    return rows


def _tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """Make object columns Parquet-safe: a column mixing types (30 and "helios") becomes text."""
    for column in frame.columns:
        if frame[column].dtype == object:
            kinds = {type(v) for v in frame[column] if v is not None and not (isinstance(v, float) and pd.isna(v))}
            if len(kinds) > 1:
                frame[column] = frame[column].map(lambda v: None if v is None else str(v))
    return frame


#: Figures ``results_mean.csv`` aggregates over seeds, with a 95% interval each.
MEAN_METRICS = ("avg_jct", "p50_jct", "p99_jct", "avg_queue", "avg_responsiveness", "makespan", "gpu_utilization")


def mean_over_seeds(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per setting (every label but the seed): the mean of each of ``MEAN_METRICS``
    over seeds and the half-width of its 95% interval (``<metric>_ci95``, empty for one seed)."""
    labels = [c for c in ("workload", "cluster", "policy", "policy_name") if c in frame.columns]
    keys = labels + [c for c in frame.columns if "." in c or c == "round"]  # and the sweep axes
    rows = []
    for key, part in frame.groupby(keys, dropna=False, sort=False):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row["seeds"] = len(part)
        for metric in (m for m in MEAN_METRICS if m in part.columns):
            row[metric], row[f"{metric}_ci95"] = mean_ci95(part[metric].tolist())
        rows.append(row)
    return pd.DataFrame(rows)


def write_results(out: Path, plans: list[RunPlan], ids: list[str]) -> pd.DataFrame:
    """Write ``results.parquet``, ``results.csv`` and ``results_mean.csv`` (atomically) and
    return the table."""
    frame = _tidy(pd.DataFrame(collect_rows(out, plans, ids)))
    means = mean_over_seeds(frame) if not frame.empty else pd.DataFrame()
    for name, writer in (
        ("results.parquet", lambda p: frame.to_parquet(p, index=False)),
        ("results.csv", lambda p: frame.to_csv(p, index=False, lineterminator="\n")),
        ("results_mean.csv", lambda p: means.to_csv(p, index=False, lineterminator="\n")),
    ):
        tmp = out / f".{name}.tmp"
        writer(tmp)
        os.replace(tmp, out / name)
    return frame


def read_results(out: str | Path) -> pd.DataFrame:
    """The results table of an experiment directory (Parquet, else CSV). A damaged table is
    an ``InputError`` naming it (re-running the experiment rewrites it from the run
    directories)."""
    out = Path(out)
    path = out / "results.parquet" if (out / "results.parquet").is_file() else out / "results.csv"
    try:
        return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as exc:  # pyarrow and pandas raise many kinds for a damaged file
        raise InputError(
            f"cannot read the results table ({type(exc).__name__}: {exc}); re-run the experiment to rewrite it",
            path=str(path),
        ) from None
