"""The generic format: what ``Workload.write`` produces, so every reader's output reads
back unchanged; also the shape of a DataFrame handed to ``shapeshift.simulate``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.model import BatchSpec, ExecutionPlan, ModelError
from shapeshift.wording import count
from shapeshift.workloads.readers.table import Table, frame_table, load_table
from shapeshift.workloads.workload import REQUIRED, Workload, format_gpu_speed, parse_gpu_speed


def read_generic(path: str | Path) -> Workload:
    """The generic format: ``job_id, submit_time, num_gpus, duration`` plus optional columns
    ``name, user, vc, tenant, guaranteed, model, num_cpus, mem_gb, iterations, plan,
    batch, cpu_only``, the GPU-sharing columns ``gpu_milli, gpu_types`` and the trace-log
    columns ``state, start_time, end_time, queue``. This is what ``Workload.write``
    produces, so every reader's output reads back unchanged.
    ``duration`` may be blank on a row that gives ``iterations``.

    Kubernetes batch queueing (Kueue, KAI-Scheduler) adds ``namespace``, ``queue`` (the
    queue a job is submitted to), ``priority_class``, ``pods`` (gang size, default 1) and
    ``gpus_per_pod``: a job's GPUs are ``pods x gpus_per_pod``, and ``num_gpus`` may then
    be left out. A ``queue`` column of numbers only is the recorded queueing delay of a
    datacenter log, as before; one with names is the queue (``queue_name`` names it
    either way, for queues named by numbers).

    Per-GPU-type throughputs (Gavel's input): one column per type, ``speed_<TYPE>``
    (e.g. ``speed_V100``; blank or 0 = the job cannot run on that type), or one
    ``gpu_speed`` column as ``Workload.write`` writes it (``K80=1.8;V100=18``)."""
    return _generic(load_table(path), Path(path).stem)


def read_generic_frame(frame: pd.DataFrame, name: str = "dataframe") -> Workload:
    """A pandas DataFrame in the generic format, checked with the same rules and messages as
    a file (rows named ``<DataFrame>:N``, N counted from 1)."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError("read_generic_frame takes a pandas DataFrame")
    return _generic(frame_table(frame), name)


def _generic(table: Table, name: str) -> Workload:
    columns = table.frame.columns
    per_pod = "gpus_per_pod" in columns
    table.require(tuple(c for c in REQUIRED if not (per_pod and c == "num_gpus")), "generic")
    ids = table.present("job_id").astype(str).str.strip()
    table.unique_ids(ids, "job_id")
    has_iterations = "iterations" in table.frame.columns
    out = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time": table.times("submit_time"),
            "num_gpus": _gpus(table),
            "duration": table.seconds("duration", required=not has_iterations),
        }
    )
    for column in ("name", "user", "vc", "tenant", "model"):
        out[column] = table.text(column)
    for column in ("guaranteed", "cpu_only"):
        if column in table.frame.columns:
            out[column] = table.flags(column)
    for column in ("num_cpus", "mem_gb"):
        if column in table.frame.columns:
            out[column] = table.numeric(column, required=False).fillna(0.0)
    if has_iterations:
        out["iterations"] = table.numeric("iterations", integer=True, required=False).astype("Int64")
        neither = out["duration"].isna() & out["iterations"].isna()
        if neither.any():
            raise table.fail(
                table.first(neither.to_numpy()), "duration", "value is missing (give a duration or iterations)"
            )
    if "plan" in table.frame.columns:
        out["plan"] = _plans(table, out["num_gpus"])
    if "batch" in table.frame.columns:
        out["batch"] = _batches(table)
    speeds = _gpu_speeds(table)
    if speeds is not None:
        out["gpu_speed"] = speeds
    if "gpu_milli" in table.frame.columns:
        milli = table.numeric("gpu_milli", integer=True, required=False).fillna(0).astype("int64")
        bad = (milli < 0) | (milli >= 1000) | ((milli > 0) & (out["num_gpus"] != 1))
        if bad.any():
            message = "must be 0 (whole GPUs) or 1..999 with num_gpus 1"
            raise table.fail(table.first(bad.to_numpy()), "gpu_milli", message)
        out["gpu_milli"] = milli
    if "gpu_types" in table.frame.columns:
        out["gpu_types"] = table.text("gpu_types")
    if "state" in table.frame.columns:
        out["state"] = table.text("state")
    queue_named = "queue" in columns and "queue_name" not in columns and _names(table.text("queue"))
    for column in ("start_time", "end_time", "queue"):
        if column in columns and not (column == "queue" and queue_named):
            out[column] = table.numeric(column, required=False, minimum=-np.inf).astype(float)
    k8s = {"namespace", "priority_class", "pods", "gpus_per_pod", "queue_name"} & set(columns)
    if k8s or queue_named:
        out["namespace"] = table.text("namespace")
        out["queue_name"] = table.text("queue_name" if "queue_name" in columns else "queue" if queue_named else "")
        out["priority_class"] = table.text("priority_class")
        out["pods"] = _pods(table)
        uneven = (out["num_gpus"] % out["pods"]) != 0
        if uneven.any():
            row = table.first(uneven.to_numpy())
            raise table.fail(
                row, "pods", f"num_gpus {out['num_gpus'].iat[row]} is not a whole number of GPUs per pod"
            )
    return Workload.from_frame(name, out)


def _names(values: pd.Series) -> bool:
    """Whether a ``queue`` column holds queue names rather than delays in seconds."""
    given = values[values != ""]
    return bool(len(given)) and bool(pd.to_numeric(given, errors="coerce").isna().any())


def _pods(table: Table) -> pd.Series:
    if "pods" not in table.frame.columns:
        return pd.Series(1, index=table.frame.index, dtype="int64")
    return table.numeric("pods", integer=True, minimum=1, required=False).fillna(1).astype("int64")


def _gpus(table: Table) -> pd.Series:
    """``num_gpus``, or ``pods x gpus_per_pod`` (which must agree with ``num_gpus`` if both are given)."""
    columns = table.frame.columns
    if "gpus_per_pod" not in columns:
        return table.numeric("num_gpus", integer=True).astype("int64")
    total = _pods(table) * table.numeric("gpus_per_pod", integer=True).astype("int64")
    if "num_gpus" in columns:
        given = table.numeric("num_gpus", integer=True).astype("int64")
        differ = given != total
        if differ.any():
            row = table.first(differ.to_numpy())
            raise table.fail(
                row, "num_gpus", f"num_gpus {given.iat[row]} differs from pods x gpus_per_pod = {total.iat[row]}"
            )
    return total.astype("int64")


def _gpu_speeds(table: Table) -> pd.Series | None:
    """The ``gpu_speed`` text per row from ``speed_<TYPE>`` columns or a ``gpu_speed`` column."""
    per_type = sorted(c for c in table.frame.columns if str(c).startswith("speed_") and len(str(c)) > 6)
    if not per_type and "gpu_speed" not in table.frame.columns:
        return None
    if per_type:
        values = {c: table.numeric(c, required=False) for c in per_type}
        given = np.column_stack([values[c].notna().to_numpy() for c in per_type]).any(axis=1)
        rows = [
            tuple((c[6:], float(values[c].iat[r])) for c in per_type if values[c].iat[r] > 0)
            for r in range(len(table.frame))
        ]
        column = per_type[0]
        for r, speeds in enumerate(rows):
            if speeds == () and given[r]:
                raise table.fail(r, column, "no GPU type has a positive throughput")
    else:
        rows = []
        for r, text in enumerate(table.text("gpu_speed").tolist()):
            try:
                rows.append(parse_gpu_speed(text))
            except ValueError as exc:
                raise table.fail(r, "gpu_speed", str(exc)) from None
            if rows[-1] and max(v for _, v in rows[-1]) <= 0:
                raise table.fail(r, "gpu_speed", "no GPU type has a positive throughput")
    return pd.Series([format_gpu_speed(s) for s in rows], dtype=object, index=table.frame.index)


def _plans(table: Table, gpus: pd.Series) -> pd.Series:
    texts = table.text("plan")
    parsed: dict[str, ExecutionPlan] = {}
    result = []
    for row, (text, g) in enumerate(zip(texts.tolist(), gpus.tolist(), strict=True)):
        if not text:
            result.append("")
            continue
        if text not in parsed:
            try:
                parsed[text] = ExecutionPlan.parse(text)
            except ModelError as exc:
                raise table.fail(row, "plan", str(exc)) from None
        plan = parsed[text]
        if plan.gpus != g:
            raise table.fail(row, "plan", f"plan uses {count(plan.gpus, 'GPU')} but num_gpus is {g}")
        result.append(str(plan))
    return pd.Series(result, dtype=object, index=texts.index)




def _batches(table: Table) -> pd.Series:
    """``batch`` cells (``size=2048,initial=128,...``) in canonical form; blank = none."""
    texts = table.text("batch")
    result = []
    for row, text in enumerate(texts.tolist()):
        try:
            result.append(str(BatchSpec.parse(text)) if text else "")
        except (ModelError, TypeError) as exc:
            raise table.fail(row, "batch", str(exc)) from None
    return pd.Series(result, dtype=object, index=texts.index)
