"""``shapeshift tune run``: surrogate-based hyper-parameter tuning (Hydro)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from shapeshift.cli.common import console, guarded, output_dir, progress_bar, show_progress
from shapeshift.errors import InputError
from shapeshift.tune import DEFAULT_SCALE

app = typer.Typer(help="Surrogate-based hyper-parameter tuning: shrink, fuse, search, transfer (Hydro).",
                  no_args_is_help=True)


def _fusion(value: str) -> int | None:
    if value == "auto":
        return None
    try:
        fusion = int(value)
    except ValueError:
        raise InputError(f"must be 'auto' or an integer >= 1, got {value!r}", field="--fusion") from None
    if fusion < 1:
        raise InputError(f"must be 'auto' or an integer >= 1, got {value!r}", field="--fusion")
    return fusion


def _positive(value: int, flag: str) -> int:
    if value < 1:
        raise InputError(f"must be at least 1, got {value}", field=flag)
    return value


@app.command("run")
@guarded
def run_cmd(
    space_file: Annotated[Path, typer.Argument(help="Search-space file (YAML).")],
    model: Annotated[str, typer.Option(help="Model to tune: tiny-lm or tiny-lm-small.")],
    trials: Annotated[int, typer.Option(help="Number of surrogate trials.")],
    scale: Annotated[int, typer.Option(help="Shrink hidden widths by this factor (1 = fusion only); "
                                            "Hydro's default is 8.")] = DEFAULT_SCALE,
    torch_init: Annotated[bool, typer.Option(
        "--torch-init", help="Keep PyTorch's default initialisation of the readout and the biases instead of "
        "Hydro's zeros (ours; off by default).")] = False,
    fusion: Annotated[str, typer.Option(help="Trials per fused group: 'auto' (planner) or a number.")] = "auto",
    slots: Annotated[int, typer.Option(help="Device slots to spread fused groups over.")] = 1,
    memory_gb: Annotated[float, typer.Option(help="Device memory for --fusion auto, GiB.")] = 16.0,
    state: Annotated[str | None, typer.Option(help="Controller state directory: submit there instead of "
                                                   "running in this process.")] = None,
    out: Annotated[Path, typer.Option(help="Directory for results.csv, summary.json and search.png.")] = Path(
        "tune-out"),
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Tune hyper-parameters on a muP surrogate with fused trials and eager transfer."""
    import importlib.util

    missing = [m for m in ("torch", "optuna") if importlib.util.find_spec(m) is None]
    if missing:
        raise InputError(f"needs {' and '.join(missing)}: pip install 'shapeshift[tune]'")
    from shapeshift.tune.models import MODELS
    from shapeshift.tune.space import load_space

    space = load_space(space_file)
    if model not in MODELS:
        raise InputError(f"unknown model {model!r} (known: {', '.join(MODELS)})", field="--model")
    _positive(trials, "--trials")
    _positive(scale, "--scale")
    _positive(slots, "--slots")
    if not memory_gb > 0 or memory_gb != memory_gb or memory_gb == float("inf"):
        raise InputError(f"must be a positive finite number, got {memory_gb}", field="--memory-gb")
    fused = _fusion(fusion)
    out_path = output_dir(out)
    assert out_path is not None
    from shapeshift.tune.planner import PlanError
    from shapeshift.tune.shrink import ShrinkError

    try:
        if fused is None:
            from shapeshift.tune.search import auto_fusion

            fused = auto_fusion(model, space, scale, trials, memory_gb * 2**30, torch_init=torch_init)
            console.print(f"planner: {fused} trials per fused group fit {memory_gb:g} GiB", highlight=False)
    except ShrinkError as exc:
        raise InputError(f"cannot shrink {model} by {scale}: {exc}", field="--scale") from None
    except PlanError as exc:
        raise InputError(f"no fusion plan: {exc}", field="--memory-gb") from None
    if state is not None:
        _submit(space_file, model, trials, scale, fused, slots, out_path, state, torch_init)
        return
    from shapeshift.tune.report import write_results
    from shapeshift.tune.search import TuneSpec, run_tuning

    spec = TuneSpec(model, space, trials, scale, fused, slots, torch_init=torch_init)
    with progress_bar("trials", show_progress(quiet)) as update:
        result = run_tuning(spec, progress=update)
    paths = write_results(result, spec, out_path)
    console.print(
        f"best {result.best_params} -> full model validation loss {result.target_metric:.4f} "
        f"(target restarts {result.target_restarts}); results {paths['table']}, plot {paths['plot']}",
        highlight=False,
    )


def _submit(space_file: Path, model: str, trials: int, scale: int, fusion: int, slots: int, out: Path,
            state: str, torch_init: bool = False) -> None:
    """Send the tuning job to the controller as one job of ``slots`` GPUs."""
    from shapeshift.runtime.jobfile import parse_job
    from shapeshift.runtime.remote import ControllerClient

    job = parse_job(tuning_job(space_file, model, trials, scale, fusion, slots, out, torch_init))
    job_id = ControllerClient.from_state(state).submit(job.to_json())
    console.print(f"submitted tuning job {job_id}; results will be in {out}", highlight=False)


def tuning_job(space_file: Path, model: str, trials: int, scale: int, fusion: int, slots: int, out: Path,
               torch_init: bool = False) -> dict:
    """The job document of a tuning run: the worker command, one GPU per slot, one
    iteration per trial (so ``shapeshift queue`` shows trials done)."""
    args = ["--space", str(space_file.resolve()), "--model", model, "--trials", str(trials), "--scale", str(scale),
            "--fusion", str(fusion), "--slots", str(slots), "--out", str(out.resolve())]
    if torch_init:
        args.append("--torch-init")
    command = "{python} -m shapeshift.tune.worker " + " ".join(shlex.quote(a).replace("{", "{{").replace("}", "}}")
                                                               for a in args)
    return {"name": f"tune-{model}", "command": command, "resources": {"gpus": slots}, "iterations": trials}
