"""``shapeshift perf``: fit, query and validate the Rubick performance model.

Thin by design: parse and validate arguments, call :mod:`shapeshift.perf`, print. Every
expected failure (missing file, bad column, unknown model, bad plan) becomes one line on
stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from shapeshift import datasets

if TYPE_CHECKING:  # the model (scipy) loads when a command runs, not for --help
    from shapeshift.perf.fitting import FittedModel

app = typer.Typer(help="Performance model for reconfigurable training (Rubick, Appendix A).", no_args_is_help=True)
out = Console()
err = Console(stderr=True)


def _expected() -> tuple[type[BaseException], ...]:
    from shapeshift.model import ModelError
    from shapeshift.perf.arch import UnknownModelError
    from shapeshift.perf.fitting import FitError
    from shapeshift.perf.measurements import MeasurementError

    return (MeasurementError, FitError, UnknownModelError, ModelError, ValueError, FileNotFoundError, OSError)


@contextmanager
def _boundary() -> Iterator[None]:
    """Turn expected errors into one clear line and exit code 2."""
    try:
        yield
    except _expected() as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def _load_params(path: Path, model: str) -> FittedModel:
    from shapeshift.perf.arch import get_arch
    from shapeshift.perf.fitting import FittedModel

    fitted = FittedModel.load(path)
    get_arch(model)  # unknown names fail with the list of known ones
    if fitted.model != model:
        raise ValueError(f"{path}: field 'model' is {fitted.model!r}, not {model!r}")
    return fitted


@app.command("fit")
def fit_cmd(
    measurements: Annotated[
        Path,
        typer.Option("--measurements", help="one model's placements.csv (e.g. rubick-a800-tables/gpt2/placements.csv)"),
    ],
    model: Annotated[str, typer.Option("--model", help="model name, e.g. gpt2")],
    out_path: Annotated[Path, typer.Option("--out", help="where to write params.json")],
    sample: Annotated[int, typer.Option("--sample", help="fit on this many random rows (0 = all)")] = 0,
    seed: Annotated[int, typer.Option("--seed", min=0, help="seed of the row sample")] = 0,
) -> None:
    """Fit the coefficients of one model to measured iteration times."""
    from shapeshift.perf.arch import get_arch
    from shapeshift.perf.fitting import fit
    from shapeshift.perf.measurements import read_placements

    with _boundary():
        arch = get_arch(model)
        rows = read_placements(datasets.locate(measurements), model=arch.name)
        if sample:
            if sample > len(rows):
                raise ValueError(f"--sample {sample} exceeds the {len(rows)} usable rows of {measurements}")
            rows = random.Random(seed).sample(rows, sample)
        fitted = fit(rows, arch=arch, seed=seed)
        fitted.save(out_path)
    out.print(f"fitted {arch.name} on {fitted.n_points} rows: RMSLE {fitted.rmsle:.4f} -> {out_path}")
    for note in fitted.notes:
        out.print(f"note: {note}")


@app.command("predict")
def predict_cmd(
    params: Annotated[Path, typer.Option("--params", help="params.json from 'perf fit'")],
    model: Annotated[str, typer.Option("--model", help="model name, e.g. gpt2")],
    plan: Annotated[str, typer.Option("--plan", help="ga, gc, zero-dp, zero-offload, PP/TP/DP digits, or dp=..,tp=..")],
    placement: Annotated[str, typer.Option("--placement", help="GPUs per node, e.g. 44")],
    cpus: Annotated[float, typer.Option("--cpus", help="CPU threads per GPU (per process; Offload)")] = 4.0,
) -> None:
    """Predict iteration time, throughput and per-GPU memory of one configuration."""
    from shapeshift.perf.measurements import format_placement, parse_placement, parse_plan
    from shapeshift.perf.memory import estimate_memory
    from shapeshift.perf.rubick import Config

    with _boundary():
        fitted = _load_params(params, model)
        try:
            place = parse_placement(placement)
        except ValueError as exc:
            raise ValueError(f"--placement: {exc}") from None
        try:
            the_plan = parse_plan(plan, sum(place))
        except ValueError as exc:
            raise ValueError(f"--plan: {exc}") from None
        if cpus <= 0:
            raise ValueError("--cpus must be > 0")
        t = float(fitted.predict([Config(fitted.arch, the_plan, place, cpus, fitted.node)])[0])
        mem = estimate_memory(fitted.arch, the_plan, place, fitted.node)
    out.print(f"model {fitted.model}  plan {the_plan}  placement {format_placement(place)}  cpus {cpus:g}")
    out.print(f"iteration time  {t:.4f} s")
    out.print(f"throughput      {fitted.arch.global_batch / t:.3f} samples/s")
    out.print(f"GPU memory      {mem.gpu_gb:.1f} GB of {mem.gpu_capacity_gb:.0f} GB per GPU")
    if mem.host_gb:
        out.print(f"host memory     {mem.host_gb:.1f} GB of {mem.host_capacity_gb:.0f} GB")
    out.print(f"feasible        {'yes' if mem.feasible else 'no'}")


@app.command("curve")
def curve_cmd(
    params: Annotated[Path, typer.Option("--params", help="params.json from 'perf fit'")],
    model: Annotated[str, typer.Option("--model", help="model name, e.g. gpt2")],
    resource: Annotated[str, typer.Option("--resource", help="gpus or cpus")] = "gpus",
    max_amount: Annotated[int, typer.Option("--max", help="largest amount")] = 64,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="GPUs per node of the cluster")] = 8,
    placement: Annotated[str, typer.Option("--placement", help="fixed GPUs for --resource cpus")] = "8",
    png: Annotated[Path | None, typer.Option("--png", help="also draw the curve here")] = None,
) -> None:
    """Best plan and throughput per amount of GPUs (or CPUs with GPUs fixed)."""
    from shapeshift.perf.curves import cpu_curve, gpu_curve
    from shapeshift.perf.measurements import format_placement, parse_placement

    with _boundary():
        fitted = _load_params(params, model)
        if max_amount < 1:
            raise ValueError("--max must be >= 1")
        if resource == "gpus":
            curve = gpu_curve(fitted, max_amount, gpus_per_node)
        elif resource == "cpus":
            curve = cpu_curve(fitted, parse_placement(placement), max_amount)
        else:
            raise ValueError(f"--resource: expected gpus or cpus, got {resource!r}")
    table = Table(title=f"{fitted.model}: throughput vs {resource}")
    for col in ("amount", "best plan", "placement", "samples/s", "slope"):
        table.add_column(col)
    for p in curve.points:
        table.add_row(
            str(p.amount),
            short_plan_label(p.plan) if p.plan else "-",
            format_placement(p.placement) if p.placement else "-",
            f"{p.throughput:.3f}",
            "flat" if p.flat else f"{p.slope:+.3f}",
        )
    out.print(table)
    if png is not None:
        with _boundary():
            _draw(png, curve.points, f"{fitted.model}: throughput vs {resource}", resource)
        out.print(f"wrote {png}")


def _draw(path: Path, points: tuple, title: str, xlabel: str) -> None:
    """The sensitivity curve: throughput per amount, the best plan named where it changes,
    on a zero-based axis with a grid (object API: no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = [p.amount for p in points]
    ys = [p.throughput for p in points]
    ax.step(xs, ys, where="post", marker=".", linewidth=1.2)
    previous = None
    for p in points:
        label = short_plan_label(p.plan) if p.plan else None
        if label and label != previous:
            ax.annotate(label, (p.amount, p.throughput), textcoords="offset points", xytext=(2, 6), fontsize=7)
        previous = label
    ax.set(title=title, xlabel=f"{xlabel} (count)", ylabel="throughput (samples/s)")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0, top=max(ys, default=1.0) * 1.15 or 1.0)
    ax.grid(True, linestyle=":")
    fig.tight_layout()
    fig.savefig(path)


def short_plan_label(plan: object) -> str:
    """``dp4`` / ``tp2 pp2 dp2`` / ``dp8 zero-offload``: the parts of a plan that differ."""
    from shapeshift.model import ZeroMode

    parts = [f"{k}{getattr(plan, k)}" for k in ("tp", "pp") if getattr(plan, k) > 1]
    parts.append(f"dp{plan.dp}")  # type: ignore[attr-defined]
    zero = plan.zero  # type: ignore[attr-defined]
    if zero is not ZeroMode.NONE:
        parts.append("zero-offload" if zero is ZeroMode.OFFLOAD else "zero-dp")
    if plan.grad_ckpt:  # type: ignore[attr-defined]
        parts.append("gc")
    return " ".join(parts)


@app.command("validate")
def validate_cmd(
    measurements: Annotated[
        Path, typer.Option("--measurements", help="directory of <model>/placements.csv (e.g. rubick-a800-tables)")
    ],
    sample: Annotated[int, typer.Option("--sample", help="rows per few-shot fit")] = 7,
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="random samples per model")] = 5,
    planner: Annotated[bool, typer.Option("--planner", help="fit on the profiling planner's choices")] = False,
    out_path: Annotated[Path, typer.Option("--out", help="validation.json")] = Path("validation.json"),
    model: Annotated[list[str] | None, typer.Option("--model", help="only these models")] = None,
) -> None:
    """Few-shot validation on every model directory: errors per model and plan family."""

    from shapeshift.perf.validate import validate_dir, validation_json, write_json

    with _boundary():
        if sample < 7:
            raise ValueError("--sample must be >= 7 (the fit needs 7 points)")
        reports, skipped = validate_dir(datasets.locate(measurements), sample, seeds, planner=planner, models=model)
        data = validation_json(reports, planner)
        write_json(out_path, data)
    table = Table(title=f"few-shot on {'planner' if planner else f'{seeds} random'} {sample} rows; full-data fit")
    for col in ("model", "n_eval", "avg err", "max err", "full avg", "full max"):
        table.add_column(col)
    for name, entry in data.items():
        full = entry.get("full_fit", {})
        table.add_row(
            name,
            str(entry["n_eval"]),
            f"{entry['avg_err']:.1%}",
            f"{entry['max_err']:.1%}",
            f"{full.get('avg_err', float('nan')):.1%}",
            f"{full.get('max_err', float('nan')):.1%}",
        )
    out.print(table)
    fam = Table(title="few-shot error per plan family (avg / max)")
    fam.add_column("model")
    for name, rep in reports.items():
        stats = rep.planner if planner and rep.planner else rep.random[0] if rep.random else None
        if stats:
            fam.add_row(name, "  ".join(f"{k} {a:.1%}/{b:.1%}" for k, (a, b, _) in stats.per_family.items()))
    out.print(fam)
    for name, why in skipped.items():
        out.print(f"skipped {name}: {why}")
    out.print(f"wrote {out_path}")


def _cluster(spec: str) -> tuple[int, int]:
    nodes, sep, per = spec.lower().partition("x")
    if not sep or not nodes.strip().isdigit() or not per.strip().isdigit() or int(nodes) < 1 or int(per) < 1:
        raise ValueError(f"--cluster: expected NODESxGPUS such as 8x8, got {spec!r}")
    return int(nodes), int(per)


@app.command("plan-profiling")
def plan_profiling_cmd(
    model: Annotated[str, typer.Option("--model", help="model name, e.g. gpt2")],
    cluster: Annotated[str, typer.Option("--cluster", help="NODESxGPUS_PER_NODE, e.g. 8x8")] = "8x8",
    budget: Annotated[int, typer.Option("--budget", help="configurations to profile")] = 7,
) -> None:
    """Choose which configurations to profile for a new model."""
    from shapeshift.perf.arch import get_arch
    from shapeshift.perf.measurements import format_placement
    from shapeshift.perf.planner import Candidate, plan_profiling
    from shapeshift.perf.plans import enumerate_plans
    from shapeshift.perf.rubick import A800_NODE

    with _boundary():
        arch = get_arch(model)
        nodes, per = _cluster(cluster)
        if budget < 1:
            raise ValueError("--budget must be >= 1")
        cands = [Candidate(p, pl) for pl in _placements(nodes, per) for p in enumerate_plans(arch, pl, max_accum=1)]
        chosen = plan_profiling(arch, cands, budget, A800_NODE)
    table = Table(title=f"profiling plan for {arch.name} on {cluster}")
    for col in ("#", "family", "plan", "placement", "spread"):
        table.add_column(col)
    for i, c in enumerate(chosen, 1):
        table.add_row(str(i), c.family, str(c.plan), format_placement(c.placement), c.spread)
    out.print(table)


def _placements(nodes: int, per: int, keep: Callable[[tuple[int, ...]], bool] = bool) -> list[tuple[int, ...]]:
    """Representative placements: packed, even and uneven spreads over up to ``nodes`` nodes."""
    seen: set[tuple[int, ...]] = set()
    for gpus in sorted({1, 2, 4, 8, 16, 32, 64} | {per, per * nodes}):
        if gpus > nodes * per:
            continue
        for n in range(1, nodes + 1):
            if n > gpus or gpus > n * per:
                continue
            base, rest = divmod(gpus, n)
            even = tuple([base + 1] * rest + [base] * (n - rest))
            seen.add(tuple(sorted(even)))
            if n > 1 and base >= 2:
                seen.add(tuple(sorted([*even[:-2], even[-2] - 1, even[-1] + 1])))
    return sorted(p for p in seen if max(p) <= per and keep(p))
