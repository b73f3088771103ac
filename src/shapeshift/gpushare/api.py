"""``ss.fill``: the paper's fill experiment from Python, exactly as ``shapeshift fill`` runs it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from shapeshift.errors import InputError
from shapeshift.gpushare.fill import FillRun, check_inflate, run_fill
from shapeshift.gpushare.openb import read_nodes, read_pods
from shapeshift.gpushare.placement import PLACEMENTS
from shapeshift.gpushare.report import run_curve, summary, write_runs


@dataclass(frozen=True, eq=False)
class FillResult:
    """Runs of one or more placements on one seed; ``curves`` has a ``placement`` column."""

    runs: tuple[FillRun, ...]
    curves: pd.DataFrame
    summaries: tuple[dict, ...]

    def table(self) -> pd.DataFrame:
        """Allocation at 100% and 130% of capacity per placement."""
        rows = []
        for s in self.summaries:
            rows.append(
                {
                    "placement": s["placement"],
                    "allocated_pct@100": (s["at_100"] or {}).get("allocated_pct"),
                    "allocated_pct@130": (s["at_130"] or {}).get("allocated_pct"),
                    "pods_dropped": s["pods_dropped"],
                    "seconds": s["seconds"],
                }
            )
        return pd.DataFrame(rows).set_index("placement")


def placement_names(placement: str | Sequence[str]) -> list[str]:
    names = [placement] if isinstance(placement, str) else list(placement)
    if not names:
        raise InputError("give at least one placement", field="--placement")
    for name in names:
        if name not in PLACEMENTS:
            raise InputError(f"unknown placement {name!r}; choose from {', '.join(PLACEMENTS)}", field="--placement")
    if len(set(names)) != len(names):
        raise InputError("a placement is named twice", field="--placement")
    return names


def fill(
    workload: str | Path,
    cluster: str | Path,
    placement: str | Sequence[str] = "fgd",
    *,
    inflate: float = 1.3,
    seed: int = 42,
    out: str | Path | None = None,
) -> FillResult:
    """Replay an openb pod list (``workload``) onto an openb node list (``cluster``): pods
    arrive in a seeded shuffle, then resampled copies until ``inflate`` x the GPU capacity
    has arrived; each is placed by ``placement`` or dropped. With ``out``, writes
    curve.csv, summary.json and fill.png there."""
    names = placement_names(placement)
    inflate = check_inflate(inflate)
    nodes = read_nodes(cluster)
    pods = read_pods(workload)
    runs = tuple(run_fill(nodes, pods, name, inflate=inflate, seed=seed) for name in names)
    frames, summaries = [], []
    for run in runs:
        rows = run_curve(run)
        frames.append(pd.DataFrame(rows).assign(placement=run.placement))
        summaries.append(summary(run, rows))
    if out is not None:
        write_runs(Path(out), list(runs), f"{Path(workload).stem} on {Path(cluster).stem}, x{inflate:g}, seed {seed}")
    curves = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return FillResult(runs, curves, tuple(summaries))
