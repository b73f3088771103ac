"""Trace readers: files in, validated ``Workload`` out, or one ``InputError`` that says
exactly where the file is wrong (file, line, column).

Validation is vectorised (whole columns at once) so an 82k-row trace reads in well
under a second; only when a column is bad do we search for the first bad line.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.errors import InputError
from shapeshift.model import ExecutionPlan, ModelError
from shapeshift.workloads.workload import REQUIRED, Workload

_TRUE = {"1", "true", "yes", "y", "t"}
_FALSE = {"0", "false", "no", "n", "f", ""}


class _Table:
    """A raw table plus how to name its rows in error messages."""

    def __init__(self, path: Path, frame: pd.DataFrame, is_csv: bool, header_lines: int = 1):
        self.path = path
        self.frame = frame
        self.is_csv = is_csv
        self.header_lines = header_lines if is_csv else 0

    def line(self, row: int) -> int:
        # CSV: the header is line 1, so data row 0 is line 2 (line 1 for a headerless
        # file). Parquet: 1-based row number.
        return row + 1 + self.header_lines

    def fail(self, row: int, column: str, message: str) -> InputError:
        return InputError(message, path=str(self.path), line=self.line(row), field=column)

    def require(self, columns: tuple[str, ...], fmt: str) -> None:
        missing = [c for c in columns if c not in self.frame.columns]
        if missing:
            raise InputError(
                f"missing required column(s) {', '.join(missing)} for the {fmt} format; "
                f"found: {', '.join(map(str, self.frame.columns)) or 'none'}",
                path=str(self.path),
                line=1 if self.is_csv else None,
                field=missing[0],
            )

    def _first(self, mask: np.ndarray) -> int:
        return int(np.flatnonzero(mask)[0])

    def present(self, column: str) -> pd.Series:
        values = self.frame[column]
        empty = values.isna() | (values.astype(str).str.strip() == "")
        if empty.any():
            raise self.fail(self._first(empty.to_numpy()), column, "value is missing")
        return values

    def numeric(self, column: str, *, integer: bool = False, minimum: float = 0.0, required: bool = True) -> pd.Series:
        values = self.frame[column]
        if not required:
            blank = values.isna() | (values.astype(str).str.strip() == "")
            values = values.where(~blank, None)
        else:
            values = self.present(column)
        numbers = pd.to_numeric(values, errors="coerce")
        bad = numbers.isna() & values.notna()
        if bad.any():
            row = self._first(bad.to_numpy())
            raise self.fail(row, column, f"expected a number, got {values.iloc[row]!r}")
        finite = numbers.dropna()
        if not np.isfinite(finite.to_numpy(dtype=float)).all():
            row = self._first(~np.isfinite(numbers.fillna(0).to_numpy(dtype=float)))
            raise self.fail(row, column, f"expected a finite number, got {values.iloc[row]!r}")
        if integer:
            frac = numbers.notna() & (numbers.fillna(0) % 1 != 0)
            if frac.any():
                row = self._first(frac.to_numpy())
                raise self.fail(row, column, f"expected a whole number, got {values.iloc[row]!r}")
        below = numbers.notna() & (numbers.fillna(minimum) < minimum)
        if below.any():
            row = self._first(below.to_numpy())
            raise self.fail(row, column, f"must be >= {minimum:g}, got {values.iloc[row]!r}")
        return numbers

    def times(self, column: str) -> pd.Series:
        """Seconds after the first submission, from numbers or ISO timestamps."""
        values = self.present(column)
        numbers = pd.to_numeric(values, errors="coerce")
        if numbers.notna().all():
            if (numbers < 0).any():
                row = self._first((numbers < 0).to_numpy())
                raise self.fail(row, column, f"must be >= 0, got {values.iloc[row]!r}")
            return numbers.astype(float)
        stamps = pd.to_datetime(values.astype(str), errors="coerce", format="ISO8601")
        if stamps.isna().any():
            row = self._first(stamps.isna().to_numpy())
            raise self.fail(row, column, f"cannot read time {values.iloc[row]!r}; expected seconds or an ISO timestamp")
        if getattr(stamps.dt, "tz", None) is not None:
            stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
        return (stamps - stamps.min()).dt.total_seconds()

    def text(self, column: str, default: str = "") -> pd.Series:
        if column not in self.frame.columns:
            return pd.Series([default] * len(self.frame), dtype=object)
        values = self.frame[column]
        return values.where(values.notna(), default).astype(str).str.strip()

    def flags(self, column: str) -> pd.Series:
        values = self.text(column).str.lower()
        bad = ~values.isin(_TRUE | _FALSE)
        if bad.any():
            row = self._first(bad.to_numpy())
            raise self.fail(row, column, f"expected 0/1 or true/false, got {self.frame[column].iloc[row]!r}")
        return values.isin(_TRUE)

    def unique_ids(self, ids: pd.Series, column: str) -> None:
        dup = ids.duplicated()
        if dup.any():
            row = self._first(dup.to_numpy())
            raise self.fail(row, column, f"duplicate job id {ids.iloc[row]!r}")

    def clock(self, submit: str, others: tuple[str, ...]) -> tuple[pd.Series, dict[str, pd.Series]]:
        """``submit`` as in :meth:`times`, plus further time columns on the same clock
        (blank = NaN, e.g. the start of a job that never started)."""
        base = self.times(submit)
        raw = self.present(submit)
        numeric = pd.to_numeric(raw, errors="coerce").notna().all()
        result: dict[str, pd.Series] = {}
        for column in others:
            if numeric:
                result[column] = self.numeric(column, required=False).astype(float)
                continue
            values = self.text(column)
            blank = values == ""
            stamps = pd.to_datetime(values.where(~blank, None), errors="coerce", format="ISO8601")
            bad = stamps.isna() & ~blank
            if bad.any():
                row = self._first(bad.to_numpy())
                raise self.fail(row, column, f"cannot read time {values.iloc[row]!r}; expected an ISO timestamp")
            if getattr(stamps.dt, "tz", None) is not None:
                stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
            origin = pd.to_datetime(raw.astype(str), format="ISO8601")
            if getattr(origin.dt, "tz", None) is not None:
                origin = origin.dt.tz_convert("UTC").dt.tz_localize(None)
            result[column] = (stamps - origin.min()).dt.total_seconds()
        return base, result

    def choice(self, column: str, allowed: tuple[str, ...]) -> pd.Series:
        """Upper-cased values of ``column``, each one of ``allowed``."""
        values = self.present(column).astype(str).str.strip().str.upper()
        bad = ~values.isin(allowed)
        if bad.any():
            row = self._first(bad.to_numpy())
            raise self.fail(
                row, column, f"unknown value {self.frame[column].iloc[row]!r}; expected one of {', '.join(allowed)}"
            )
        return values


def _load_table(path: str | Path, names: tuple[str, ...] | None = None) -> _Table:
    """Read a CSV (all cells as text) or Parquet file. ``names``: read a headerless CSV
    with these column names."""
    path = Path(path)
    if not path.exists():
        raise InputError("workload file not found", path=str(path))
    try:
        if path.suffix == ".parquet":
            return _Table(path, pd.read_parquet(path), is_csv=False)
        frame = pd.read_csv(
            path,
            dtype=str,
            keep_default_na=False,
            na_values=[],
            skipinitialspace=True,
            header=None if names else "infer",
            names=list(names) if names else None,
        )
        frame.columns = [str(c).strip() for c in frame.columns]
        return _Table(path, frame, is_csv=True, header_lines=0 if names else 1)
    except pd.errors.EmptyDataError:
        raise InputError("file is empty", path=str(path)) from None
    except pd.errors.ParserError as exc:
        raise InputError(f"not a readable CSV file: {exc}", path=str(path)) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from None


def read_generic(path: str | Path) -> Workload:
    """The generic format: ``job_id, submit_time, num_gpus, duration`` plus optional columns
    ``name, user, vc, tenant, guaranteed, model, num_cpus, mem_gb, iterations, plan,
    cpu_only`` and the trace-log columns ``state, start_time, end_time, queue``. This is
    what ``Workload.write`` produces, so every reader's output reads back unchanged.
    ``duration`` may be blank on a row that gives ``iterations``."""
    table = _load_table(path)
    table.require(REQUIRED, "generic")
    ids = table.present("job_id").astype(str).str.strip()
    table.unique_ids(ids, "job_id")
    has_iterations = "iterations" in table.frame.columns
    out = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time": table.times("submit_time"),
            "num_gpus": table.numeric("num_gpus", integer=True).astype("int64"),
            "duration": table.numeric("duration", required=not has_iterations),
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
                table._first(neither.to_numpy()), "duration", "value is missing (give a duration or iterations)"
            )
    if "plan" in table.frame.columns:
        out["plan"] = _plans(table, out["num_gpus"])
    if "state" in table.frame.columns:
        out["state"] = table.text("state")
    for column in ("start_time", "end_time", "queue"):
        if column in table.frame.columns:
            out[column] = table.numeric(column, required=False, minimum=-np.inf).astype(float)
    return Workload.from_frame(Path(path).stem, out)


def _plans(table: _Table, gpus: pd.Series) -> pd.Series:
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
            raise table.fail(row, "plan", f"plan uses {plan.gpus} GPUs but num_gpus is {g}")
        result.append(str(plan))
    return pd.Series(result, dtype=object, index=texts.index)


PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")


def read_philly(path: str | Path) -> Workload:
    """The Philly job file processed by the Blox project: ``timestamp, duration, num_gpus,
    gpu_time, cluster``; ``cluster`` is the virtual cluster and becomes ``vc``. Jobs get ids
    from their line order in the file, so ids are stable across runs."""
    table = _load_table(path)
    table.require(PHILLY_COLUMNS, "philly")
    n = len(table.frame)
    out = pd.DataFrame(
        {
            "job_id": pd.Series(np.arange(n)).astype(str),
            "submit_time": table.times("timestamp"),
            "num_gpus": table.numeric("num_gpus", integer=True).astype("int64"),
            "duration": table.numeric("duration"),
            "vc": table.text("cluster"),
        }
    )
    return Workload.from_frame(Path(path).stem, out)


HELIOS_COLUMNS = (
    "job_id",
    "user",
    "vc",
    "gpu_num",
    "cpu_num",
    "node_num",
    "state",
    "submit_time",
    "start_time",
    "end_time",
    "duration",
    "queue",
)
#: Final job states of the Helios logs (Slurm states as the Helios artifact keeps them).
HELIOS_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL")


def read_helios(path: str | Path) -> Workload:
    """A Helios ``cluster_log.csv`` (SenseTime Helios traces, SC'21): ``job_id, user, vc,
    gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time, duration, queue``
    (an optional ``jobname``/``name`` column becomes ``name``).

    * ``gpu_num`` -> ``num_gpus``, ``cpu_num`` -> ``num_cpus``; ``node_num`` is checked but
      not kept (placement is the scheduler's choice in a simulation);
    * ``state`` is kept upper-cased and must be one of ``HELIOS_STATES``;
    * ``start_time``/``end_time`` are kept on the submit clock (seconds after the first
      submission; blank = never started), ``queue`` (seconds) is kept as recorded;
    * CPU-only jobs (``gpu_num`` 0) are kept with ``cpu_only`` set: trace statistics see
      them, ``Workload.jobs()`` leaves them out of a GPU simulation unless asked.
    """
    table = _load_table(path)
    table.require(HELIOS_COLUMNS, "helios")
    ids = table.present("job_id").astype(str).str.strip()
    table.unique_ids(ids, "job_id")
    gpus = table.numeric("gpu_num", integer=True).astype("int64")
    table.numeric("node_num", integer=True)
    submit, times = table.clock("submit_time", ("start_time", "end_time"))
    name_column = next((c for c in ("jobname", "name") if c in table.frame.columns), None)
    out = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time": submit,
            "num_gpus": gpus,
            "duration": table.numeric("duration"),
            "name": table.text(name_column) if name_column else "",
            "user": table.text("user"),
            "vc": table.text("vc"),
            "num_cpus": table.numeric("cpu_num"),
            "cpu_only": gpus == 0,
            "state": table.choice("state", HELIOS_STATES),
            "start_time": times["start_time"],
            "end_time": times["end_time"],
            "queue": table.numeric("queue", required=False).astype(float),
        }
    )
    return Workload.from_frame(Path(path).stem, out)


RUBICK_COLUMNS = (
    "name",
    "submission_time",
    "duration",
    "application",
    "num_gpus",
    "num_cpus",
    "bandwidth",
    "exec_plan",
    "steps",
    "is_sla",
)
#: Tenants of a multi-tenant Rubick trace (``workload-mt``): the guaranteed (``is_sla``)
#: jobs belong to the quota tenant, the rest to the best-effort one (issue 6: tenant A
#: has a 64-GPU quota, B none; see ``../shared/examples/cluster-a800-8x8.yaml``).
RUBICK_QUOTA_TENANT = "A"
RUBICK_BEST_EFFORT_TENANT = "B"


def read_rubick(path: str | Path) -> Workload:
    """The Rubick artifact's evaluation traces (``workload-{base,bp,mt}.csv``): ``name,
    submission_time, duration, application, num_gpus, num_cpus, bandwidth, exec_plan,
    steps, is_sla``.

    * ``name`` is the job id (and name); ``application`` -> ``model``; ``steps`` ->
      ``iterations``; ``is_sla`` -> ``guaranteed``; ``duration`` is kept (seconds);
    * ``exec_plan`` -> the requested plan: ``ga`` (plain data parallel), ``gc``
      (gradient checkpointing), ``zero-dp``, ``zero-offload``, ``tp``, any of these
      joined by ``+``, or three digits read as PP, TP, DP (``524`` = PP 5, TP 2, DP 4).
      A plan whose GPU count differs from ``num_gpus`` is an error (none in the
      shipped traces);
    * ``bandwidth`` (the artifact's per-job network figure) is checked but not kept: the
      performance model derives communication from the plan and placement;
    * tenants: a trace with guaranteed jobs is multi-tenant: guaranteed jobs belong to
      tenant ``A`` (the quota tenant), the others to ``B``; a trace without guaranteed
      jobs (``base``, ``bp``) has no tenants.
    """
    from shapeshift.perf.measurements import parse_trace_plan

    table = _load_table(path)
    table.require(RUBICK_COLUMNS, "rubick")
    ids = table.present("name").astype(str).str.strip()
    table.unique_ids(ids, "name")
    gpus = table.numeric("num_gpus", integer=True, minimum=1).astype("int64")
    table.numeric("bandwidth")
    plans = []
    parsed: dict[tuple[str, int], str] = {}
    for row, (text, g) in enumerate(
        zip(table.present("exec_plan").astype(str).str.strip(), gpus.tolist(), strict=True)
    ):
        key = (text, g)
        if key not in parsed:
            try:
                parsed[key] = str(parse_trace_plan(text, g))
            except (ValueError, ModelError) as exc:
                raise table.fail(row, "exec_plan", f"{exc} (num_gpus is {g})") from None
        plans.append(parsed[key])
    guaranteed = table.flags("is_sla")
    if guaranteed.any():
        tenant = pd.Series(np.where(guaranteed, RUBICK_QUOTA_TENANT, RUBICK_BEST_EFFORT_TENANT), dtype=object)
    else:
        tenant = pd.Series([""] * len(ids), dtype=object)
    out = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time": table.times("submission_time"),
            "num_gpus": gpus,
            "duration": table.numeric("duration"),
            "name": ids,
            "model": table.present("application").astype(str).str.strip(),
            "num_cpus": table.numeric("num_cpus"),
            "iterations": table.numeric("steps", integer=True).astype("Int64"),
            "plan": pd.Series(plans, dtype=object),
            "guaranteed": guaranteed,
            "tenant": tenant,
        }
    )
    return Workload.from_frame(Path(path).stem, out)


POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


@functools.cache
def pollux_reference() -> dict[str, dict]:
    """Reference iterations and run time per (application, replicas, batch size), derived
    from the Pollux artifact's profiles by ``scripts/derive_pollux_reference.py``."""
    text = resources.files("shapeshift").joinpath("data/pollux_reference.json").read_text()
    return json.loads(text)["applications"]


def read_pollux(path: str | Path) -> Workload:
    """The Pollux/AdaptDL evaluation workloads (``workload-N.csv``): ``name, time,
    application, num_replicas, batch_size``.

    The file has no durations: Pollux trains every job to the end of its application's
    training trace. Each job gets ``iterations`` (steps to that point at its batch size)
    and ``duration`` (those steps at the measured step time of its replicas packed 4 per
    node) from ``shapeshift/data/pollux_reference.json`` (derived from the artifact's
    profiles, see ``scripts/derive_pollux_reference.py``), so the jobs replay with the
    duration-based throughput model. ``num_replicas`` -> ``num_gpus``; ``application`` ->
    ``model``; ``batch_size`` only selects the reference row. A combination without a
    reference row is an error naming the ones known for that application.
    """
    table = _load_table(path)
    table.require(POLLUX_COLUMNS, "pollux")
    ids = table.present("name").astype(str).str.strip()
    table.unique_ids(ids, "name")
    apps = table.present("application").astype(str).str.strip()
    replicas = table.numeric("num_replicas", integer=True, minimum=1).astype("int64")
    batch = table.numeric("batch_size", integer=True, minimum=1).astype("int64")
    reference = pollux_reference()
    lookup = {
        (app, c["replicas"], c["batch_size"]): (c["iterations"], c["duration_s"])
        for app, info in reference.items()
        for c in info["configs"]
    }
    iterations, durations = [], []
    for row, key in enumerate(zip(apps.tolist(), replicas.tolist(), batch.tolist(), strict=True)):
        found = lookup.get(key)
        if found is None:
            app, r, b = key
            if app not in reference:
                raise table.fail(
                    row, "application", f"unknown application {app!r}; known: {', '.join(sorted(reference))}"
                )
            known = sorted({(c["replicas"], c["batch_size"]) for c in reference[app]["configs"]})
            shown = ", ".join(f"{kr}x{kb}" for kr, kb in known[:12])
            raise table.fail(
                row,
                "num_replicas",
                f"no reference run length for {app} with {r} replicas at batch size {b}; "
                f"known replicas x batch: {shown}{', ...' if len(known) > 12 else ''}",
            )
        iterations.append(found[0])
        durations.append(found[1])
    out = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time": table.times("time"),
            "num_gpus": replicas,
            "duration": pd.Series(durations, dtype=float),
            "name": ids,
            "model": apps,
            "iterations": pd.Series(iterations, dtype="Int64"),
        }
    )
    return Workload.from_frame(Path(path).stem, out)


SYNERGY_COLUMNS = ("job_id", "model", "arrival", "num_iters", "gpu_demand")
#: Synergy's convention for traces derived from job durations: one iteration per
#: second of the consolidated, fair-share run (``iter_is_duration`` in its simulator).
SYNERGY_SECONDS_PER_ITERATION = 1.0


def _looks_headerless(columns: list[str]) -> bool:
    if len(columns) != len(SYNERGY_COLUMNS):
        return False
    numeric = pd.to_numeric(pd.Series([columns[i] for i in (0, 2, 3, 4)]), errors="coerce")
    return bool(numeric.notna().all())


def read_synergy(
    path: str | Path, seconds_per_iteration: float | Mapping[str, float] = SYNERGY_SECONDS_PER_ITERATION
) -> Workload:
    """Synergy replay traces (msr-fiddle/synergy): ``job_id, model, arrival, num_iters,
    gpu_demand``, with that header or headerless as the Synergy simulator writes them.

    ``arrival`` is seconds; ``gpu_demand`` -> ``num_gpus``; ``num_iters`` ->
    ``iterations``. ``duration`` = iterations x ``seconds_per_iteration`` (one number, or
    a mapping by model; default 1 s, Synergy's own convention for duration-derived
    traces) so that the jobs also replay with the duration-based throughput model.
    """
    table = _load_table(path)
    columns = list(table.frame.columns)
    if table.is_csv and not set(SYNERGY_COLUMNS) <= set(columns) and _looks_headerless(columns):
        table = _load_table(path, names=SYNERGY_COLUMNS)
    table.require(SYNERGY_COLUMNS, "synergy")
    ids = table.present("job_id").astype(str).str.strip()
    table.unique_ids(ids, "job_id")
    models = table.present("model").astype(str).str.strip()
    iterations = table.numeric("num_iters", integer=True)
    if isinstance(seconds_per_iteration, Mapping):
        missing = models[~models.isin(list(seconds_per_iteration))]
        if not missing.empty:
            raise table.fail(
                int(missing.index[0]), "model", f"no seconds per iteration given for model {missing.iloc[0]!r}"
            )
        per_iteration = models.map(dict(seconds_per_iteration)).astype(float)
    else:
        per_iteration = pd.Series(float(seconds_per_iteration), index=models.index)
    out = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time": table.times("arrival"),
            "num_gpus": table.numeric("gpu_demand", integer=True).astype("int64"),
            "duration": iterations.astype(float) * per_iteration,
            "model": models,
            "iterations": iterations.astype("Int64"),
        }
    )
    return Workload.from_frame(Path(path).stem, out)


READERS: dict[str, Callable[[str | Path], Workload]] = {
    "generic": read_generic,
    "philly": read_philly,
    "helios": read_helios,
    "rubick": read_rubick,
    "pollux": read_pollux,
    "synergy": read_synergy,
}


def _header(path: Path) -> list[str]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    with path.open(newline="") as handle:
        first = handle.readline()
    return [c.strip() for c in first.strip().split(",")]


_SIGNATURES: dict[str, tuple[str, ...]] = {
    "generic": REQUIRED,
    "philly": PHILLY_COLUMNS,
    "helios": HELIOS_COLUMNS,
    "rubick": RUBICK_COLUMNS,
    "pollux": POLLUX_COLUMNS,
    "synergy": SYNERGY_COLUMNS,
}


def detect_format(path: str | Path) -> str:
    """Pick a reader from the file's header; fail naming every format tried. When several
    signatures match, the most specific (most columns) wins."""
    path = Path(path)
    if not path.exists():
        raise InputError("workload file not found", path=str(path))
    try:
        header = set(_header(path))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read the file header: {exc}", path=str(path)) from None
    matches = [fmt for fmt, columns in _SIGNATURES.items() if set(columns) <= header]
    if matches:
        return max(matches, key=lambda fmt: len(_SIGNATURES[fmt]))
    tried = "; ".join(f"{fmt} ({', '.join(cols)})" for fmt, cols in _SIGNATURES.items())
    raise InputError(
        f"cannot tell the trace format from its header; tried {tried}. Pass --format to choose one",
        path=str(path),
        line=1,
    )


def read_workload(path: str | Path, fmt: str | None = None) -> Workload:
    """Read a trace with the named reader, or the one its header matches."""
    fmt = fmt or detect_format(path)
    if fmt not in READERS:
        raise InputError(f"unknown workload format {fmt!r}; known: {', '.join(sorted(READERS))}")
    return READERS[fmt](path)
