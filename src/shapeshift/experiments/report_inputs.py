"""What a report can be built from: an experiment's results table, or the output
directory of ``compare`` or ``simulate``, read into the same tidy frame (one row per run:
``run_id``, labels, ``seed``, every summary metric, and ``run_dir`` where the run's files
are, relative to the directory).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from shapeshift.errors import InputError
from shapeshift.experiments.results import read_results

_EXPECTED = (
    "results.parquet or results.csv (an experiment), compare.csv (compare --out) or summary.json (simulate --out); "
    "run `shapeshift experiment run FILE --out DIR`, `shapeshift compare --out DIR` or `shapeshift simulate --out DIR` "
    "first"
)


def _summary(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read a run summary: {exc}", path=str(path)) from None
    if not isinstance(data, dict) or "avg_jct" not in data:
        raise InputError("not a Shapeshift summary.json (no avg_jct)", path=str(path))
    return data


def _row(base: Path, run: Path, label: str) -> dict[str, Any]:
    summary = _summary(run / "summary.json")
    row = {
        "run_id": label if run in (base, base / label) else f"{label}@{run.name}",
        "workload": summary.get("workload"),
        "cluster": f"{summary.get('cluster_gpus')} GPUs",
        "policy": label,
        "policy_name": summary.get("policy"),
        "seed": summary.get("seed", 0),
        "run_dir": str(run.relative_to(base)) if run != base else ".",
    }
    row.update({k: v for k, v in summary.items() if k not in row and k not in ("policy", "workload")})
    return row


def _from_outputs(directory: Path) -> pd.DataFrame:
    rows = []
    if (directory / "compare.csv").is_file():
        labels = pd.read_csv(directory / "compare.csv", dtype={"policy": str})["policy"].tolist()
        for label in labels:
            folder = directory / label
            runs = sorted(folder.glob("seed*/summary.json")) or [folder / "summary.json"]
            rows += [_row(directory, run.parent, label) for run in runs if run.is_file()]
    else:
        rows.append(_row(directory, directory, _summary(directory / "summary.json").get("policy", "run")))
    return pd.DataFrame(rows)


def read_any_results(directory: Path) -> pd.DataFrame:
    """The runs of ``directory`` as one frame, or an ``InputError`` saying what was expected."""
    if not directory.is_dir():
        raise InputError(f"not a directory; expected one holding {_EXPECTED}", path=str(directory))
    if (directory / "results.parquet").is_file() or (directory / "results.csv").is_file():
        return read_results(directory)
    if (directory / "compare.csv").is_file() or (directory / "summary.json").is_file():
        return _from_outputs(directory)
    raise InputError(f"nothing to report on; expected {_EXPECTED}", path=str(directory))
