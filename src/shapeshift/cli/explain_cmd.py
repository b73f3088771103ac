"""``shapeshift explain``: read an interpretable model, or fit, choose and explain one from a trace.

* ``shapeshift explain MODEL.json --out DIR``: a saved Primo model's global explanation
  (``global.json``, ``global.png``).
* ``shapeshift explain --trace TRACE --target duration --out DIR``: Primo on a trace with
  a time-ordered split (``shapeshift.predict.primo.trace``): the chosen model
  (``model.json``), test MAE/R^2 and the search (``metrics.json``), global and local
  explanations of the first test jobs, and their nearest counterfactuals across the
  training median (``counterfactuals.json``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from shapeshift.cli.common import console, guarded, output_dir, progress_bar, show_progress
from shapeshift.errors import InputError


def _positive(value: float | None, flag: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InputError(f"{flag} must be a finite number > 0, got {value}", field=flag)


@guarded
def command(
    model: Annotated[Path | None, typer.Argument(help="A saved Primo model (JSON) to explain.")] = None,
    out: Annotated[Path | None, typer.Option(help="Directory for the explanation files.")] = None,
    trace: Annotated[Path | None, typer.Option(help="Fit, choose and explain a model on this trace instead.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="Trace format (detected when omitted).")] = None,
    target: Annotated[str, typer.Option(help="What to predict from the trace: duration.")] = "duration",
    trials: Annotated[int, typer.Option(min=1, max=500, help="Bayesian-optimisation trials.")] = 20,
    kinds: Annotated[str, typer.Option("--model-kinds", help="Model kinds to search: pram,prdt.")] = "pram,prdt",
    test_fraction: Annotated[float, typer.Option(help="Latest share of submissions held out for testing.")] = 0.2,
    max_complexity: Annotated[float | None, typer.Option(help="Size budget (complexity) of the chosen model.")] = None,
    outer_bags: Annotated[int, typer.Option(min=1, max=64, help="PrAM bagging rounds per fit.")] = 2,
    epoch: Annotated[float, typer.Option(help="UNIX time of the trace's first submission (calendar features).")] = 0.0,
    rows: Annotated[int, typer.Option(min=1, max=1000, help="Test jobs explained locally.")] = 5,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the search and the models.")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    """Explain a saved Primo model, or fit, choose and explain one on a trace (--trace)."""
    if out is None:
        raise InputError("--out is required", field="--out")
    if (model is None) == (trace is None):
        raise InputError("give either a MODEL.json or --trace TRACE", field="--trace")
    _positive(max_complexity, "--max-complexity")
    if not math.isfinite(epoch):
        raise InputError("--epoch must be finite", field="--epoch")
    if model is not None:
        _explain_saved(model, out, quiet)
        return
    assert trace is not None
    from shapeshift.runs.inputs import resolve_workload

    chosen = tuple(k.strip() for k in kinds.split(",") if k.strip())
    if not chosen or any(k not in ("pram", "prdt") for k in chosen):
        raise InputError(f"--model-kinds takes pram and/or prdt, got {kinds!r}", field="--model-kinds")
    if not 0 < test_fraction < 1:
        raise InputError(f"--test-fraction must be in (0, 1), got {test_fraction}", field="--test-fraction")
    workload = resolve_workload(trace, fmt)
    output_dir(out)
    _explain_trace(
        workload, out, target, trials, chosen, test_fraction, max_complexity, outer_bags, epoch, rows, seed, quiet
    )


def _explain_saved(path: Path, out: Path, quiet: bool) -> None:
    from shapeshift.predict.primo.persist import load
    from shapeshift.predict.primo.report import write_explanations

    fitted, meta = load(path)
    output_dir(out)
    values = meta.get("values") if isinstance(meta.get("values"), dict) else None
    written = write_explanations(fitted, out, title=path.stem, extra={"meta": meta}, value_names=values)
    if not quiet:
        console.print(
            f"{fitted.kind}: complexity {fitted.complexity():.0f}; wrote {', '.join(str(p) for p in written)}",
            highlight=False,
        )


def _explain_trace(
    workload: Any,
    out: Path,
    target: str,
    trials: int,
    kinds: tuple[str, ...],
    test_fraction: float,
    max_complexity: float | None,
    outer_bags: int,
    epoch: float,
    rows: int,
    seed: int,
    quiet: bool,
) -> None:
    import numpy as np

    from shapeshift.predict.primo.base import require_explain_extra
    from shapeshift.predict.primo.counterfactual import CounterfactualFinder
    from shapeshift.predict.primo.persist import save
    from shapeshift.predict.primo.report import write_explanations
    from shapeshift.predict.primo.select import Budget
    from shapeshift.predict.primo.trace import fit_trace

    require_explain_extra("optuna")
    with progress_bar("choosing a model", show_progress(quiet)) as update:
        fit = fit_trace(
            workload,
            target=target,
            test_fraction=test_fraction,
            n_trials=trials,
            seed=seed,
            kinds=kinds,
            epoch=epoch,
            budget=Budget(max_complexity=max_complexity),
            outer_bags=outer_bags,
            progress=update,
        )
    table, chosen = fit.table, fit.selection.model
    meta = {"target": target, "transform": "log1p", "trace": workload.name, "epoch": epoch, "values": table.values}
    save(chosen, out / "model.json", meta=meta)
    (out / "metrics.json").write_text(json.dumps(fit.metrics, indent=1, sort_keys=True) + "\n")
    shown = table.x.iloc[fit.test[:rows]]
    write_explanations(
        chosen, out, shown, title=f"{workload.name}: log1p({target})", extra={"meta": meta}, value_names=table.values
    )
    threshold = float(np.median(table.y[fit.train]))
    finder = CounterfactualFinder(chosen, table.x.iloc[fit.train], threshold=threshold)
    answers = finder.nearest(shown.to_numpy())
    (out / "counterfactuals.json").write_text(
        json.dumps(
            {
                "threshold_log1p": threshold,
                "threshold_seconds": float(np.expm1(threshold)),
                "rows": [[c.to_dict() for c in found] for found in answers],
            },
            indent=1,
        )
        + "\n"
    )
    if quiet:
        return
    m, s = fit.metrics["test"], fit.metrics["selection"]
    console.print(
        f"chose {s['kind']} (complexity {s['complexity']:.0f}) in {s['search_seconds']:.1f} s "
        f"over {s['trials']} trials; "
        f"test on {fit.metrics['test_jobs']:,} later jobs: MAE {m['mae_log']:.3f} log1p-s "
        f"({m['mae_hours']:.2f} h), R^2 {m['r2_log']:.3f}",
        highlight=False,
    )
    if fit.metrics["dropped_features"]:
        console.print(
            f"features with one value, dropped: {', '.join(fit.metrics['dropped_features'])}", highlight=False
        )
    console.print(f"wrote {out}/model.json, metrics.json, global.*, local.*, counterfactuals.json", highlight=False)
