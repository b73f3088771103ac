"""Reader for measured iteration times (the Rubick artifact's ``placements.csv``).

A row names a plan and a placement in the artifact's compact strings; the reader turns
them into typed values once so the model never parses strings in its hot path:

* ``exec_plan``: ``ga`` (plain data parallel; accumulation never triggers at the traces'
  fixed global batch), ``gc`` (gradient checkpointing), ``zero-dp`` (ZeRO-2),
  ``zero-offload``, ``tp`` (tensor parallel over all GPUs), any of those joined by ``+``
  (``zero-offload+gc``), or three digits read as PP, TP, DP (``248`` = PP 2, TP 4, DP 8).
* ``placement``: one digit per node = GPUs used there (``44`` = two nodes with 4 each).
* ``cpu_threads`` (optional): CPU threads of each training process (one process per GPU),
  which matters for ZeRO-Offload; ``llama7b_bsz16`` records 2 for its 16-GPU runs.

Rows with ``iter_time`` 0 are failed runs and are dropped (``llama7b_bsz16``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from shapeshift.model import ExecutionPlan, ModelError, ZeroMode
from shapeshift.perf.arch import get_arch

#: CPU threads assumed for rows that do not record them. The artifact's own profiling
#: runs of ZeRO-Offload (``fitting/<model>/config.csv``, ``num_cpu_threads``) use 4.
DEFAULT_CPUS = 4.0


class MeasurementError(ValueError):
    """A measurement file or row that cannot be read; the message names file, line and field."""


@dataclass(frozen=True, slots=True)
class Measurement:
    """One measured configuration: what ran where, and how long an iteration took (s)."""

    model: str
    plan: ExecutionPlan
    placement: tuple[int, ...]
    iter_time: float
    cpus: float = DEFAULT_CPUS  # CPU threads per training process
    label: str = ""
    source: str = ""

    @property
    def gpus(self) -> int:
        return sum(self.placement)

    @property
    def family(self) -> str:
        """Plan family for coverage and per-family error tables (``3d``, ``zero-offload``, ...)."""
        return plan_family(self.plan)


def plan_family(plan: ExecutionPlan) -> str:
    """The artifact's plan families: 3d, zero-offload, zero-dp, gc, ga (plain data parallel)."""
    if plan.tp > 1 or plan.pp > 1:
        return "3d"
    if plan.zero is ZeroMode.OFFLOAD:
        return "zero-offload"
    if plan.zero is ZeroMode.DP:
        return "zero-dp"
    return "gc" if plan.grad_ckpt else "ga"


def parse_placement(text: str) -> tuple[int, ...]:
    """``"233"`` -> ``(2, 3, 3)``; also accepts ``"2,3,3"`` or ``"2+3+3"`` for nodes above 9 GPUs."""
    raw = text.strip()
    if not raw:
        raise ValueError("empty placement")
    parts = raw.replace("+", ",").split(",") if ("," in raw or "+" in raw) else list(raw)
    try:
        counts = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"bad placement {text!r}: expected GPUs per node such as 44 or 2,3,3") from None
    if any(c < 1 for c in counts):
        raise ValueError(f"bad placement {text!r}: every node must hold at least one GPU")
    return counts


def format_placement(placement: Sequence[int]) -> str:
    return "".join(str(g) for g in placement) if all(g < 10 for g in placement) else ",".join(map(str, placement))


_TOKENS = {"ga", "gc", "zero-dp", "zero-offload", "tp", "dp"}


def parse_trace_plan(text: str, gpus: int, micro_batches: int = 1) -> ExecutionPlan:
    """Turn an artifact plan string into an :class:`ExecutionPlan` for ``gpus`` GPUs.

    ``micro_batches`` applies to pipeline plans only; the traces show no pipelining
    benefit (one micro-batch) except ``llama7b_bsz16``.
    """
    raw = text.strip().lower()
    if len(raw) == 3 and raw.isdigit():
        pp, tp, dp = (int(c) for c in raw)
        if min(pp, tp, dp) < 1:
            raise ValueError(f"bad 3D plan {text!r}: PP, TP and DP digits must be >= 1")
        if pp * tp * dp != gpus:
            need = pp * tp * dp
            raise ValueError(f"3D plan {text!r} (PP {pp} x TP {tp} x DP {dp}) needs {need} GPUs, placement has {gpus}")
        return ExecutionPlan(dp=dp, tp=tp, pp=pp, micro_batches=micro_batches if pp > 1 else 1)
    tokens = [t.strip() for t in raw.split("+") if t.strip()]
    if not tokens or any(t not in _TOKENS for t in tokens):
        raise ValueError(
            f"bad plan {text!r}: expected ga, gc, zero-dp, zero-offload, tp (joined by +) or three PP/TP/DP digits"
        )
    zero = ZeroMode.OFFLOAD if "zero-offload" in tokens else ZeroMode.DP if "zero-dp" in tokens else ZeroMode.NONE
    if "tp" in tokens:
        return ExecutionPlan(dp=1, tp=gpus, zero=zero, grad_ckpt="gc" in tokens)
    return ExecutionPlan(dp=gpus, zero=zero, grad_ckpt="gc" in tokens)


def parse_plan(text: str, gpus: int) -> ExecutionPlan:
    """Parse a plan given on the command line: an artifact string or ``dp=2,tp=4,...``."""
    if "=" in text:
        try:
            plan = ExecutionPlan.parse(text)
        except ModelError as exc:
            raise ValueError(str(exc)) from None
        if plan.gpus != gpus:
            raise ValueError(f"plan {text!r} uses {plan.gpus} GPUs but the placement has {gpus}")
        return plan
    return parse_trace_plan(text, gpus)


def _float(value: str, where: str, field: str) -> float:
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise MeasurementError(f"{where}: field {field!r}: not a number: {value!r}") from None
    if not math.isfinite(result) or result < 0:
        raise MeasurementError(f"{where}: field {field!r}: must be a finite number >= 0, got {value!r}")
    return result


#: Traces whose pipeline rows really pipeline (the data notes' exception).
PIPELINED_TRACES = frozenset({"llama7b_bsz16"})

REQUIRED_COLUMNS = ("exec_plan", "placement", "iter_time")


def read_placements(path: str | Path, model: str | None = None, micro_batches: int | None = None) -> list[Measurement]:
    """Read one ``placements.csv``; ``model`` defaults to the name of the file's directory.

    ``micro_batches`` for pipeline rows defaults to 1 (what the traces show), except for
    ``llama7b_bsz16`` whose rows do pipeline: there each stage gets one sample per micro-batch.
    """
    path = Path(path)
    name = model or path.parent.name
    if not path.is_file():
        raise MeasurementError(f"{path}: no such file")
    rows: list[Measurement] = []
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            found = ", ".join(header) or "none"
            raise MeasurementError(f"{path}:1: missing column(s) {', '.join(missing)}; found {found}")
        for lineno, row in enumerate(reader, start=2):
            where = f"{path}:{lineno}"
            row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
            iter_time = _float(row["iter_time"], where, "iter_time")
            if iter_time == 0:
                continue
            try:
                placement = parse_placement(row["placement"])
            except ValueError as exc:
                raise MeasurementError(f"{where}: field 'placement': {exc}") from None
            gpus = sum(placement)
            try:
                plan = parse_trace_plan(row["exec_plan"], gpus, micro_batches=micro_batches or 1)
                if micro_batches is None and name in PIPELINED_TRACES and plan.pp > 1:
                    per_pipe = max(get_arch(name).global_batch // plan.dp, 1)  # one sample per micro-batch
                    plan = ExecutionPlan(plan.dp, plan.tp, plan.pp, plan.zero, 1, plan.grad_ckpt, per_pipe)
            except (ValueError, KeyError) as exc:
                raise MeasurementError(f"{where}: field 'exec_plan': {exc}") from None
            cpus = _float(row["cpu_threads"], where, "cpu_threads") if row.get("cpu_threads") else DEFAULT_CPUS
            rows.append(Measurement(name, plan, placement, iter_time, cpus or DEFAULT_CPUS, row["exec_plan"], where))
    if not rows:
        raise MeasurementError(f"{path}: no usable rows (every iter_time is 0 or the file is empty)")
    return rows


def read_trace_dir(root: str | Path) -> dict[str, list[Measurement]]:
    """Read ``<root>/<model>/placements.csv`` for every model directory, sorted by name."""
    root = Path(root)
    if not root.is_dir():
        raise MeasurementError(f"{root}: no such directory")
    dirs = [d for d in sorted(root.iterdir()) if (d / "placements.csv").is_file()]
    found = {d.name: read_placements(d / "placements.csv") for d in dirs}
    if not found:
        raise MeasurementError(f"{root}: no <model>/placements.csv files found")
    return found
