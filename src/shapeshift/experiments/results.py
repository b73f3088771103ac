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

from shapeshift.analysis.metrics import WALL_TIME_KEYS
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


def write_results(out: Path, plans: list[RunPlan], ids: list[str]) -> pd.DataFrame:
    """Write ``results.parquet`` and ``results.csv`` (atomically) and return the table."""
    frame = _tidy(pd.DataFrame(collect_rows(out, plans, ids)))
    for name, writer in (
        ("results.parquet", lambda p: frame.to_parquet(p, index=False)),
        ("results.csv", lambda p: frame.to_csv(p, index=False, lineterminator="\n")),
    ):
        tmp = out / f".{name}.tmp"
        writer(tmp)
        os.replace(tmp, out / name)
    return frame


def read_results(out: str | Path) -> pd.DataFrame:
    """The results table of an experiment directory (Parquet, else CSV)."""
    out = Path(out)
    if (out / "results.parquet").is_file():
        return pd.read_parquet(out / "results.parquet")
    return pd.read_csv(out / "results.csv")
