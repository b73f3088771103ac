"""What a tuning run leaves behind: the results table, a summary and a plot of the search.

``results.csv`` has one row per trial (trial, its fused group and slot, every searched
hyper-parameter, the surrogate's validation loss, its state and, for the configuration
the target trial ran, the full model's validation loss). ``summary.json`` holds only
deterministic figures, so two runs with the same inputs write it byte for byte the same;
wall-clock seconds go to ``timing.json``.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from shapeshift.tune.search import TuneResult, TuneSpec


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return "inf" if math.isinf(value) else f"{value:.6g}"


def write_results(result: TuneResult, spec: TuneSpec, out: Path) -> dict[str, Path]:
    """Write results.csv, summary.json, timing.json and search.png under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    names = list(spec.space.names)
    table = out / "results.csv"
    with table.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["trial", "group", "slot", *names, "surrogate_metric", "state", "target_metric"])
        for row in result.rows:
            writer.writerow([row.trial, row.group, row.slot, *(_number(row.params.get(n)) for n in names),
                             _number(row.surrogate_metric), row.state, _number(row.target_metric)])
    summary = {
        "model": spec.model, "trials": spec.trials, "scale": spec.scale, "fusion": result.fusion,
        "groups": result.groups, "slots": spec.slots, "sampler": spec.space.sampler,
        "optimizer": spec.space.optimizer, "steps": spec.space.steps, "seed": spec.space.seed,
        "best_params": result.best_params, "target_metric": result.target_metric,
        "target_restarts": result.target_restarts, "target_steps_wasted": result.target_steps_wasted,
        "surrogate_flops": result.surrogate_flops, "target_flops": result.target_flops,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    timing = {"surrogate_seconds": round(result.surrogate_seconds, 3),
              "target_seconds": round(result.target_seconds, 3)}
    (out / "timing.json").write_text(json.dumps(timing, indent=2) + "\n")
    plot = out / "search.png"
    _plot(result, spec, plot)
    return {"table": table, "summary": out / "summary.json", "plot": plot}


def _plot(result: TuneResult, spec: TuneSpec, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    finite = [r for r in result.rows if math.isfinite(r.surrogate_metric)]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ax = axes[0]
    ax.scatter([r.trial for r in finite], [r.surrogate_metric for r in finite], s=18, label="surrogate trial")
    best, line = math.inf, []
    for r in result.rows:
        best = min(best, r.surrogate_metric)
        line.append(best)
    ax.step([r.trial for r in result.rows], line, where="post", color="C1", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("validation loss (surrogate)")
    ax.set_title(f"{spec.model}: surrogate width/{spec.scale}, F={result.fusion}")
    ax.grid(alpha=0.3)
    ax.legend()
    ax = axes[1]
    ax.scatter([r.params["lr"] for r in finite], [r.surrogate_metric for r in finite], s=18,
               label=f"surrogate (width/{spec.scale})")
    targets = [r for r in result.rows if r.target_metric is not None]
    ax.scatter([r.params["lr"] for r in targets], [r.target_metric for r in targets], marker="*", s=120,
               color="C3", label="target (full model)")
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("validation loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
